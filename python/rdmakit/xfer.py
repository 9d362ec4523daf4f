"""rdmakit.xfer - one-sided transfers (librdmakit's xfer.h).

A node registers memory it owns as segments (``Xfer.register``: any writable
buffer - bytearray, memoryview, mmap, numpy array - used in place, never
copied) and exports a segment to a peer (``Segment.export``): a small
descriptor, bytes, that the application carries to the peer however it
likes (an RPC answer is the obvious carrier). The peer imports it
(``Peer.import_remote``) and posts batches of RDMA READs and WRITEs against
it (``Peer.post``): the owner's CPU takes no part. A batch may end with a
notification to the owner (``notify=``), which the owner receives
(``Peer.notif_wait``) only once the batch's data has landed. The owner can
revoke a peer's access (``Segment.revoke``); the peer's next op then fails
with RemoteAccessError and touches nothing.

A Peer is 1..16 connections (lanes) to one other node, made with rdma_cm:
``Xfer.connect(host, port, lanes=2)`` on one side, ``Xfer.listen(port)``
and ``Listener.accept()`` on the other. A batch's ops are striped over the
lanes. ``Xfer.connect_lane(host, port, app_id)`` makes a Peer of one lane
to a server of another protocol (its own hello, its accept's private data
returned).

    import rdmakit
    from rdmakit import Read

    dev = rdmakit.Device("rxe0")
    x = rdmakit.Xfer(dev)
    peer = x.connect("10.0.0.1", 7720, lanes=2)
    remote = peer.import_remote(descriptor)        # from the owner, e.g. by RPC
    buf = bytearray(1 << 20)
    seg = x.register(buf, 0)                       # local use only
    peer.post([Read(seg, remote)]).wait()          # buf now holds the owner's bytes

Threads: an Xfer and everything made from it (peers, segments, batches)
are used by one thread at a time; the others wait (blocking waits let
them in every 50 ms). Blocking calls release the GIL.
"""
from __future__ import annotations

import os
import weakref
from typing import Dict, Optional, Tuple, Union

from ._rk import ffi, lib
from ._util import U32_MAX, Closable, check_int, closed, raise_error, track
from .device import Device
from .xfer_base import LANES_APP_ID, READ, WRITE, Access, OpStatus, _free_batch, _Lock, _TOKEN_LEN
from .xfer_batch import Batch, Op, Read, Write
from .xfer_lanes import Listener, connect_lanes
from .xfer_peer import Peer
from .xfer_segment import Buffer, Remote, Segment

__all__ = ["Xfer", "Listener", "Peer", "Segment", "Remote", "Batch", "Op", "Read", "Write",
           "Access", "READ", "WRITE", "OpStatus", "LANES_APP_ID"]

# ---- the set of segments, peers and batches -------------------------------

class Xfer(Closable):
    """One-sided transfers on a device: its segments, peers and batches
    (librdmakit's rk_xfer, in the device's protection domain).

    Arguments (0: the library's default): mode ("auto": memory windows where
    the device has type 2, else a registration per export; "mw", "mr"),
    max_batches (in flight at once, 64), max_ops (per batch, 4096),
    notif_recvs (notifications a lane can hold before the sender waits, 16).

    In "mr" mode every key is honoured by every connection of the device's
    protection domain: a peer that guesses another's keys reaches what was
    exported to the other. Memory windows ("mw") are bound to one peer's
    lanes and have no such gap.

    Closing it closes its peers, listeners and segments first. A context
    manager; closed on garbage collection and at interpreter exit. One
    thread at a time (others wait).
    """

    def __init__(self, device: Device, *, mode: str = "auto", max_batches: int = 0,
                 max_ops: int = 0, notif_recvs: int = 0) -> None:
        self._x = ffi.NULL
        self._closed = False
        self._lock = _Lock()
        self._children = weakref.WeakSet()
        self._orphans = []  # batches dropped while running: [handle, peer, keep]
        self._holds = 0  # peers and segments not closed yet: the handle outlives them
        self._lib = lib
        if not isinstance(device, Device):
            raise TypeError("device: an rdmakit.Device expected, not %s" % type(device).__name__)
        modes = {"auto": lib.RK_XFER_AUTO, "mw": lib.RK_XFER_MW, "mr": lib.RK_XFER_MR}
        if not isinstance(mode, str) or mode not in modes:
            raise ValueError("mode: 'auto', 'mw' or 'mr' expected, not %r" % (mode,))
        opts = ffi.new("struct rk_xfer_opts *")
        opts.mode = modes[mode]
        opts.max_batches = check_int(max_batches, "max_batches", 0, 65535)
        opts.max_ops = check_int(max_ops, "max_ops", 0, 65534)
        opts.notif_recvs = check_int(notif_recvs, "notif_recvs", 0, 1024)
        self.max_ops: int = opts.max_ops or 4096
        """The most ops a batch may hold."""
        self._rq = max(32, opts.notif_recvs or 16)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_xfer **")
        r = lib.rk_xfer_create(device._use(), ffi.NULL, opts, err, out)
        if r < 0:
            raise_error(r, err)
        self._x = out[0]
        self._device = device
        self._err = ffi.new("struct rk_error *")
        device._adopt(self, hold=True)
        track(self)

    def _use(self):
        """The handle (the lock held), or ClosedError."""
        if self._closed:
            raise closed("Xfer")
        return self._x

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    @property
    def device(self) -> Device:
        """The device."""
        return self._device

    @property
    def mode(self) -> str:
        """The access control in use: "mw" (memory windows) or "mr"."""
        with self._lock:
            return "mw" if lib.rk_xfer_mode(self._use()) == lib.RK_XFER_MW else "mr"

    def register(self, buf: Buffer, access: int = READ | WRITE) -> "Segment":
        """Register ``buf`` as a segment: ``Segment(self, buf, access)``."""
        return Segment(self, buf, access)

    def connect(self, host: str, port: Union[int, str], *, lanes: int = 1, mode: str = "busy",
                timeout: Optional[float] = None, src_addr: Optional[str] = None,
                token: Optional[bytes] = None) -> "Peer":
        """A peer: ``lanes`` (1..16) rdma_cm connections to the Listener at
        ``host``:``port`` (the other side in Listener.accept meanwhile),
        made one after the other, each step within ``timeout`` seconds
        (None: 5). ``mode``: how the peer's waits wait
        ("busy" spins, "event" sleeps, "adaptive" spins 50 us first; the
        asyncio waits need "event" or "adaptive"). Raises RefusedError
        (nobody listens, or the listener turned the peer away),
        DeadlineError, or another Error. ``token``: the 16 bytes its lanes'
        hellos carry, which the listener groups them by and shows as the
        accepted Peer's ``token`` (None: random); a server that handed a
        client a secret token (over RPC, say) knows its lanes by it."""
        n = check_int(lanes, "lanes", 1, lib.RK_XFER_LANES_MAX)
        if token is None:
            token = os.urandom(_TOKEN_LEN)
        elif not isinstance(token, (bytes, bytearray, memoryview)):
            raise TypeError("token: bytes expected, not %s" % type(token).__name__)
        elif len(token) != _TOKEN_LEN:
            raise ValueError("token: %d bytes expected, not %d" % (_TOKEN_LEN, len(token)))
        token = bytes(token)
        hellos = [(LANES_APP_ID, i | n << 8, token) for i in range(n)]
        return connect_lanes(self, host, port, hellos, mode, timeout, src_addr)[0]

    def connect_lane(self, host: str, port: Union[int, str], app_id: int, *, app_arg: int = 0,
                     token: bytes = b"", mode: str = "busy", timeout: Optional[float] = None,
                     src_addr: Optional[str] = None) -> Tuple["Peer", bytes]:
        """A peer of one lane to a server of another protocol: one rdma_cm
        connection to ``host``:``port`` whose hello carries ``app_id``,
        ``app_arg`` (each 0..2**32-1) and ``token`` (0..32 bytes), not this
        package's lane hello (that is Xfer.connect, to a Listener). Returns
        the Peer and the private data the server sent with its accept (up
        to 128 bytes, b"" when none; the transport may pad it with zeros:
        the server's protocol says which bytes count). ``mode``,
        ``timeout``, ``src_addr``: as connect(). Costs one connection
        handshake (a few milliseconds). Raises RefusedError (nobody
        listens, or the server rejected the hello: its reason in the
        message), DeadlineError, or another Error."""
        aid = check_int(app_id, "app_id", 0, U32_MAX)
        arg = check_int(app_arg, "app_arg", 0, U32_MAX)
        if not isinstance(token, (bytes, bytearray, memoryview)):
            raise TypeError("token: bytes expected, not %s" % type(token).__name__)
        tok = bytes(token)
        if len(tok) > lib.RK_HELLO_TOKEN_MAX:
            raise ValueError("token: %d bytes, at most %d" % (len(tok), lib.RK_HELLO_TOKEN_MAX))
        return connect_lanes(self, host, port, [(aid, arg, tok)], mode, timeout, src_addr)

    def listen(self, port: Union[int, str] = 0, *, addr: Optional[str] = None,
               mode: str = "busy", max_pending: int = 8,
               max_pending_per_addr: int = 4) -> "Listener":
        """A Listener for peers' lanes: ``Listener(self, port, ...)``."""
        return Listener(self, port, addr=addr, mode=mode, max_pending=max_pending,
                        max_pending_per_addr=max_pending_per_addr)

    def stats(self) -> Dict[str, int]:
        """The counters since creation: reg_mr, dereg_mr, cache_hits,
        mw_binds, mw_invalidates, doorbells, wrs, ops, batches, notifs_sent,
        notifs_received, foreign."""
        st = ffi.new("struct rk_xfer_stats *")
        with self._lock:
            lib.rk_xfer_stats(self._use(), st)
        return {k: getattr(st, k) for k in (
            "reg_mr", "dereg_mr", "cache_hits", "mw_binds", "mw_invalidates", "doorbells",
            "wrs", "ops", "batches", "notifs_sent", "notifs_received", "foreign")}

    def _reap(self, peer=None):
        """Free the dropped batches that ended (all of @peer's). Lock held."""
        # Swapped out first: a Batch finalised meanwhile (garbage collection
        # on this thread) appends to the new list, not to one being replaced.
        orphans, self._orphans = self._orphans, []
        keep, done = [], []
        for o in orphans:
            (done if o[1] is peer or lib.rk_xfer_batch_check(o[0], ffi.NULL) != 0
             else keep).append(o)
        self._orphans.extend(keep)
        for h, p, _ in done:
            _free_batch(h, p)

    def _release(self):
        """A peer or segment is gone (the lock held); the handle goes after
        the last of them once close() was called: garbage collection
        finalises in any order."""
        self._holds -= 1
        if self._holds == 0 and self._closed:
            self._end()

    def _end(self):
        x, self._x = self._x, ffi.NULL
        if x != ffi.NULL:
            self._lib.rk_xfer_destroy(x)
            self._device._release()

    def close(self) -> None:
        """Close the peers (their batches are canceled), listeners and
        segments, then the set. Idempotent."""
        # The listeners first, without the set's lock: an accept under way
        # holds its listener's lock and takes the set's to make its Peer, so
        # closing a listener under the set's lock could wait for it forever.
        with self._lock:
            if self._closed:
                return
            listeners = [c for c in self._children if isinstance(c, Listener)]
            peers = [c for c in self._children if isinstance(c, Peer)]
        for c in peers:  # their fds off their loops, waited for outside the lock (Peer._detach)
            c._detach()
        for c in listeners:
            try:
                c.close()
            except Exception:
                pass
        with self._lock:
            if self._closed:
                return
            kids = list(self._children)
            for kind in (Peer, Listener, Segment):
                for c in kids:
                    if isinstance(c, kind):
                        try:
                            c.close()
                        except Exception:
                            pass
            self._reap()
            self._closed = True
            if self._holds == 0:
                self._end()

    def __repr__(self) -> str:
        return "<rdmakit.Xfer%s>" % (" closed" if self._closed else "")



for _c in (Listener, Peer, Segment, Remote, Batch, Op, Read, Write, Access, OpStatus):
    _c.__module__ = __name__  # where they are documented and imported from
del _c
