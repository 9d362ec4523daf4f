/*
 * doctor_wire.c - rk doctor's control messages (tools/rk/doctor/doctor_wire.c): the
 * facts, "do" and results a peer's rk doctor sends.
 *
 * Input: a frame (header and JSON payload); when the header does not hold
 * exactly the rest, the bytes are also tried as a payload alone, so that
 * mutations of the JSON reach the decoder without the header in the way.
 * Every input also goes through the listener's gate (doctor_gate.h) as the
 * first bytes of a connection, with and without a token.
 *
 * Asserts, for any bytes:
 *  - the frame header gives a length only in 1..DOC_WIRE_MAX, only after
 *    the magic;
 *  - a rejected message says why, in printable text, and leaves no stale
 *    fields; an accepted one has every text field printable and terminated
 *    within its array, every number in its range (MTUs, port, GID index,
 *    lines, steps, buffers that do not wrap);
 *  - what was accepted re-encodes into a frame that decodes to the same;
 *  - the gate never asks for more than a hello's frame, never admits
 *    anything but a whole hello of this version, with the token when it
 *    has one (checked only then), and says why it refuses, printably.
 */
#include <string.h>

#include <errno.h>

#include "../tools/rk/doctor/doctor_gate.h"
#include "../tools/rk/doctor/doctor_wire.h"
#include "fuzz.h"

#define PRINTABLE(a) FUZZ_CHECK(fuzz_printable((a), sizeof(a)))

static int mtu_ok(int v)
{
	return v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096;
}

static void check_facts(const struct doc_facts *f)
{
	PRINTABLE(f->rk_version);
	PRINTABLE(f->kernel);
	PRINTABLE(f->host);
	PRINTABLE(f->dev);
	PRINTABLE(f->link_layer);
	PRINTABLE(f->netdev);
	PRINTABLE(f->addr);
	FUZZ_CHECK(f->port >= 1 && f->port <= 255);
	FUZZ_CHECK(mtu_ok(f->active_mtu) && mtu_ok(f->max_mtu));
	FUZZ_CHECK(f->gid_index >= -1 && f->gid_index <= 255);
	FUZZ_CHECK(f->roce_v2 == 0 || f->roce_v2 == 1);
	FUZZ_CHECK(f->memlock_soft >= -1 && f->memlock_hard >= -1);
	FUZZ_CHECK(f->nlines >= 0 && f->nlines <= DOC_PEER_LINES);
	for (int i = 0; i < f->nlines; i++) {
		PRINTABLE(f->lines[i].check);
		PRINTABLE(f->lines[i].text);
		PRINTABLE(f->lines[i].fix);
		FUZZ_CHECK(f->lines[i].fail == 0 || f->lines[i].fail == 1);
	}
	FUZZ_CHECK(f->step_ms >= 0 && f->step_ms <= DOC_STEP_MS_MAX);
	FUZZ_CHECK(f->cm_port >= 0 && f->cm_port <= 65535);
	FUZZ_CHECK(f->wr_addr + DOC_XFER_LEN > f->wr_addr);
	FUZZ_CHECK(f->rd_addr + DOC_XFER_LEN > f->rd_addr);
}

#define SAME_STR(f) (strcmp(a->f, b->f) == 0)

static int same_facts(const struct doc_facts *a, const struct doc_facts *b)
{
	if (!(SAME_STR(rk_version) && SAME_STR(kernel) && SAME_STR(host) && SAME_STR(dev) &&
	      SAME_STR(link_layer) && SAME_STR(netdev) && SAME_STR(addr) && a->port == b->port &&
	      a->active_mtu == b->active_mtu && a->max_mtu == b->max_mtu &&
	      a->netdev_mtu == b->netdev_mtu && a->gid_index == b->gid_index &&
	      a->roce_v2 == b->roce_v2 && a->memlock_soft == b->memlock_soft &&
	      a->memlock_hard == b->memlock_hard && a->cap_ipc_lock == b->cap_ipc_lock &&
	      a->nfail == b->nfail && a->nwarn == b->nwarn && a->nlines == b->nlines &&
	      a->step_ms == b->step_ms && a->cm_port == b->cm_port && a->nonce == b->nonce &&
	      a->seed == b->seed && a->wr_addr == b->wr_addr && a->rd_addr == b->rd_addr &&
	      a->wr_rkey == b->wr_rkey && a->rd_rkey == b->rd_rkey))
		return 0;
	for (int i = 0; i < a->nlines; i++)
		if (!(SAME_STR(lines[i].check) && SAME_STR(lines[i].text) &&
		      SAME_STR(lines[i].fix) && a->lines[i].fail == b->lines[i].fail))
			return 0;
	return 1;
}

static int same_msg(const struct doc_msg *a, const struct doc_msg *b)
{
	return a->type == b->type && a->step == b->step && a->ok == b->ok &&
	       a->wc_status == b->wc_status && a->timed_out == b->timed_out &&
	       a->value == b->value && SAME_STR(text) && same_facts(&a->facts, &b->facts) &&
	       a->has_token == b->has_token && a->checked == b->checked &&
	       memcmp(a->token, b->token, sizeof(a->token)) == 0;
}

static void check_payload(const uint8_t *data, size_t size)
{
	static uint8_t enc[DOC_WIRE_HDR + DOC_WIRE_MAX];
	static struct doc_msg m, again;
	char why[160];
	uint32_t len;
	int n, r = doc_msg_decode(data, size, &m, why, sizeof(why));

	if (r) {
		FUZZ_CHECK(why[0] != '\0' && fuzz_printable(why, sizeof(why)));
		FUZZ_CHECK(m.facts.nlines == 0 && m.text[0] == '\0' && m.step == 0 &&
			   !m.has_token && !m.checked);
		return;
	}
	FUZZ_CHECK(m.type >= DOC_MSG_FACTS && m.type <= DOC_MSG_LAST);
	FUZZ_CHECK(m.type == DOC_MSG_HELLO || !m.has_token);
	FUZZ_CHECK(m.checked == 0 || m.checked == 1);
	FUZZ_CHECK(m.step >= 0 && m.step < DOC_STEP_COUNT);
	FUZZ_CHECK(m.ok == 0 || m.ok == 1);
	FUZZ_CHECK(m.wc_status >= -1 && m.wc_status <= 255);
	FUZZ_CHECK(m.timed_out == 0 || m.timed_out == 1);
	PRINTABLE(m.text);
	if (m.type == DOC_MSG_FACTS)
		check_facts(&m.facts);
	n = doc_msg_encode(&m, enc, sizeof(enc));
	FUZZ_CHECK(n > DOC_WIRE_HDR);
	FUZZ_CHECK(doc_frame_len(enc, &len) == 0 && len == (uint32_t)n - DOC_WIRE_HDR);
	FUZZ_CHECK(doc_msg_decode(enc + DOC_WIRE_HDR, len, &again, NULL, 0) == 0);
	FUZZ_CHECK(same_msg(&m, &again));
}

/* The token the gate holds when it has one (the seed "hello-token" carries it). */
static const uint8_t gate_token[DOC_TOKEN_LEN] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
						  0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe};

/* @data as the first bytes of a connection to rk doctor --listen, fed in as the listener reads. */
static void check_gate(const uint8_t *data, size_t size, const uint8_t *token)
{
	static struct doc_msg m;
	char why[256];
	size_t got = 0;
	int need, checked = -1, r;

	for (;;) {
		why[0] = '\0';
		need = doc_hello_need(data, got, why, sizeof(why));
		if (need < 0) {
			FUZZ_CHECK(need == -EBADMSG || need == -EMSGSIZE);
			FUZZ_CHECK(why[0] != '\0' && fuzz_printable(why, sizeof(why)));
			return;
		}
		FUZZ_CHECK((size_t)need >= got && need >= DOC_WIRE_HDR &&
			   need <= DOC_WIRE_HDR + DOC_HELLO_MAX);
		if ((size_t)need == got || (size_t)need > size)
			break;
		got = (size_t)need; /* the listener reads up to what it needs, no further */
	}
	if ((size_t)need != got)
		return; /* the peer would be cut off at DOC_HELLO_MS */
	why[0] = '\0';
	r = doc_hello_judge(data, got, token, &checked, why, sizeof(why));
	if (r) {
		FUZZ_CHECK(r == -EBADMSG || r == -EMSGSIZE || r == -EPROTO || r == -EACCES);
		FUZZ_CHECK(checked == 0 && why[0] != '\0' && fuzz_printable(why, sizeof(why)));
		return;
	}
	/* admitted: a whole hello of this version, with the token if there is one */
	FUZZ_CHECK(doc_msg_decode(data + DOC_WIRE_HDR, got - DOC_WIRE_HDR, &m, NULL, 0) == 0);
	FUZZ_CHECK(m.type == DOC_MSG_HELLO && data[DOC_WIRE_HDR - 1] == DOC_MSG_HELLO);
	FUZZ_CHECK(checked == (token != NULL));
	if (token)
		FUZZ_CHECK(m.has_token && memcmp(m.token, token, DOC_TOKEN_LEN) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t len = 0;

	check_gate(data, size, NULL);
	check_gate(data, size, gate_token);

	if (size >= DOC_WIRE_HDR) {
		int r = doc_frame_len(data, &len);

		FUZZ_CHECK(r != 0 || (memcmp(data, DOC_WIRE_MAGIC, 4) == 0 && len >= 1 &&
				      len <= DOC_WIRE_MAX));
		if (r == 0 && len == size - DOC_WIRE_HDR) {
			check_payload(data + DOC_WIRE_HDR, len);
			return 0;
		}
	}
	check_payload(data, size);
	return 0;
}

static void emit_msg(fuzz_emit_fn *emit, const char *name, const struct doc_msg *m)
{
	static uint8_t buf[DOC_WIRE_HDR + DOC_WIRE_MAX];
	int n = doc_msg_encode(m, buf, sizeof(buf));

	if (n > 0)
		emit(name, buf, (size_t)n);
}

void fuzz_seeds(fuzz_emit_fn *emit)
{
	static struct doc_msg m;
	struct doc_facts *f = &m.facts;

	memset(&m, 0, sizeof(m));
	m.type = DOC_MSG_FACTS;
	strcpy(f->rk_version, "0.4.0");
	strcpy(f->kernel, "6.1.0-28-amd64");
	strcpy(f->host, "hostb");
	strcpy(f->dev, "rxe0");
	strcpy(f->link_layer, "Ethernet");
	strcpy(f->netdev, "eth0");
	strcpy(f->addr, "10.77.0.2");
	f->port = 1;
	f->active_mtu = 4096;
	f->max_mtu = 4096;
	f->netdev_mtu = 9000;
	f->gid_index = 1;
	f->roce_v2 = 1;
	f->memlock_soft = -1;
	f->memlock_hard = -1;
	f->cm_port = 40123;
	f->wr_addr = 0x7f1200000000ull;
	f->wr_rkey = 0x1234;
	f->rd_addr = 0x7f1200001000ull;
	f->rd_rkey = 0x5678;
	f->nonce = 0xdeadbeef;
	f->seed = 0x0123456789abcdefull;
	emit_msg(emit, "facts", &m);
	f->nfail = 1;
	f->nwarn = 1;
	f->nlines = 2;
	strcpy(f->lines[0].check, "memlock");
	f->lines[0].fail = 1;
	strcpy(f->lines[0].text, "locked-memory limit (ulimit -l) 64 KiB, hard 64 KiB");
	strcpy(f->lines[0].fix, "ulimit -l unlimited");
	strcpy(f->lines[1].check, "mtu");
	strcpy(f->lines[1].text, "rxe0 port 1: active MTU 1024 of max 4096");
	strcpy(f->lines[1].fix, "sudo ip link set eth0 mtu 4200");
	f->active_mtu = 1024;
	f->netdev_mtu = 1500;
	emit_msg(emit, "facts-lines", &m);
	memset(&m, 0, sizeof(m));
	m.type = DOC_MSG_DO;
	m.step = DOC_STEP_WRITE_IN;
	emit_msg(emit, "do", &m);
	m.type = DOC_MSG_RESULT;
	m.step = DOC_STEP_SEND_OUT;
	m.wc_status = 12;
	strcpy(m.text, "completion status transport retry counter exceeded (12)");
	emit_msg(emit, "result-fail", &m);
	m.wc_status = -1;
	m.timed_out = 1;
	strcpy(m.text, "no completion within 2000 ms");
	emit_msg(emit, "result-timeout", &m);
	m.timed_out = 0;
	m.type = DOC_MSG_RESULT;
	m.step = DOC_STEP_CONNECT;
	m.ok = 1;
	m.wc_status = -1;
	m.value = 4096;
	strcpy(m.text, "the peer accepted it, path MTU 4096");
	emit_msg(emit, "result-ok", &m);
	m.type = DOC_MSG_ERROR;
	strcpy(m.text, "no usable RDMA device for 10.77.0.2 there");
	emit_msg(emit, "error", &m);
	memset(&m, 0, sizeof(m));
	m.type = DOC_MSG_HELLO;
	emit_msg(emit, "hello", &m);
	m.has_token = 1;
	memcpy(m.token, gate_token, DOC_TOKEN_LEN);
	emit_msg(emit, "hello-token", &m);
	m.token[DOC_TOKEN_LEN - 1] ^= 1;
	emit_msg(emit, "hello-wrong-token", &m);
	memset(&m, 0, sizeof(m));
	m.type = DOC_MSG_WELCOME;
	m.checked = 1;
	emit_msg(emit, "welcome", &m);
	emit("hello-v1", "RKDR\0\0\0\x13\x05{\"v\":1,\"t\":\"hello\"}", 28);
	emit("hello-long", "RKDR\0\0\x40\0\x05{", 10);
	emit("not-json", "RKDR\0\0\0\3\x05{\"v", 12);
	emit("http", "GET / HTTP/1.0\r\n\r\n", 18);
}
