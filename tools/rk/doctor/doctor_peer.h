/*
 * doctor_peer.h - rk doctor across two hosts: `rk doctor HOST[:PORT]`
 * against `rk doctor --listen` on the peer.
 *
 *   doctor_wire.c    the control messages (hello, welcome, facts, do,
 *                    result, error): codec
 *   doctor_gate.c    what the listener asks of a peer before anything else:
 *                    an rk doctor hello, in time, with the token
 *   doctor_peer.c    the control channel, this side's facts, the exchange
 *                    and the comparison of both sides (the client's run)
 *   doctor_link.c    the link: the rdma_cm connection's resources and the
 *                    verified transfers both ends use (doctor_link_int.h)
 *   doctor_link_client.c  the client's side of each step, and its report
 *   doctor_link_serve.c   the listener's side of each step
 *   doctor_listen.c  the listener: every connection at once until it has
 *                    proven itself, then one test at a time
 *   doctor_session.c the listener's side of one admitted client's test
 *
 * The client drives: it connects over TCP and says hello (with its token,
 * if any); the listener welcomes it or says why not (a wrong token, busy
 * with another test); then both sides send their facts, the client
 * compares them, then asks for each step of the link test in turn ("do"),
 * and the listener answers each with a result. Every wait has a deadline
 * (the client's per-step --timeout, which the listener adopts within its
 * own bounds), so a silent or hostile peer ends a step, never the program.
 *
 * Single-threaded; the listener runs each test in a child process.
 */
#ifndef RK_DOCTOR_PEER_H
#define RK_DOCTOR_PEER_H

#include <stdint.h>

#include <rdmakit/device.h>
#include <rdmakit/error.h>

#include "doctor.h"
#include "doctor_wire.h"

#define DOC_DEFAULT_PORT    "18517"
#define DOC_DEFAULT_STEP_MS 5000

/* The listener's bound on the link test's waits, from its facts on, in steps. */
#define DOC_LINK_STEPS (3 * DOC_STEP_COUNT + 2)
/*
 * ... and on a whole session, welcome to the end, past which it kills it:
 * the welcome, the client's facts, ours and the link test, each at the
 * listener's --timeout at most, and the local checks (a few seconds).
 */
#define DOC_LOCAL_CHECKS_MS 15000
#define DOC_SESSION_MS(max_step_ms)                                                                \
	((uint64_t)(DOC_LINK_STEPS + 3) * (uint64_t)(max_step_ms) + DOC_LOCAL_CHECKS_MS)

/* ---- the control channel (doctor_peer.c) ------------------------------- */

/* doc_ctl_send - one message on socket @fd within @timeout_ms. 0 or -errno (@err). */
int doc_ctl_send(int fd, const struct doc_msg *m, int timeout_ms, struct rk_error *err);

/*
 * doc_ctl_recv - the next message within @timeout_ms. Returns 0, -ETIMEDOUT,
 * -ECONNRESET (closed), -EBADMSG (not rk doctor's frame or a bad message:
 * @err says what came, printable), -EPROTO (another version), -EMSGSIZE.
 */
int doc_ctl_recv(int fd, struct doc_msg *m, int timeout_ms, struct rk_error *err);

/* doc_sock_addrs - the local and peer address of connected socket @fd, numeric. */
int doc_sock_addrs(int fd, char *local, char *peer, size_t len);

/*
 * doc_local_facts - this side's facts for the link from @addr: the device
 * whose netdev holds @addr (opened into *@dev, owned by the caller), its
 * port, MTUs, GID, and the ! / ✗ lines and memlock facts of the local
 * report @r (whose checks have run).
 */
int doc_local_facts(const struct doc_report *r, const char *addr, struct doc_facts *f,
		    struct rk_device **dev, struct rk_error *err);

/*
 * doc_compare - the peer's own ! and ✗ lines, then both sides compared
 * (versions, link layer, GID types, MTU and the path MTU, memlock), each a
 * verdict line in @r saying what to change on which host.
 */
void doc_compare(struct doc_report *r, const struct doc_facts *me, const struct doc_facts *peer,
		 const char *peer_name);

/* doc_facts_json - @f as a JSON object (new reference). */
struct json_object *doc_facts_json(const struct doc_facts *f);

/*
 * doc_peer_run - the client: rk doctor HOST[:PORT] after the local checks in
 * @r. Adds the exchange, comparison and link lines to @r and the facts under
 * "peer" and "link". @token: the digest its hello carries (NULL: none).
 */
void doc_peer_run(struct doc_report *r, const char *target, int step_ms, const uint8_t *token);

/* ---- the link test (doctor_link*.c) ------------------------------------- */

struct doc_link;

/*
 * doc_link_open - this side's end: a protection domain of its own on @dev,
 * a local buffer, a DOC_XFER_LEN buffer the peer may write and one it may
 * read (nothing else of this process is reachable by the peer), and for
 * the listener an rdma_cm listener on @addr, port chosen by the kernel.
 * Fills the link fields of @f. @seed: the patterns' seed (the client's).
 */
int doc_link_open(struct rk_device *dev, int listener, const char *addr, uint64_t seed,
		  struct doc_facts *f, struct rk_error *err, struct doc_link **out);

/* doc_link_close - release everything, in reverse order. Accepts NULL. */
void doc_link_close(struct doc_link *l);

/*
 * doc_link_client - run every step against the listener over control socket
 * @fd, each within @step_ms, adding one verdict line per step to @r (with
 * the explanation of a failure) and the facts under "link". Stops at the
 * first failure. Returns the number of steps that passed.
 */
int doc_link_client(struct doc_report *r, struct doc_link *l, int fd, const struct doc_facts *me,
		    const struct doc_facts *peer, const char *peer_name, int step_ms);

/*
 * doc_link_serve - the listener's side: answer the client's "do" messages on
 * @fd until it is done, gone or @deadline_ns passes, each wait within
 * @step_ms. @client are its facts; @client_ip its TCP address, the only one
 * whose rdma_cm connection is accepted. Logs each step to stderr.
 */
void doc_link_serve(struct doc_link *l, int fd, const struct doc_facts *client,
		    const char *client_ip, int step_ms, uint64_t deadline_ns);

/* ---- the listener (doctor_listen.c) ------------------------------------- */

/*
 * doc_listen - rk doctor --listen on @addr (NULL any) and @port until
 * killed (or after one test with @once): up to DOC_PENDING_MAX connections
 * at once wait for their hello (doctor_gate.h), each within DOC_HELLO_MS;
 * an admitted client's test runs in a child process, one at a time, and a
 * client admitted meanwhile is told the listener is busy. @token: the
 * digest a client must send (NULL: none needed). Returns an exit status.
 */
int doc_listen(const char *addr, const char *port, int once, int max_step_ms, const uint8_t *token);

/*
 * doc_session - the listener's side of one admitted client on @fd (@local
 * and @ip its addresses; @checked: its token was checked): the welcome,
 * both sides' facts and the link test, every wait within @max_step_ms or
 * the client's shorter step. Logs to stderr.
 */
void doc_session(int fd, const char *local, const char *ip, int checked, int max_step_ms);

#endif
