/*
 * explain_table.c - the one table of RDMA failures: meaning, usual causes
 * (most likely first), fixes, and the one-line hint rk_error shows.
 *
 * Pure data. Order matters only for errnos: an entry naming calls is found
 * before the entry for any call with the same errno (rk_explain_find looks
 * for a call match first). Kept apart from the lookup code so the data can
 * be reviewed on its own.
 */
#include <errno.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "explain_table.h"

#define WC(sym)                                                                                    \
	.kind = RK_EXPLAIN_WC_STATUS, .code = IBV_WC_##sym, .name = "IBV_WC_" #sym, .alias = #sym
#define EV(sym)                                                                                    \
	.kind = RK_EXPLAIN_CM_EVENT, .code = RDMA_CM_EVENT_##sym, .name = "RDMA_CM_EVENT_" #sym,   \
	.alias = #sym
#define ERR(sym) .kind = RK_EXPLAIN_ERRNO, .code = (sym), .name = #sym
#define REJ(n, sym)                                                                                \
	.kind = RK_EXPLAIN_CM_REJECT, .code = (n), .name = "IB_CM_REJ_" #sym, .alias = #sym

/* RD (reliable datagram) is not implemented by any current provider. */
#define RD_ONLY_CAUSES                                                                             \
	{                                                                                          \
		"only the reliable-datagram transport reports this; no current device implements " \
		"RD, so a provider bug or memory corruption of the completion is more likely"      \
	}
#define RD_ONLY_FIXES                                                                              \
	{                                                                                          \
		"check the QP type you created",                                                   \
		    "report it with the vendor_err and the provider's version"                     \
	}

#define MEMLOCK_HINT                                                                               \
	"locked-memory limit (RLIMIT_MEMLOCK) too low: raise it with 'ulimit -l unlimited', "      \
	"memlock in /etc/security/limits.conf, or for containers --ulimit memlock=-1"
#define MEMLOCK_FIX_SHELL  "ulimit -l unlimited (or a limit above what you register), then rerun"
#define MEMLOCK_FIX_LIMITS "/etc/security/limits.conf: '* - memlock unlimited' (log in again)"
#define MEMLOCK_FIX_CONTAINER                                                                      \
	"containers: docker run --ulimit memlock=-1 --device /dev/infiniband ..."
#define MEMLOCK_FIX_SYSTEMD "systemd services: LimitMEMLOCK=infinity in the unit's [Service]"
#define QP_CAPS_HINT	    "queue depth, SGE count or inline size exceeds the device caps"

const struct rk_explain rk__explain_table[] = {
    /* ---- work-completion statuses ---------------------------------- */
    {WC(SUCCESS), .meaning = "The work request completed without error.",
     .causes = {"not a failure"}, .fixes = {"nothing to fix"}},
    {WC(LOC_LEN_ERR),
     .meaning = "Local length error: the message did not fit. On a receive, the incoming message "
		"was longer than the posted buffer; on a send, the message exceeded what the port "
		"or the QP allows.",
     .causes = {"the peer sent more than the receive buffer posted here holds",
		"a send longer than the port's max message size (ibv_devinfo -v: max_msg_sz)",
		"SGE lengths that do not add up to what was meant"},
     .fixes = {"post receives as large as the largest message the peer sends (agree the size in "
	       "the handshake)",
	       "split large transfers into several work requests", "check every sge.length"},
     .hint = "message longer than the posted receive buffer (or the MR), "
	     "or over the port's max message size"},
    {WC(LOC_QP_OP_ERR),
     .meaning = "Local QP operation error: the work request is not valid for this QP, or the QP "
		"was not in a state that can execute it.",
     .causes = {"more SGEs than the QP was created with (max_send_sge / max_recv_sge)",
		"IBV_SEND_INLINE with more bytes than max_inline_data",
		"an opcode the QP type does not support (e.g. RDMA READ on UD)",
		"posting before the QP reached RTS"},
     .fixes = {"keep num_sge and inline sizes within the caps the QP was created with",
	       "wait for the connection to be established before posting sends"},
     .hint = "malformed work request (too many SGEs, inline too large) or QP not ready to send"},
    {WC(LOC_EEC_OP_ERR), .meaning = "Local EE context operation error (reliable datagram only).",
     .causes = RD_ONLY_CAUSES, .fixes = RD_ONLY_FIXES,
     .hint = "reliable-datagram error: not expected on RC/UC/UD; suspect the provider"},
    {WC(LOC_PROT_ERR),
     .meaning = "Local protection error: a local buffer of the work request is not covered by a "
		"memory region of the QP's protection domain with that lkey.",
     .causes = {"wrong lkey (from another MR, or a stale one after ibv_dereg_mr)",
		"address + length runs past the end of the MR",
		"the MR belongs to another protection domain than the QP",
		"the MR was deregistered while the request was outstanding"},
     .fixes = {"use the lkey of the MR that contains [addr, addr+length)",
	       "register QP and MRs on the same PD",
	       "deregister an MR only after its requests completed"},
     .hint = "lkey / PD mismatch: the local buffer is not inside an MR of this "
	     "PD (wrong lkey, or address + length outside the MR)"},
    {WC(WR_FLUSH_ERR),
     .meaning = "Work request flushed: the QP is in the error state, so every outstanding and "
		"new work request completes with this status. It is a consequence, not a cause.",
     .causes = {"an earlier completion on this QP failed (look for the first non-flush error)",
		"the connection was closed or the QP destroyed/moved to error on purpose "
		"(normal during shutdown)"},
     .fixes = {"find the first failed completion or CM event of this connection and explain that",
	       "during shutdown, treat flushes as expected"},
     .hint = "QP already in error: this work request was flushed; "
	     "see the connection's first failure"},
    {WC(MW_BIND_ERR),
     .meaning = "Memory window bind error: binding a memory window to an MR failed.",
     .causes = {"the MR was not registered with IBV_ACCESS_MW_BIND",
		"the window's range lies outside the MR, or the access asked exceeds the MR's",
		"window, MR and QP are in different protection domains",
		"type 2 window bound with a wrong rkey or through another QP"},
     .fixes = {"register the MR with IBV_ACCESS_MW_BIND and the access the window grants",
	       "bind within the MR's range, on a QP of the same PD"},
     .hint = "memory window bind failed: MR without MW_BIND access, range or PD mismatch"},
    {WC(BAD_RESP_ERR),
     .meaning = "Bad response: the responder answered with something the transport did not "
		"expect.",
     .causes = {"the remote QP is not the one this QP was connected to (stale QPN after a "
		"restart)",
		"mismatched QP types or transport settings on the two sides",
		"a provider or firmware bug"},
     .fixes = {"reconnect through rdma_cm rather than reusing QP numbers",
	       "check that both ends run matching software", "report with the vendor_err"},
     .hint = "unexpected response from the peer: stale connection or mismatched QP setup"},
    {WC(LOC_ACCESS_ERR),
     .meaning = "Local access error: the local MR does not grant the access the operation needs "
		"(receive buffers, RDMA READ and atomic targets are written locally).",
     .causes = {"the MR lacks IBV_ACCESS_LOCAL_WRITE and is used for a receive, an RDMA READ "
		"result or an atomic result",
		"an incoming RDMA WRITE with immediate hit a local buffer it may not touch"},
     .fixes = {"register receive and READ-target buffers with IBV_ACCESS_LOCAL_WRITE"},
     .hint = "local access violation: the MR lacks the access the operation "
	     "needs (LOCAL_WRITE for a receive or READ target)"},
    {WC(REM_INV_REQ_ERR),
     .meaning = "Remote invalid request: the responder refused the request as invalid for its "
		"QP.",
     .causes = {"the remote QP was not given the access (qp_access_flags REMOTE_WRITE / "
		"REMOTE_READ / REMOTE_ATOMIC) the opcode needs",
		"the message is longer than the receive buffer the peer posted",
		"an opcode the remote QP does not support, or a misaligned atomic"},
     .fixes = {"set the remote QP's access flags (rdma_cm: the responder_resources and the "
	       "QP's access) to what the peer will do",
	       "make the peer's receive buffers as large as the largest SEND"},
     .hint = "the peer refused the request: opcode not allowed by its QP, "
	     "or message longer than its receive buffer"},
    {WC(REM_ACCESS_ERR),
     .meaning = "Remote access error: the RDMA READ/WRITE/atomic was refused by the peer's "
		"memory protection.",
     .causes = {"wrong rkey (stale after the peer re-registered, or of another MR)",
		"the peer's MR lacks IBV_ACCESS_REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC",
		"remote address + length outside the peer's MR",
		"the peer deregistered the MR or invalidated the memory window"},
     .fixes = {"exchange addr/rkey/length after the peer registers, and check the bounds",
	       "register the target MR with the remote access the operation needs"},
     .hint = "remote access error: wrong rkey, peer MR lacks REMOTE_WRITE / "
	     "REMOTE_READ access, or address + length outside the peer's MR"},
    {WC(REM_OP_ERR),
     .meaning = "Remote operation error: the responder could not complete the request because "
		"of a problem on its side.",
     .causes = {"the peer's posted receive is bad (its lkey or length invalid)",
		"the peer's receive buffer too small for the message",
		"the peer's QP failed while processing the request"},
     .fixes = {"check the peer's log for its own completion error",
	       "check the receive buffers the peer posts"},
     .hint = "the peer could not complete the operation "
	     "(its receive buffer too small, or its QP failed)"},
    {WC(RETRY_EXC_ERR),
     .meaning = "Transport retry counter exceeded: the request was sent retry_cnt + 1 times and "
		"no acknowledgement came back within the ACK timeout.",
     .causes = {"the peer is gone: its process died, or its QP was destroyed or is in error",
		"the path is broken: link or port down, cable, switch",
		"RoCE v2 traffic (UDP 4791) blocked by a firewall or dropped",
		"GID type mismatch (RoCE v1 at one end, v2 at the other) or a wrong GID index",
		"path MTU larger than a hop allows, so large packets are dropped",
		"ACK timeout too short for a slow or loaded path (Soft-RoCE under load)"},
     .fixes = {"check the peer process and its log",
	       "rk doctor on both hosts (ports ACTIVE, GID types, MTU)",
	       "allow UDP 4791 between the hosts",
	       "raise the ACK timeout (qp attr timeout) on slow links"},
     .hint = "no ACK from the peer: peer gone (process died, QP destroyed) or "
	     "path broken; on slow links raise the ACK timeout"},
    {WC(RNR_RETRY_EXC_ERR),
     .meaning = "Receiver-not-ready retry counter exceeded: the peer had no receive posted for "
		"the SEND, rnr_retry times in a row.",
     .causes = {"the receiver does not post receives ahead of the sender (no credit scheme)",
		"the receiver is slow to repost after consuming receives",
		"rnr_retry set low (7 means retry forever)"},
     .fixes = {"post receives before the peer may send; use credits",
	       "raise rnr_retry, and min_rnr_timer on the receiver"},
     .hint = "receiver not ready: the peer had no receive posted; post "
	     "receives before the sender sends (use credits)"},
    {WC(LOC_RDD_VIOL_ERR), .meaning = "Local RDD violation (reliable datagram only).",
     .causes = RD_ONLY_CAUSES, .fixes = RD_ONLY_FIXES,
     .hint = "reliable-datagram error: not expected on RC/UC/UD; suspect the provider"},
    {WC(REM_INV_RD_REQ_ERR), .meaning = "Remote invalid RD request (reliable datagram only).",
     .causes = RD_ONLY_CAUSES, .fixes = RD_ONLY_FIXES,
     .hint = "reliable-datagram error: not expected on RC/UC/UD; suspect the provider"},
    {WC(REM_ABORT_ERR),
     .meaning = "Remote aborted: the responder aborted the operation before completing it.",
     .causes = {"the peer's QP went to error or was destroyed in the middle of the message",
		"the peer's receive was flushed while the message arrived"},
     .fixes = {"check the peer's log for why it closed or failed"},
     .hint = "the peer aborted the operation"},
    {WC(INV_EECN_ERR), .meaning = "Invalid EE context number (reliable datagram only).",
     .causes = RD_ONLY_CAUSES, .fixes = RD_ONLY_FIXES,
     .hint = "reliable-datagram error: not expected on RC/UC/UD; suspect the provider"},
    {WC(INV_EEC_STATE_ERR), .meaning = "Invalid EE context state (reliable datagram only).",
     .causes = RD_ONLY_CAUSES, .fixes = RD_ONLY_FIXES,
     .hint = "reliable-datagram error: not expected on RC/UC/UD; suspect the provider"},
    {WC(FATAL_ERR),
     .meaning = "Fatal error: the device hit an unrecoverable error; all its resources are "
		"unusable.",
     .causes = {"device or firmware failure (see dmesg)", "the driver was reset or unloaded"},
     .fixes = {"check dmesg and the device's health", "close and reopen the device"},
     .hint = "the device reported a fatal error; the device must be reopened"},
    {WC(RESP_TIMEOUT_ERR), .meaning = "Response timeout: the responder did not answer in time.",
     .causes = {"the peer is overloaded or gone", "the path drops packets"},
     .fixes = {"check the peer and the path as for RETRY_EXC_ERR"},
     .hint = "the peer did not respond in time"},
    {WC(GENERAL_ERR),
     .meaning = "General error: a provider-specific failure with no standard status.",
     .causes = {"provider-specific; the vendor_err field says more"},
     .fixes = {"look the vendor_err up in the provider's documentation", "check dmesg"},
     .hint = "provider-specific error: see vendor_err and dmesg"},
    {WC(TM_ERR), .meaning = "Tag-matching error on a tag-matching SRQ.",
     .causes = {"a tag operation was invalid (tag list full, bad tag index)"},
     .fixes = {"check the tag-matching capabilities (max_num_tags) and the posted ops"},
     .hint = "tag-matching SRQ operation failed"},
    {WC(TM_RNDV_INCOMPLETE),
     .meaning = "Tag-matching rendezvous did not complete: the data must be fetched by software.",
     .causes = {"the rendezvous header arrived but the hardware could not finish the transfer"},
     .fixes = {"complete the rendezvous in software as the tag-matching API describes"},
     .hint = "tag-matching rendezvous incomplete: finish it in software"},

    /* ---- rdma_cm events ---------------------------------------------- */
    {EV(ADDR_RESOLVED),
     .meaning = "rdma_resolve_addr succeeded: the destination maps to a local RDMA device.",
     .causes = {"not a failure"}, .fixes = {"continue with rdma_resolve_route"}},
    {EV(ADDR_ERROR),
     .meaning = "Address resolution failed: no local RDMA device reaches the destination, or "
		"its hardware address could not be found.",
     .causes = {"the route to the destination leaves through a netdev with no RDMA device "
		"(no rxe link on it, wrong interface)",
		"no ARP / neighbour answer: peer down or address wrong",
		"the RDMA netdev is down or has no address"},
     .fixes = {"ip route get ADDR: the interface must carry an RDMA device (rdma link)",
	       "ping the peer over that interface", "rk doctor"},
     .hint = "address resolution failed: the route to the peer does not go through an "
	     "RDMA device, or the peer does not answer ARP/ND"},
    {EV(ROUTE_RESOLVED), .meaning = "rdma_resolve_route succeeded.", .causes = {"not a failure"},
     .fixes = {"continue with rdma_connect"}},
    {EV(ROUTE_ERROR), .meaning = "Route resolution failed.",
     .causes = {"InfiniBand: no subnet manager, or the SA path query failed",
		"RoCE: no usable GID for the source address (address removed, GID table "
		"not populated)",
		"the route changed under the request"},
     .fixes = {"InfiniBand: run a subnet manager (opensm) and check 'ibstat'",
	       "RoCE: check the GID table for the source address (rk doctor)"},
     .hint = "no route to the peer over an RDMA device (no subnet manager on IB, no GID for the "
	     "address on RoCE)"},
    {EV(CONNECT_REQUEST), .meaning = "A client asks to connect (listener side).",
     .causes = {"not a failure"}, .fixes = {"accept or reject it"}},
    {EV(CONNECT_RESPONSE),
     .meaning = "The server answered a connection made without a QP (rdma_cm hands the reply "
		"to the application).",
     .causes = {"not a failure"}, .fixes = {"finish the connection with rdma_establish"}},
    {EV(CONNECT_ERROR),
     .meaning = "Connection setup failed after the peer answered, typically while moving the "
		"QP to RTR/RTS.",
     .causes = {"the QP could not take the path's attributes (MTU, GID index, rd_atomic) - "
		"'Failed to modify QP to RTR'",
		"the two ends disagree on GID type (RoCE v1 vs v2)",
		"the peer's reply was malformed or arrived too late"},
     .fixes = {"rk doctor on both hosts: GID types, MTU", "check the status errno in the event"},
     .hint = "connection setup failed: QP attributes (MTU, GID index) not accepted, or the "
	     "peer's reply bad"},
    {EV(UNREACHABLE),
     .meaning = "The remote side did not answer the connection request (the CM REQ timed "
		"out).",
     .causes =
	 {"the peer host is down or not reachable over RDMA",
	  "RoCE v2 traffic (UDP 4791) blocked by a firewall: the CM messages travel on it too",
	  "GID type or GID index mismatch, so the request never arrives",
	  "the peer is overloaded and answers after the CM timeout"},
     .fixes = {"ping the peer; rk doctor HOST", "allow UDP 4791 between the hosts",
	       "check that both ends have RoCE v2 GIDs for their addresses"},
     .hint = "no answer to the connection request: peer down, UDP 4791 blocked, or a GID type "
	     "mismatch"},
    {EV(REJECTED),
     .meaning = "The peer (or its CM) rejected the connection; the event's status is the reject "
		"reason.",
     .causes = {"nobody listens on that port (reason 8, INVALID_SERVICE_ID)",
		"the server application refused it (reason 28, CONSUMER_DEFINED, with private "
		"data)",
		"a stale connection with the same identifiers (reason 10, STALE_CONN)",
		"resources exhausted on the server (reason 3, NO_RESOURCES)"},
     .fixes = {"rk explain reject REASON with the event's status",
	       "check that the server runs and listens on that address and port"},
     .hint = "connection rejected: see the reject reason (8: nobody listens, 28: the "
	     "application refused)"},
    {EV(ESTABLISHED), .meaning = "The connection is up.", .causes = {"not a failure"},
     .fixes = {"nothing to fix"}},
    {EV(DISCONNECTED),
     .meaning = "The connection is closed: the peer called rdma_disconnect, its process ended, "
		"or the local side disconnected.",
     .causes = {"the peer closed the connection (normal end)",
		"the peer process died and the kernel closed its connections",
		"a disconnect request timed out"},
     .fixes = {"if unexpected, check the peer's log"}, .hint = "the peer closed the connection"},
    {EV(DEVICE_REMOVAL),
     .meaning = "The RDMA device went away; every resource on it must be destroyed.",
     .causes = {"'rdma link delete' or the driver module unloaded", "hot-unplug or a device reset"},
     .fixes = {"destroy the connection's resources and reopen a device",
	       "Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE"},
     .hint = "the RDMA device was removed (driver unloaded, link deleted)"},
    {EV(MULTICAST_JOIN), .meaning = "A multicast join completed.", .causes = {"not a failure"},
     .fixes = {"nothing to fix"}},
    {EV(MULTICAST_ERROR), .meaning = "A multicast join failed, or an error hit a joined group.",
     .causes = {"InfiniBand: no subnet manager, or the group's parameters conflict",
		"the port went down"},
     .fixes = {"check the subnet manager and the port state"},
     .hint = "multicast join failed or the group broke (subnet manager, port down)"},
    {EV(ADDR_CHANGE),
     .meaning = "The netdev behind the connection's address changed (bonding failover, address "
		"moved).",
     .causes = {"a bond failed over", "the address was moved or removed"},
     .fixes = {"expect the connection to break; reconnect"},
     .hint = "the local address moved to another netdev; the connection may break"},
    {EV(TIMEWAIT_EXIT), .meaning = "The QP left the timewait state and may be reused.",
     .causes = {"not a failure"}, .fixes = {"nothing to fix"}},

    /* ---- errnos from calls (call-specific first) ---------------------- */
    {ERR(ENOMEM), .ops = {"ibv_post_send"}, .meaning = "The send queue is full.",
     .causes = {"more sends outstanding than the send queue depth",
		"completions not polled (with selective signaling, too few signaled)"},
     .fixes = {"poll completions before posting more", "raise the send queue depth"},
     .hint = "send queue full: poll completions before posting more, "
	     "or raise the send queue depth (sq_depth)"},
    {ERR(ENOMEM), .ops = {"ibv_post_recv", "ibv_post_srq_recv"},
     .meaning = "The receive queue is full.",
     .causes = {"more receives posted than the receive queue depth"},
     .fixes = {"repost receives only as they complete", "raise the receive queue depth"},
     .hint = "receive queue full: wait for receives to complete, "
	     "or raise the receive queue depth (rq_depth)"},
    {ERR(ENOBUFS), .ops = {"rk_post_recv"}, .meaning = "rdmakit's receive queue is full.",
     .causes = {"more receives outstanding than rq_depth"},
     .fixes = {"wait for receives to complete", "raise rq_depth"},
     .hint = "receive queue full: wait for receives to complete"},
    {ERR(ENOBUFS), .ops = {"rk_post"}, .meaning = "rdmakit's send queue is full.",
     .causes = {"more sends outstanding than sq_depth"},
     .fixes = {"poll completions before posting more", "raise sq_depth"},
     .hint = "send queue full: poll completions before posting more"},
    {ERR(EINVAL), .ops = {"ibv_post_send", "ibv_post_recv"},
     .meaning = "The work request is malformed for this QP.",
     .causes = {"num_sge above the QP's max SGE", "inline data above max_inline_data",
		"an opcode the QP type does not support"},
     .fixes = {"stay within the caps the QP was created with"},
     .hint = "malformed work request: too many SGEs, inline too large, or opcode not "
	     "supported by the QP"},
    {ERR(ENOMEM), .ops = {"ibv_reg_mr", "rdma_reg_msgs", "rdma_reg_read", "rdma_reg_write"},
     .meaning = "Registering the memory failed: pinning it would exceed the locked-memory "
		"limit, or the device is out of MR resources.",
     .causes =
	 {"RLIMIT_MEMLOCK too low (64 KiB or 8 MiB by default; Docker's default is often 64 KiB)",
	  "the device's MR table or translation space is full (max_mr, max_mr_size)",
	  "the host is out of memory"},
     .fixes = {MEMLOCK_FIX_SHELL, MEMLOCK_FIX_LIMITS, MEMLOCK_FIX_CONTAINER, MEMLOCK_FIX_SYSTEMD,
	       "register fewer, larger regions"},
     .hint = MEMLOCK_HINT},
    {ERR(EPERM), .ops = {"ibv_reg_mr"}, .meaning = "Registering the memory was not permitted.",
     .causes = {"RLIMIT_MEMLOCK too low and no CAP_IPC_LOCK",
		"an access flag or memory type the process may not use"},
     .fixes = {MEMLOCK_FIX_SHELL, MEMLOCK_FIX_LIMITS, MEMLOCK_FIX_CONTAINER, MEMLOCK_FIX_SYSTEMD},
     .hint = MEMLOCK_HINT},
    {ERR(EINVAL), .ops = {"ibv_reg_mr"}, .meaning = "The registration's arguments are invalid.",
     .causes = {"REMOTE_WRITE or REMOTE_ATOMIC asked without LOCAL_WRITE",
		"an access flag the device does not support (e.g. ON_DEMAND without ODP)",
		"length 0 or a range the device cannot map"},
     .fixes = {"add IBV_ACCESS_LOCAL_WRITE whenever remote write/atomic is granted",
	       "check the device's capabilities (ibv_devinfo -v)"},
     .hint = "invalid access flags (remote write needs local write) or range"},
    {ERR(EFAULT), .ops = {"ibv_reg_mr"},
     .meaning = "The memory range is not mapped in this process.",
     .causes = {"a wrong pointer or length", "memory freed or unmapped before registering"},
     .fixes = {"register only memory the process owns, for its whole length"},
     .hint = "the buffer is not (fully) mapped: wrong pointer or length"},
    {ERR(ENOMEM), .ops = {"ibv_create_cq"},
     .meaning = "Creating the completion queue failed for lack of memory.",
     .causes = {"RLIMIT_MEMLOCK too low: the CQ's buffer is pinned like an MR",
		"the device's CQ resources are exhausted (max_cq)", "the host is out of memory"},
     .fixes = {MEMLOCK_FIX_SHELL, MEMLOCK_FIX_CONTAINER, "use fewer or smaller CQs"}},
    {ERR(EINVAL), .ops = {"ibv_create_cq"},
     .meaning = "The CQ's arguments are invalid for this device.",
     .causes = {"more entries than the device's max_cqe", "comp_vector out of range"},
     .fixes = {"ask for at most max_cqe entries (ibv_devinfo -v)"},
     .hint = "CQ depth exceeds the device's max_cqe, or bad completion vector"},
    {ERR(EINVAL), .ops = {"ibv_create_qp", "rdma_create_qp"},
     .meaning = "The QP's capabilities or type are not supported by the device.",
     .causes = {"max_send_wr / max_recv_wr above max_qp_wr",
		"max_send_sge / max_recv_sge above the device's max_sge",
		"max_inline_data above what the device supports",
		"the CQs belong to another device context"},
     .fixes = {"query the device (ibv_devinfo -v) and size the QP within its caps"},
     .hint = QP_CAPS_HINT},
    {ERR(ENOMEM), .ops = {"ibv_create_qp", "rdma_create_qp"},
     .meaning = "Creating the QP failed for lack of memory.",
     .causes = {"RLIMIT_MEMLOCK too low: the queues are pinned like MRs",
		"the device's QP resources are exhausted (max_qp)", "very deep queues asked for"},
     .fixes = {MEMLOCK_FIX_SHELL, MEMLOCK_FIX_CONTAINER, "use shallower queues or fewer QPs"},
     .hint = "QP memory: RLIMIT_MEMLOCK too low ('ulimit -l'), or the device's QPs exhausted"},
    {ERR(EINVAL), .ops = {"ibv_modify_qp", "modify_qp"},
     .meaning = "The QP state transition was given attributes the device refuses ('Failed to "
		"modify QP to RTR').",
     .causes =
	 {"path MTU above the port's active MTU",
	  "a GID index that does not exist, or of the wrong type for the peer (RoCE v1 vs v2)",
	  "destination QPN/PSN wrong (not from the peer)",
	  "max_rd_atomic / max_dest_rd_atomic above the device's limits",
	  "an attribute mask that does not fit the transition"},
     .fixes = {"use rdma_cm (it picks GID and MTU), or take the MTU from ibv_query_port",
	       "pick the RoCE v2 GID of the address (rk doctor shows the index)"},
     .hint = "attribute invalid for this transition: check MTU, GID index, "
	     "QPN/PSN and rd_atomic against the device"},
    {ERR(ENODEV), .ops = {"rdma_create_event_channel", "rdma_create_id"},
     .meaning = "rdma_cm is not available: /dev/infiniband/rdma_cm is missing.",
     .causes = {"the rdma_ucm module is not loaded",
		"a container started without --device /dev/infiniband"},
     .fixes = {"modprobe rdma_ucm", "docker run --device /dev/infiniband ..."},
     .hint = "no /dev/infiniband/rdma_cm: load rdma_ucm (modprobe rdma_ucm), or pass "
	     "--device /dev/infiniband to the container"},
    {ERR(ENODEV), .ops = {"rdma_bind_addr", "rdma_listen"},
     .meaning = "The address is not on an RDMA device.",
     .causes = {"the address belongs to a netdev without an RDMA device",
		"Soft-RoCE not attached to that interface"},
     .fixes = {"rdma link show: bind an address of a netdev listed there",
	       "Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE"},
     .hint = "the address is not on an RDMA netdev (see 'rdma link'; Soft-RoCE: "
	     "rdma link add rxe0 type rxe netdev IFACE)"},
    {ERR(EADDRINUSE), .ops = {"rdma_bind_addr", "rdma_listen"},
     .meaning = "Another rdma_cm id already holds that address and port.",
     .causes = {"another server (or an earlier instance) listens on that port",
		"a listener on the wildcard address holds the port"},
     .fixes = {"stop the other listener or pick another port"},
     .hint = "port already in use by another rdma_cm listener: stop it or use another port"},
    {ERR(EADDRNOTAVAIL), .ops = {"rdma_bind_addr", "rdma_listen", "rdma_resolve_addr"},
     .meaning = "The address is not a local address of this host.",
     .causes = {"a typo, or the peer's address given as the local one",
		"the address was removed from the interface (DHCP, restart)"},
     .fixes = {"ip -br addr: use an address of an RDMA netdev"},
     .hint = "not a local address: check 'ip -br addr'"},
    {ERR(EHOSTUNREACH), .ops = {"rdma_resolve_addr"},
     .meaning = "The destination cannot be reached over RDMA.",
     .causes = {"no route to it through a netdev with an RDMA device",
		"no ARP/ND answer (peer down, wrong address)", "the RDMA netdev is down"},
     .fixes = {"ip route get ADDR; ping ADDR", "rk doctor"},
     .hint = "address unreachable: no route or no ARP/ND answer; "
	     "check the address and that the RDMA netdev is up"},
    {ERR(EHOSTUNREACH), .ops = {"rdma_resolve_route"},
     .meaning = "No route to the peer over an RDMA device.",
     .causes = {"InfiniBand: no subnet manager", "RoCE: no GID for the source address"},
     .fixes = {"InfiniBand: run opensm", "RoCE: rk doctor (GID table)"},
     .hint = "no route to the peer over an RDMA device"},
    {ERR(EHOSTUNREACH), .ops = {"rdma_connect"},
     .meaning = "The connection request got no answer (UNREACHABLE).",
     .causes = {"the peer host is down", "RoCE v2 traffic (UDP 4791) blocked by a firewall",
		"GID type mismatch between the hosts"},
     .fixes = {"ping the peer; allow UDP 4791; rk doctor on both hosts"},
     .hint = "no answer to the connection request: peer down, UDP 4791 blocked, or a GID type "
	     "mismatch"},
    {ERR(ECONNREFUSED), .ops = {"rdma_connect"}, .meaning = "The connection was rejected.",
     .causes = {"nobody listens on that address and port",
		"the server refused it (its reason is in the message)"},
     .fixes = {"start the server, check address and port"},
     .hint = "connection rejected: nobody listens on that port, or the "
	     "server refused the hello (see the reason)"},
    {ERR(ECONNABORTED), .ops = {"rdma_cm"},
     .meaning = "The connection setup failed after the peer answered (CONNECT_ERROR).",
     .causes = {"QP attributes refused (MTU, GID index)", "a malformed reply from the peer"},
     .fixes = {"rk doctor on both hosts (GID types, MTU)"},
     .hint = "connection setup failed: QP attributes (MTU, GID index) not accepted, or the "
	     "peer's reply bad"},
    {ERR(EACCES), .ops = {"ibv_open_device", "rdma_create_event_channel"},
     .meaning = "The RDMA device node may not be opened by this user.",
     .causes = {"/dev/infiniband/uverbs* or rdma_cm not readable and writable by this user"},
     .fixes = {"ls -l /dev/infiniband; add the user to the group owning it (often 'rdma')",
	       "a udev rule setting MODE=\"0666\" for the uverbs and rdma_cm nodes"},
     .hint = "no permission on /dev/infiniband: join the group owning it, or fix the udev "
	     "rule"},
    {ERR(ENOSYS), .ops = {"ibv_get_device_list", "rdma_get_devices"},
     .meaning = "The kernel offers no user verbs.",
     .causes = {"ib_uverbs not loaded", "a kernel built without InfiniBand support"},
     .fixes = {"modprobe ib_uverbs"}, .hint = "no kernel verbs support: modprobe ib_uverbs"},
    /* any call */
    {ERR(ETIMEDOUT), .meaning = "No answer within the deadline.",
     .causes = {"wrong address or port", "the peer is not running", "the link is down",
		"RoCE v2 traffic (UDP 4791) blocked"},
     .fixes = {"check the address; ping it; rk doctor on both hosts"},
     .hint = "no answer in time: wrong address or port, peer not running, "
	     "or the link is down"},
    {ERR(ENODEV), .meaning = "There is no such RDMA device (or it went away).",
     .causes = {"no RDMA device at all: driver not loaded, Soft-RoCE not set up",
		"a device name that does not exist", "the device was removed"},
     .fixes = {"ibv_devices / rdma link show",
	       "Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE"},
     .hint = "no such RDMA device: check 'ibv_devices' / 'rdma link' (Soft-RoCE: "
	     "rdma link add rxe0 type rxe netdev IFACE)"},
    {ERR(ENETDOWN), .meaning = "The port is not ACTIVE.",
     .causes = {"the netdev (RoCE) is down or has no carrier", "InfiniBand: no subnet manager "
							       "brought the port to ACTIVE"},
     .fixes = {"ip link set IFACE up; check the cable", "ibv_devinfo: state PORT_ACTIVE"},
     .hint = "port not ACTIVE: check the link ('ibv_devinfo') and that the netdev is up"},
    {ERR(ECONNRESET), .meaning = "The peer closed the connection, or it broke.",
     .causes = {"the peer ended or closed the connection", "the peer process died"},
     .fixes = {"check the peer's log"}, .hint = "the peer closed the connection: see its log"},
    {ERR(EOPNOTSUPP), .meaning = "The device or provider does not support the operation.",
     .causes = {"a feature the device lacks (e.g. ODP, atomics, a QP type)"},
     .fixes = {"check ibv_devinfo -v for the capability"},
     .hint = "not supported by this device: check its capabilities (ibv_devinfo -v)"},

    /* ---- IB CM reject reasons (status of RDMA_CM_EVENT_REJECTED) ------ */
    {REJ(1, NO_QP), .text = "no QP available",
     .meaning = "The passive side had no QP to give the connection.",
     .causes = {"the server ran out of QPs"}, .fixes = {"check the server's resource use"},
     .hint = "the server has no QP for the connection"},
    {REJ(2, NO_EEC), .text = "no EE context available",
     .meaning = "No EE context (reliable datagram only).", .causes = RD_ONLY_CAUSES,
     .fixes = RD_ONLY_FIXES, .hint = "reliable-datagram reject: not expected with RC"},
    {REJ(3, NO_RESOURCES), .text = "no resources",
     .meaning = "The passive side lacked resources to accept.",
     .causes = {"the server is out of memory, QPs or connections",
		"its locked-memory limit is too low for another connection"},
     .fixes = {"check the server's limits (rk doctor there) and load"},
     .hint = "the server lacks resources (memory, QPs, memlock)"},
    {REJ(4, TIMEOUT), .text = "timeout",
     .meaning = "The CM gave up waiting for the other side during the handshake.",
     .causes = {"the peer answered the request but not the reply (one-way loss)",
		"UDP 4791 blocked in one direction", "an overloaded peer"},
     .fixes = {"check the path in both directions"},
     .hint = "the handshake timed out: packets lost in one direction?"},
    {REJ(5, UNSUPPORTED), .text = "unsupported request",
     .meaning = "The peer does not support something the request asked for.",
     .causes = {"mismatched CM versions or options"},
     .fixes = {"run matching software on both ends"},
     .hint = "the peer does not support the request"},
    {REJ(6, INVALID_COMM_ID), .text = "invalid communication id",
     .meaning = "The CM message names a connection the peer does not know.",
     .causes = {"the connection was torn down on the peer while the handshake ran"},
     .fixes = {"retry the connection"},
     .hint = "the peer does not know this connection any more: retry"},
    {REJ(7, INVALID_COMM_INSTANCE), .text = "invalid communication instance",
     .meaning = "The CM message belongs to an older instance of the connection.",
     .causes = {"a retransmitted message from an earlier attempt"},
     .fixes = {"retry the connection"}, .hint = "message from an older attempt: retry"},
    {REJ(8, INVALID_SERVICE_ID), .text = "invalid service id",
     .meaning = "Nobody listens on that address and port: the peer's CM has no listener for "
		"the service.",
     .causes = {"the server is not running, or not yet listening",
		"wrong port, or the server bound another address"},
     .fixes = {"start the server; check the port and the address it listens on"},
     .hint = "nobody listens there: start the server, check address and port"},
    {REJ(9, INVALID_TRANSPORT_TYPE), .text = "invalid transport type",
     .meaning = "The listener does not accept this QP type.",
     .causes = {"client and server use different QP types (RC vs UD)"},
     .fixes = {"use the same port space / QP type on both ends"},
     .hint = "QP type mismatch between client and server"},
    {REJ(10, STALE_CONN), .text = "stale connection",
     .meaning = "The peer still holds a connection with the same identifiers (QPN), so it "
		"refuses a new one.",
     .causes = {"a quick reconnect reusing a QP number still in timewait on the peer",
		"a crashed process whose old connection the peer has not timed out yet"},
     .fixes = {"wait a few seconds and retry", "use a fresh QP for every connection"},
     .hint = "stale connection: the peer still holds an old one with the same QP; retry later"},
    {REJ(11, RDC_NOT_EXIST), .text = "RDC does not exist",
     .meaning = "Reliable datagram domain does not exist (RD only).", .causes = RD_ONLY_CAUSES,
     .fixes = RD_ONLY_FIXES, .hint = "reliable-datagram reject: not expected with RC"},
    {REJ(12, INVALID_GID), .text = "invalid GID",
     .meaning = "The peer cannot use the GID in the request.",
     .causes = {"the GID the request names is not in the peer's table (address moved)",
		"GID type mismatch (RoCE v1 vs v2)"},
     .fixes = {"rk doctor on both hosts: GID table and types"},
     .hint = "the peer refused the GID: GID type mismatch or address moved"},
    {REJ(13, INVALID_LID), .text = "invalid LID",
     .meaning = "The peer cannot use the LID in the request (InfiniBand).",
     .causes = {"the subnet manager reassigned LIDs", "a stale path record"},
     .fixes = {"retry so the path is resolved again; check the subnet manager"},
     .hint = "the peer refused the LID: stale path, retry"},
    {REJ(24, PORT_CM_REDIRECT), .text = "port CM redirect",
     .meaning = "The peer asks to send the request to another CM port.",
     .causes = {"a redirecting fabric setup"},
     .fixes = {"rdma_cm does not follow redirects; connect to the right port"},
     .hint = "CM redirect asked: connect to the port it names"},
    {REJ(25, PORT_REDIRECT), .text = "port redirect",
     .meaning = "The peer asks to connect through another port.",
     .causes = {"a redirecting fabric setup"},
     .fixes = {"connect to the address of the port it names"},
     .hint = "port redirect asked: connect through the port it names"},
    {REJ(26, INVALID_MTU), .text = "invalid MTU",
     .meaning = "The peer cannot use the path MTU in the request.",
     .causes = {"the two ports' MTUs differ and the request asked more than the peer's"},
     .fixes = {"make the netdev MTUs equal on both hosts (rk doctor on both)"},
     .hint = "MTU not acceptable to the peer: align the netdev MTUs"},
    {REJ(27, INSUFFICIENT_RESP_RESOURCES), .text = "insufficient responder resources",
     .meaning = "The peer cannot give the RDMA READ/atomic depth the request asked for.",
     .causes = {"responder_resources / initiator_depth above the peer's max_qp_rd_atom"},
     .fixes = {"ask for at most the device's max_qp_rd_atom (ibv_devinfo -v)"},
     .hint = "asked more outstanding READs/atomics than the peer allows"},
    {REJ(28, CONSUMER_DEFINED), .text = "consumer defined",
     .meaning = "The server application rejected the connection itself (rdma_reject), "
		"usually with private data that says why.",
     .causes = {"the server refused the request (authentication, version, full)",
		"a protocol mismatch between client and server versions"},
     .fixes = {"read the reason in the reject's private data (rdmakit prints it)",
	       "check the server's log"},
     .hint = "the server application refused the connection: see its reason"},
    {REJ(29, INVALID_RNR_RETRY), .text = "invalid RNR retry",
     .meaning = "The peer refuses the RNR retry count in the request.",
     .causes = {"an rnr_retry_count the peer does not accept"}, .fixes = {"use 0..7 (7 = forever)"},
     .hint = "RNR retry count refused by the peer"},
    {REJ(30, DUPLICATE_LOCAL_COMM_ID), .text = "duplicate local communication id",
     .meaning = "The peer already has a connection with this local id.",
     .causes = {"a duplicate or retransmitted request"}, .fixes = {"retry with a new connection"},
     .hint = "duplicate request: retry with a new connection"},
    {REJ(31, INVALID_CLASS_VERSION), .text = "invalid class version",
     .meaning = "The peer's CM speaks another version of the protocol.",
     .causes = {"very different kernel/firmware versions"}, .fixes = {"update the older side"},
     .hint = "CM protocol version mismatch between the hosts"},
    {REJ(32, INVALID_FLOW_LABEL), .text = "invalid flow label",
     .meaning = "The peer cannot use the flow label in the request.",
     .causes = {"a flow label set that the peer's path does not allow"},
     .fixes = {"leave the flow label at 0"}, .hint = "flow label refused by the peer"},
    {REJ(35, VENDOR_OPTION_NOT_SUPPORTED), .text = "vendor option not supported",
     .meaning = "The peer does not support a vendor-specific option (enhanced connection "
		"establishment) of the request.",
     .causes = {"different NIC vendors or firmware on the two ends"},
     .fixes = {"disable the vendor option, or use the same stack on both ends"},
     .hint = "vendor option not supported by the peer"},
};

const size_t rk__explain_table_len = sizeof(rk__explain_table) / sizeof(rk__explain_table[0]);
