/* copy_progress.c - see copy_progress.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "copy_progress.h"

#define REDRAW_NS 200000000ull
#define BAR	  24

void cp_progress_init(struct cp_progress *p, uint64_t total, int enabled)
{
	memset(p, 0, sizeof(*p));
	p->enabled = enabled;
	p->total = total;
	p->t0 = cli_now_ns();
}

static void draw(struct cp_progress *p, uint64_t now)
{
	/*
	 * A pull's total is the server's word: clamp before any conversion,
	 * so that no total (0, or far below what arrives) can overflow.
	 */
	double secs = (double)(now - p->t0) / 1e9,
	       frac = p->total ? (double)p->done / (double)p->total : (p->done ? 1 : 0);
	double bps = secs > 0 ? (double)p->done * 8 / secs : 0;
	char bytes[32], rate[32], eta[32], bar[BAR + 1], rc[32] = "";
	int fill;

	if (frac > 1)
		frac = 1;
	fill = (int)(frac * BAR);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '-', (size_t)(BAR - fill));
	bar[BAR] = '\0';
	if (bps > 0 && p->total > p->done && (double)(p->total - p->done) * 8 / bps < 360000) {
		unsigned s = (unsigned)((double)(p->total - p->done) * 8 / bps);

		snprintf(eta, sizeof(eta), "%u:%02u", s / 60, s % 60);
	} else {
		snprintf(eta, sizeof(eta), "--:--");
	}
	if (p->reconnects)
		snprintf(rc, sizeof(rc), " (%u reconnect%s)", p->reconnects,
			 p->reconnects == 1 ? "" : "s");
	fprintf(stderr, "\r\033[K[%s] %3d%% %s %s ETA %s%s %.40s", bar, (int)(frac * 100),
		cli_fmt_bytes(p->done, bytes, sizeof(bytes)), cli_fmt_rate(bps, rate, sizeof(rate)),
		eta, rc, p->name);
	fflush(stderr);
	p->drawn = 1;
	p->last_draw = now;
}

void cp_progress_add(struct cp_progress *p, uint64_t bytes, const char *name)
{
	uint64_t now;

	p->done += bytes;
	if (name && strncmp(p->name, name, sizeof(p->name) - 1))
		snprintf(p->name, sizeof(p->name), "%s", name);
	if (!p->enabled)
		return;
	now = cli_now_ns();
	if (now - p->last_draw >= REDRAW_NS)
		draw(p, now);
}

void cp_progress_restart(struct cp_progress *p, uint64_t done, unsigned reconnects)
{
	p->done = done;
	p->reconnects = reconnects;
	if (p->enabled)
		draw(p, cli_now_ns());
}

void cp_progress_clear(struct cp_progress *p)
{
	if (p->enabled && p->drawn) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
		p->drawn = 0;
	}
}
