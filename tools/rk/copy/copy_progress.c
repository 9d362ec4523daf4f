/* copy_progress.c - see copy_progress.h. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "copy_progress.h"

#define REDRAW_NS	200000000ull  /* a terminal: five times a second */
#define REDRAW_LINES_NS 1000000000ull /* plain lines: once a second */
#define BAR		20

void cp_progress_init(struct cp_progress *p, uint64_t total, uint32_t files, int mode)
{
	memset(p, 0, sizeof(*p));
	p->enabled = mode;
	p->total = total;
	p->files_total = files;
	p->t0 = cli_now_ns();
}

static void draw(struct cp_progress *p, uint64_t now)
{
	/*
	 * A pull's totals are the server's word: clamp before any conversion,
	 * so that no total (0, or far below what arrives) can overflow.
	 */
	double secs = (double)(now - p->t0) / 1e9,
	       frac = p->total ? (double)p->done / (double)p->total : (p->done ? 1 : 0);
	double rate = secs > 0 ? (double)p->done / secs : 0;
	char done[32], total[32], rs[32], eta[32], bar[BAR + 1], rc[32] = "", files[48] = "";
	int fill;

	if (frac > 1)
		frac = 1;
	fill = (int)(frac * BAR);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '-', (size_t)(BAR - fill));
	bar[BAR] = '\0';
	if (rate > 0 && p->total > p->done && (double)(p->total - p->done) / rate < 360000) {
		unsigned s = (unsigned)((double)(p->total - p->done) / rate);

		snprintf(eta, sizeof(eta), "%u:%02u", s / 60, s % 60);
	} else {
		snprintf(eta, sizeof(eta), "--:--");
	}
	if (p->files_total)
		snprintf(files, sizeof(files), ", %u/%u files",
			 p->files_done < p->files_total ? p->files_done : p->files_total,
			 p->files_total);
	if (p->reconnects)
		snprintf(rc, sizeof(rc), " (%u reconnect%s)", p->reconnects,
			 p->reconnects == 1 ? "" : "s");
	fprintf(stderr, "%s[%s] %3d%% %s / %s%s, %s, ETA %s%s %.40s%s",
		p->enabled == CP_PROGRESS_TTY ? "\r\033[K" : "", bar, (int)(frac * 100),
		cli_fmt_bytes(p->done, done, sizeof(done)),
		cli_fmt_bytes(p->total > p->done ? p->total : p->done, total, sizeof(total)), files,
		cli_fmt_rate(rate, rs, sizeof(rs)), eta, rc, p->name,
		p->enabled == CP_PROGRESS_TTY ? "" : "\n");
	fflush(stderr);
	p->drawn = p->enabled == CP_PROGRESS_TTY;
	p->last_draw = now;
}

static void maybe_draw(struct cp_progress *p)
{
	uint64_t now;

	if (!p->enabled)
		return;
	now = cli_now_ns();
	if (now - p->last_draw >= (p->enabled == CP_PROGRESS_TTY ? REDRAW_NS : REDRAW_LINES_NS))
		draw(p, now);
}

void cp_progress_add(struct cp_progress *p, uint64_t bytes, const char *name)
{
	p->done += bytes;
	if (name && strncmp(p->name, name, sizeof(p->name) - 1))
		snprintf(p->name, sizeof(p->name), "%s", name);
	maybe_draw(p);
}

void cp_progress_file(struct cp_progress *p)
{
	if (!p)
		return;
	p->files_done++;
	maybe_draw(p);
}

void cp_progress_restart(struct cp_progress *p, uint64_t done, uint32_t files, unsigned reconnects)
{
	p->done = done;
	p->files_done = files;
	p->reconnects = reconnects;
	if (p->enabled)
		draw(p, cli_now_ns());
}

void cp_progress_clear(struct cp_progress *p)
{
	if (p->enabled == CP_PROGRESS_TTY && p->drawn) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
		p->drawn = 0;
	}
}

void cp_progress_end(struct cp_progress *p)
{
	if (p->enabled == CP_PROGRESS_LINES)
		draw(p, cli_now_ns()); /* the last state, as a line of its own */
	cp_progress_clear(p);
}
