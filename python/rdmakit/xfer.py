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
lanes.

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

import asyncio
import collections
import enum
import errno
import math
import os
import threading
import time
import weakref
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Union

from ._rk import ffi, lib
from ._util import (U32_MAX, Closable, check_int, closed, in_buffer, out_buffer, raise_error,
                    seconds_to_ms, track, wait_mode)
from .device import Device
from .errors import DeadlineError, Error, PeerGoneError, RemoteAccessError
from .rpc import _cstr

__all__ = ["Xfer", "Listener", "Peer", "Segment", "Remote", "Batch", "Op", "Read", "Write",
           "Access", "READ", "WRITE", "OpStatus", "LANES_APP_ID"]

Buffer = Any  # anything with the buffer protocol

LANES_APP_ID = 0x524B584C
"""The rdma_cm hello's application id of this package's lanes ("RKXL").
Its app_arg is the lane's index (bits 0-7) and the peer's lane count (bits
8-15); its token, 16 random bytes, names the peer the lane belongs to."""

_TOKEN_LEN = 16
_SLICE_MS = 50          # a blocking wait lets other threads in this often
_SQ, _SIGNAL = 128, 16  # each lane's send queue; a completion per chain of 16 (xfer.h)
_U64 = (1 << 64) - 1
_LEN_MAX = 1 << 62      # a segment's length, at most


class Access(enum.IntFlag):
    """What an exported segment lets the peer do (combine with ``|``)."""

    NONE = 0
    READ = 1   # the peer may RDMA READ it
    WRITE = 2  # the peer may RDMA WRITE it


READ = Access.READ
"""The peer may RDMA READ the segment."""
WRITE = Access.WRITE
"""The peer may RDMA WRITE the segment."""


class OpStatus(NamedTuple):
    """One op's outcome once its batch ended: ``errno`` 0 (done) or the
    positive errno (EREMOTEIO refused by the owner, ECONNRESET peer gone,
    ECANCELED flushed behind another op's failure, ETIMEDOUT, EIO), and the
    completion's ``ibv_wc_status`` (0 when none came)."""

    errno: int
    wc_status: int


def _access(v, name, zero_ok):
    a = check_int(v, name, 0, 3)
    if not a and not zero_ok:
        raise ValueError("%s: READ, WRITE or both expected, not nothing" % name)
    return Access(a)


def _raise(r, err):
    raise_error(r, err, RemoteAccessError if r == -errno.EREMOTEIO else None)


def _error(r, err):
    try:
        _raise(r, err)
    except Error as e:
        return e


def _finite_ms(t, name, default_ms):
    ms = seconds_to_ms(t, name, default_ms)
    if ms < 0:
        raise ValueError("%s: must be finite" % name)
    return ms


def _deadline(t, name, default_s):
    """A monotonic deadline @t seconds from now (None: @default_s; inf: none)."""
    ms = seconds_to_ms(t, name, int(default_s * 1000))
    return None if ms < 0 else time.monotonic() + ms / 1000.0


def _left_ms(deadline):
    if deadline is None:
        return _SLICE_MS
    return max(0, min(_SLICE_MS, int(math.ceil((deadline - time.monotonic()) * 1000))))


class _Lock:
    """An Xfer's lock (reentrant), counting the threads that wait for it so
    that a blocking wait lets them in between its slices: a thread that
    releases a lock and takes it again at once would otherwise keep it."""

    __slots__ = ("_l", "_c", "want")

    def __init__(self):
        self._l = threading.RLock()
        self._c = threading.Lock()
        self.want = 0

    def __enter__(self):
        if not self._l.acquire(False):
            with self._c:
                self.want += 1
            self._l.acquire()
            with self._c:
                self.want -= 1
        return self

    def __exit__(self, *exc):
        self._l.release()

    def let_in(self):
        """Outside the lock: if a thread waits for it, give it the chance."""
        if self.want:
            time.sleep(0.001)


# ---- the set of segments ----------------------------------------------------

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
                timeout: Optional[float] = None, src_addr: Optional[str] = None) -> "Peer":
        """A peer: ``lanes`` (1..16) rdma_cm connections to the Listener at
        ``host``:``port`` (the other side in Listener.accept meanwhile),
        made one after the other, each step within ``timeout`` seconds
        (None: 5). ``mode``: how the peer's waits wait
        ("busy" spins, "event" sleeps, "adaptive" spins 50 us first; the
        asyncio waits need "event" or "adaptive"). Raises RefusedError
        (nobody listens, or the listener turned the peer away),
        DeadlineError, or another Error."""
        n = check_int(lanes, "lanes", 1, lib.RK_XFER_LANES_MAX)
        wm = wait_mode(mode)
        ms = _finite_ms(timeout, "timeout", 0)
        keep = []
        h_host = _cstr(host, "host", keep)
        h_port = _cstr(port, "port", keep)
        h_src = _cstr(src_addr, "src_addr", keep) if src_addr is not None else ffi.NULL
        token = os.urandom(_TOKEN_LEN)
        dev = self._device._use()
        err = ffi.new("struct rk_error *")
        cq = _make_cq(dev, n, self._rq, wm)
        conns = []
        try:
            for i in range(n):
                o = ffi.new("struct rk_cm_connect_opts *")
                h = ffi.new("struct rk_hello *")
                h.app_id = LANES_APP_ID
                h.app_arg = i | n << 8
                h.token_len = _TOKEN_LEN
                ffi.memmove(h.token, token, _TOKEN_LEN)
                o.host, o.port, o.src_addr, o.timeout_ms, o.hello = h_host, h_port, h_src, ms, h
                _conn_opts(o.conn, cq, self._rq)
                out = ffi.new("struct rk_conn **")
                r = lib.rk_cm_connect(dev, o, err, out)
                if r < 0:
                    raise_error(r, err)
                conns.append(out[0])
            return Peer(self, cq, conns, mode, "%s:%s" % (host, port))
        except BaseException:
            for c in reversed(conns):
                lib.rk_conn_destroy(c)
            lib.rk_cq_destroy(cq)
            raise

    def listen(self, port: Union[int, str] = 0, *, addr: Optional[str] = None,
               mode: str = "busy", max_pending: int = 8) -> "Listener":
        """A Listener for peers' lanes: ``Listener(self, port, ...)``."""
        return Listener(self, port, addr=addr, mode=mode, max_pending=max_pending)

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
        keep, done = [], []
        for o in self._orphans:
            (done if o[1] is peer or lib.rk_xfer_batch_check(o[0], ffi.NULL) != 0
             else keep).append(o)
        self._orphans[:] = keep
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


def _make_cq(dev, nlanes, rq, wm):
    o = ffi.new("struct rk_cq_opts *")
    o.depth = nlanes * (_SQ + rq)
    o.mode = wm
    err = ffi.new("struct rk_error *")
    out = ffi.new("struct rk_cq **")
    r = lib.rk_cq_create(dev, o, err, out)
    if r < 0:
        raise_error(r, err)
    return out[0]


def _conn_opts(o, cq, rq):
    o.sq_depth = _SQ
    o.rq_depth = rq
    o.signal_every = _SIGNAL
    o.cq = cq


# ---- segments ---------------------------------------------------------------

class Segment(Closable):
    """Memory of this node that batches use and peers may be given.

    ``buf`` is any writable, C-contiguous object with the buffer protocol
    (bytearray, memoryview, mmap, numpy array, ...): registered in place,
    never copied. The segment holds a view of it, so while registered it
    cannot be freed, resized or (mmap) closed; close() lets it go.

    ``access``: what exports of it may grant (READ | WRITE, the default;
    0 for a batch's local buffers only). Registration goes through the
    library's cache: a segment inside memory already registered costs a
    lookup, else one ibv_reg_mr (pins the pages: tens of microseconds per
    MiB). Closing it revokes every export and cancels the batches using it.
    """

    def __init__(self, xfer: Xfer, buf: Buffer, access: int = READ | WRITE) -> None:
        self._seg = ffi.NULL
        self._closed = True
        self._lib = lib
        if not isinstance(xfer, Xfer):
            raise TypeError("xfer: an rdmakit.Xfer expected, not %s" % type(xfer).__name__)
        acc = _access(access, "access", True)
        ptr, n = out_buffer(buf, "buf", _LEN_MAX)
        if n == 0:
            raise ValueError("buf: a segment needs at least 1 byte")
        mv = memoryview(buf)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_xfer_seg **")
        with xfer._lock:
            r = lib.rk_xfer_seg_reg(xfer._use(), ptr, n, acc, err, out)
            xfer._holds += r == 0
        if r < 0:
            mv.release()
            raise_error(r, err)
        self._seg = out[0]
        self._closed = False
        self._xfer = xfer
        self._ptr = ptr
        self._mv = mv
        self.obj = buf
        """The registered object."""
        self.nbytes: int = n
        """The length in bytes."""
        self.access: Access = acc
        """What exports may grant."""
        self.address: int = int(ffi.cast("uintptr_t", ptr))
        """The memory's address (the buffer's own: nothing was copied)."""
        xfer._children.add(self)
        track(self)

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    def _use(self):
        if self._closed:
            raise closed("Segment")
        return self._seg

    def memoryview(self) -> memoryview:
        """A writable byte view of the memory (format "B"), no copy."""
        return memoryview(self.obj).cast("B")

    def numpy(self, dtype: Any = None, shape: Any = None) -> Any:
        """The memory as a numpy array, no copy: the registered array
        itself when it is one and neither ``dtype`` nor ``shape`` is
        given, else a view of the bytes as ``dtype`` (uint8 when None)
        reshaped to ``shape``. Imports numpy (only here)."""
        import numpy as np
        if dtype is None and shape is None and isinstance(self.obj, np.ndarray):
            return self.obj
        a = np.frombuffer(self.memoryview(), dtype=np.uint8 if dtype is None else dtype)
        return a if shape is None else a.reshape(shape)

    def export(self, peer: "Peer", access: Optional[int] = None,
               timeout: Optional[float] = None) -> bytes:
        """Expose the segment to ``peer`` with ``access`` (a part of the
        segment's; None: all of it) and return its descriptor (36..96
        bytes) for the peer to import. Exporting again gives the same
        descriptor; after revoke() a new one. Memory windows: waits up to
        ``timeout`` seconds (None: 5) for the binds."""
        self._use()
        if not isinstance(peer, Peer):
            raise TypeError("peer: an rdmakit.Peer expected, not %s" % type(peer).__name__)
        if peer._xfer is not self._xfer:
            raise ValueError("peer: a peer of another Xfer")
        acc = self.access if access is None else _access(access, "access", False)
        if not acc or acc & ~self.access:
            raise ValueError("access: %r, the segment allows %r" % (Access(acc), self.access))
        ms = _finite_ms(timeout, "timeout", 5000)
        cap = lib.RK_XFER_DESC_MAX
        buf = ffi.new("char[]", cap)
        n = ffi.new("size_t *")
        err = ffi.new("struct rk_error *")
        with self._xfer._lock:
            r = lib.rk_xfer_export(self._use(), peer._use(), acc, buf, cap, n, ms, err)
        if r < 0:
            raise_error(r, err)
        return ffi.unpack(buf, n[0])

    def revoke(self, peer: "Peer", timeout: Optional[float] = None) -> None:
        """End ``peer``'s access: once it returns, the peer's READs and
        WRITEs with the descriptor fail (RemoteAccessError there) and touch
        nothing. Waits up to ``timeout`` seconds (None: 5) for the
        invalidations. Error ENOENT if not exported to it."""
        if not isinstance(peer, Peer):
            raise TypeError("peer: an rdmakit.Peer expected, not %s" % type(peer).__name__)
        ms = _finite_ms(timeout, "timeout", 5000)
        err = ffi.new("struct rk_error *")
        with self._xfer._lock:
            r = lib.rk_xfer_revoke(self._use(), peer._use(), ms, err)
        if r < 0:
            raise_error(r, err)

    def close(self) -> None:
        """Revoke every export, cancel the batches still using the segment,
        deregister (the buffer is the caller's again). Idempotent."""
        if self._closed:
            return
        with self._xfer._lock:
            if self._closed:
                return
            for c in list(self._xfer._children):
                if isinstance(c, Peer):
                    c._cancel_using(self)
            self._closed = True
            seg, self._seg = self._seg, ffi.NULL
            self._lib.rk_xfer_seg_dereg(seg)
            ffi.release(self._ptr)
            self._mv.release()
            self._xfer._release()

    def __repr__(self) -> str:
        return "<rdmakit.Segment %d B %s%s>" % (getattr(self, "nbytes", 0),
                                                getattr(self, "access", Access.NONE),
                                                " closed" if self._closed else "")


# ---- peers ------------------------------------------------------------------

class Listener(Closable):
    """Takes peers' lanes on ``port`` (0: pick one, see ``port``):
    ``accept()`` returns the next Peer whose lanes have all arrived.

    ``mode``: the accepted peers' (see Xfer.connect). ``max_pending``:
    peers whose lanes are still arriving, at most (more are turned away as
    busy); a peer whose lanes do not all arrive within 10 s is dropped. A
    context manager; closed with its Xfer. One thread at a time.
    """

    def __init__(self, xfer: Xfer, port: Union[int, str] = 0, *, addr: Optional[str] = None,
                 mode: str = "busy", max_pending: int = 8) -> None:
        self._lis = ffi.NULL
        self._closed = True
        self._lib = lib
        if not isinstance(xfer, Xfer):
            raise TypeError("xfer: an rdmakit.Xfer expected, not %s" % type(xfer).__name__)
        self._wm = wait_mode(mode)
        self._mode = mode
        self._max_pending = check_int(max_pending, "max_pending", 1, 1024)
        keep = []
        opts = ffi.new("struct rk_listen_opts *")
        opts.port = _cstr(port, "port", keep)
        if addr is not None:
            opts.addr = _cstr(addr, "addr", keep)
        opts.app_id = LANES_APP_ID
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_listener **")
        r = lib.rk_listener_create(xfer._device._use(), opts, err, out)
        if r < 0:
            raise_error(r, err)
        self._lis = out[0]
        self._closed = False
        self._xfer = xfer
        self._lock = _Lock()
        self._pending = {}  # token -> [cq, conns, nlanes, deadline, name]
        self.port: int = lib.rk_listener_port(self._lis)
        """The port it listens on."""
        self._device = xfer._device
        xfer._children.add(self)
        self._device._adopt(self, hold=True)
        track(self)

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    def accept(self, timeout: Optional[float] = 10.0, *,
               accept_timeout: Optional[float] = None) -> Peer:
        """Wait up to ``timeout`` seconds (math.inf: no deadline) for a
        peer's lanes and return the Peer. ``accept_timeout``: each lane's
        handshake, seconds (None: 5). DeadlineError when none came."""
        deadline = _deadline(timeout, "timeout", 10.0)
        ams = _finite_ms(accept_timeout, "accept_timeout", 5000)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_cm_request **")
        while True:
            with self._lock:
                if self._closed:
                    raise closed("Listener")
                self._expire()
                r = lib.rk_listener_get_request(self._lis, max(1, _left_ms(deadline)), err, out)
                if r == 0:
                    peer = self._take(out[0], ams, err)
                    if peer is not None:
                        return peer
                elif r not in (-errno.ETIMEDOUT, -errno.EAGAIN, -errno.EINTR):
                    raise_error(r, err)
            self._lock.let_in()
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineError(errno.ETIMEDOUT, "accept: no peer within %s s" % timeout,
                                    op="accept")

    def _take(self, req, ams, err):
        """One lane's request (the lock held): the Peer once it is whole."""
        h = lib.rk_cm_request_hello(req)
        lane, n, extra = h.app_arg & 0xFF, (h.app_arg >> 8) & 0xFF, h.app_arg >> 16
        token = ffi.unpack(ffi.cast("char *", h.token), h.token_len)
        name = ffi.string(lib.rk_cm_request_peer(req)).decode("utf-8", "replace")
        s = self._pending.get(token)
        why = None
        if h.token_len != _TOKEN_LEN or extra or not 1 <= n <= lib.RK_XFER_LANES_MAX or lane >= n:
            why = (lib.RK_REJECT_BAD_HELLO, b"not a lane")
        elif lane == 0 and (s is not None or len(self._pending) >= self._max_pending):
            why = (lib.RK_REJECT_BUSY, b"too many peers connecting")
        elif lane and (s is None or s[2] != n or len(s[1]) != lane):
            why = (lib.RK_REJECT_NO_SESSION, b"no such peer")
        if why:
            lib.rk_cm_request_reject(req, why[0], why[1], ffi.NULL)
            return None
        if s is None:
            try:
                cq = _make_cq(self._xfer._device._use(), n, self._xfer._rq, self._wm)
            except Error:
                lib.rk_cm_request_reject(req, lib.RK_REJECT_BUSY, b"no CQ", ffi.NULL)
                raise
            s = self._pending[token] = [cq, [], n, time.monotonic() + 10.0, name]
        opts = ffi.new("struct rk_conn_opts *")
        _conn_opts(opts, s[0], self._xfer._rq)
        out = ffi.new("struct rk_conn **")
        r = lib.rk_cm_request_accept(req, opts, ffi.NULL, 0, ams, err, out)
        if r < 0:
            self._drop(token)
            return None  # that peer's problem: its connect fails; wait for the next
        s[1].append(out[0])
        if len(s[1]) < n:
            return None
        del self._pending[token]
        try:
            return Peer(self._xfer, s[0], s[1], self._mode, name)
        except BaseException:
            self._destroy(s)
            raise

    @staticmethod
    def _destroy(s):
        for c in reversed(s[1]):
            lib.rk_conn_destroy(c)
        lib.rk_cq_destroy(s[0])

    def _drop(self, token):
        s = self._pending.pop(token, None)
        if s is not None:
            self._destroy(s)

    def _expire(self):
        now = time.monotonic()
        for t in [t for t, s in self._pending.items() if s[3] <= now]:
            self._drop(t)

    def close(self) -> None:
        """Stop listening; drop the peers whose lanes are still arriving.
        Peers already accepted stay. Idempotent."""
        if self._closed:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for t in list(self._pending):
                self._drop(t)
            lis, self._lis = self._lis, ffi.NULL
            self._lib.rk_listener_destroy(lis)
            self._device._release()

    def __repr__(self) -> str:
        return "<rdmakit.Listener port %s%s>" % (getattr(self, "port", "?"),
                                                 " closed" if self._closed else "")


class Peer(Closable):
    """The node at the other end of 1..16 lanes (rdma_cm connections), made
    by Xfer.connect() or Listener.accept(): import its descriptors
    (import_remote), post batches against them (post), take its
    notifications (notif_wait). Segments are exported to it with
    Segment.export(peer).

    ``name``: the other end ("host:port"). Closing it cancels its batches,
    forgets its descriptors, revokes what was exported to it and
    disconnects. A context manager; closed with its Xfer.
    """

    def __init__(self, xfer: Xfer, cq, conns, mode: str, name: str) -> None:
        # Made by Xfer.connect / Listener.accept, which own cq and conns until this returns.
        self._p = ffi.NULL
        self._closed = True
        self._lib = lib
        self._xfer = xfer
        n = len(conns)
        self._lanes = ffi.new("struct rk_conn *[]", conns)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_xfer_peer **")
        with xfer._lock:
            r = lib.rk_xfer_peer_create(xfer._use(), self._lanes, n, err, out)
            xfer._holds += r == 0
        if r < 0:
            raise_error(r, err)
        self._p = out[0]
        self._closed = False
        self._cq = cq
        self._n = n
        self._mode = mode
        self._err = ffi.new("struct rk_error *")
        self._v = ffi.new("uint32_t *")
        self._batches = weakref.WeakSet()
        self._remotes = weakref.WeakSet()
        self._holds = 0  # batches and descriptors not freed yet: the handle outlives them
        self._ws = ffi.NULL
        self._loop = None
        self._fd = -1
        self._waiting = set()                 # batches awaited on the loop: (batch, future)
        self._notif_futs = collections.deque()  # notif_wait_async's futures, oldest first
        self.name: str = name
        """The other end, "host:port"."""
        xfer._children.add(self)
        track(self)

    @property
    def lanes(self) -> int:
        """How many lanes (connections)."""
        return self._n

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    @property
    def alive(self) -> bool:
        """False once a lane is down (the peer gone) or the peer closed."""
        with self._xfer._lock:
            return not self._closed and all(
                lib.rk_conn_state(self._lanes[i]) == lib.RK_CONN_CONNECTED
                for i in range(self._n))

    def _use(self):
        if self._closed:
            raise closed("Peer")
        return self._p

    def import_remote(self, desc: Buffer) -> "Remote":
        """Check a descriptor the peer's node exported to this node (bytes;
        hostile until checked: refused with an Error EPROTO, EINVAL or
        ESTALE naming the field) and return it as a Remote for post()."""
        p, n = in_buffer(desc, "desc")
        if n == 0:
            raise ValueError("desc: empty")
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_xfer_remote **")
        with self._xfer._lock:
            r = lib.rk_xfer_import(self._use(), p, n, err, out)
            if r < 0:
                raise_error(r, err)
            rem = Remote(self, out[0])
        return rem

    def post(self, ops: Union["Op", Iterable["Op"]], *, notify: Optional[int] = None,
             timeout: Optional[float] = None) -> "Batch":
        """Post a batch of ops (Read and Write; 1..max_ops) and return it at
        once: wait(), check(), ``await``. ``notify``: end the batch with a
        notification carrying this 32-bit value, which the peer receives
        (notif_wait) only once the batch's WRITEs have landed.
        ``timeout``: the batch's deadline in seconds from now (None: 10;
        math.inf: none); a batch still running then fails and its lanes
        are disconnected, so nothing of it lands later. The ops' local
        memory is the batch's until it ends."""
        if isinstance(ops, Op):
            ops = [ops]
        elif isinstance(ops, (str, bytes)) or not hasattr(ops, "__iter__"):
            raise TypeError("ops: an Op or a list of them expected, not %s"
                            % type(ops).__name__)
        ops = list(ops)
        n = len(ops)
        x = self._xfer
        if not 1 <= n <= x.max_ops:
            raise ValueError("ops: %d ops, 1..%d per batch" % (n, x.max_ops))
        bo = ffi.new("struct rk_xfer_batch_opts *")
        if notify is not None:
            bo.notify = 1
            bo.notif = check_int(notify, "notify", 0, U32_MAX)
        bo.timeout_ms = seconds_to_ms(timeout, "timeout")
        arr = ffi.new("struct rk_xfer_op[]", n)
        for i, o in enumerate(ops):
            if not isinstance(o, Op):
                raise TypeError("ops[%d]: an rdmakit.Read or Write expected, not %s"
                                % (i, type(o).__name__))
            if o.remote.peer is not self:
                raise ValueError("ops[%d]: remote: a descriptor imported by another peer" % i)
            if o.local._xfer is not x:
                raise ValueError("ops[%d]: local: a segment of another Xfer" % i)
        out = ffi.new("struct rk_xfer_batch **")
        with x._lock:
            p = self._use()
            for i, o in enumerate(ops):
                a = arr[i]
                a.op = o._opcode
                a.local = o.local._use()
                a.local_off = o.local_offset
                a.remote = o.remote._use()
                a.remote_off = o.remote_offset
                a.len = o.length
            if x._orphans:
                x._reap()
            r = lib.rk_xfer_post(p, arr, n, bo, self._err, out)
            if r == -errno.EBUSY:  # every slot taken: completions may free one
                lib.rkpy_xfer_poll(self._cq, x._x)
                x._reap()
                r = lib.rk_xfer_post(p, arr, n, bo, self._err, out)
            if r < 0:
                _raise(r, self._err)
            self._holds += 1
            b = Batch(self, out[0], ops, bo.timeout_ms)
            self._batches.add(b)
        return b

    def notif_take(self) -> Optional[int]:
        """The oldest notification the peer sent, or None if none has
        arrived (completions already polled; see notif_wait)."""
        with self._xfer._lock:
            if lib.rk_xfer_notif_take(self._use(), self._v):
                return self._v[0]
        return None

    def notif_wait(self, timeout: Optional[float] = 10.0) -> int:
        """Wait up to ``timeout`` seconds (math.inf: no deadline) for the
        peer's next notification and return its value. When it returns,
        the data of the batch that sent it has landed in this node's
        memory. DeadlineError when none came; PeerGoneError once every
        lane is down."""
        deadline = _deadline(timeout, "timeout", 10.0)
        x = self._xfer
        while True:
            with x._lock:
                p = self._use()
                r = lib.rkpy_notif_wait(p, self._lanes, self._n, _left_ms(deadline),
                                        self._v, self._err)
                if r == 1:
                    self._kick()
                    return self._v[0]
                if r < 0:
                    _raise(r, self._err)
            x._lock.let_in()
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineError(errno.ETIMEDOUT, "notif_wait: no notification in %s s"
                                    % timeout, op="rk_xfer_notif_wait")

    async def notif_wait_async(self, timeout: Optional[float] = 10.0) -> int:
        """notif_wait() for asyncio: waits on the peer's wait set (its fd on
        the running loop; the peer needs mode "event" or "adaptive")."""
        loop = asyncio.get_running_loop()
        ms = seconds_to_ms(timeout, "timeout", 10000)
        self._attach(loop)
        fut = loop.create_future()
        self._notif_futs.append(fut)
        timer = None
        if ms >= 0:
            timer = loop.call_later(ms / 1000.0, _expire, fut, DeadlineError(
                errno.ETIMEDOUT, "notif_wait: no notification in %s s" % timeout,
                op="rk_xfer_notif_wait"))
        try:
            self._readable()
            return await fut
        finally:
            if timer is not None:
                timer.cancel()
            try:
                self._notif_futs.remove(fut)
            except ValueError:
                pass

    # -- asyncio plumbing: the peer's wait set (its CQ and lanes) on the loop

    def _attach(self, loop):
        if self._loop is loop:
            return
        if self._mode == "busy":
            raise ValueError("the asyncio waits need a peer made with mode='event' or "
                             "'adaptive' (this one is 'busy')")
        with self._xfer._lock:
            self._use()
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError("the peer is tied to another event loop")
            if self._ws == ffi.NULL:
                self._ws = self._make_ws()
            fd = lib.rk_wait_fd(self._ws)
            lib.rkpy_xfer_drain(self._ws, self._xfer._x, self._err)  # arms the CQ
            self._loop, self._fd = loop, fd
            loop.add_reader(fd, self._readable)

    def _make_ws(self):
        o = ffi.new("struct rk_wait_opts *")
        o.mode = lib.RK_WAIT_EVENT
        out = ffi.new("struct rk_wait **")
        r = lib.rk_wait_create(o, self._err, out)
        if r < 0:
            raise_error(r, self._err)
        ws = out[0]
        r = lib.rk_wait_add_cq(ws, self._cq, 64, 0, self._err)
        for i in range(self._n):
            if r >= 0:
                r = lib.rk_wait_add_conn(ws, self._lanes[i], i + 1, self._err)
        if r < 0:
            lib.rk_wait_destroy(ws)
            raise_error(r, self._err)
        return ws

    def _readable(self):
        """The wait set's fd fired (or a wait wants a look): hand what came
        to the library, settle the awaited batches and notifications."""
        with self._xfer._lock:
            if self._closed or self._ws == ffi.NULL:
                return
            r = lib.rkpy_xfer_drain(self._ws, self._xfer._x, self._err)
            if r < 0:
                e = _error(r, self._err)
                for _, fut in list(self._waiting):
                    _expire(fut, e)
            for b, fut in list(self._waiting):
                res = b._check_locked()
                if res is True:
                    _resolve(fut, None)
                elif res is not None:
                    _expire(fut, res)
            futs = self._notif_futs
            while futs:
                if futs[0].done():  # timed out or canceled: takes nothing
                    futs.popleft()
                elif lib.rk_xfer_notif_take(self._p, self._v):
                    futs.popleft().set_result(self._v[0])
                else:
                    break
            if self._notif_futs and not any(
                    lib.rk_conn_state(self._lanes[i]) == lib.RK_CONN_CONNECTED
                    for i in range(self._n)):
                e = PeerGoneError(errno.ECONNRESET, "peer gone: no lane is connected",
                                  op="rk_xfer_notif_wait")
                for fut in self._notif_futs:
                    _expire(fut, e)

    def _kick(self):
        """A blocking wait took completions: the loop's waiters may be done."""
        if self._loop is not None and (self._waiting or self._notif_futs):
            try:
                self._loop.call_soon_threadsafe(self._readable)
            except RuntimeError:
                pass

    def _detach(self):
        if self._loop is not None and self._fd >= 0:
            try:
                self._loop.remove_reader(self._fd)
            except Exception:
                pass
        self._loop, self._fd = None, -1

    def _cancel_using(self, seg):
        """Cancel the batches still running that use @seg (the lock held)."""
        for b in list(self._batches):
            if b._b != ffi.NULL and b._result is None and b._keep and any(
                    o.local is seg for o in b._keep):
                b._free_locked()
        keep, done = [], []
        for o in self._xfer._orphans:
            (done if o[1] is self and any(op.local is seg for op in o[2]) else keep).append(o)
        self._xfer._orphans[:] = keep
        for h, p, _ in done:
            _free_batch(h, p)

    def close(self) -> None:
        """Cancel the batches still running, forget the imported
        descriptors, revoke what was exported to the peer, disconnect.
        Idempotent."""
        if self._closed:
            return
        x = self._xfer
        with x._lock:
            if self._closed:
                return
            self._detach()
            for b in list(self._batches):
                b._free_locked()
            x._reap(self)
            for r in list(self._remotes):
                r._free_locked()
            self._closed = True
            if self._holds == 0:
                self._end()
            e = closed("Peer")
            for _, fut in list(self._waiting):
                _expire(fut, e)
            for fut in self._notif_futs:
                _expire(fut, e)
            self._waiting.clear()

    def _release(self):
        """A batch or descriptor of the peer is freed (the lock held); see
        Xfer._release."""
        self._holds -= 1
        if self._holds == 0 and self._closed:
            self._end()

    def _end(self):
        p, self._p = self._p, ffi.NULL
        if p == ffi.NULL:
            return
        self._lib.rk_xfer_peer_destroy(p)
        if self._ws != ffi.NULL:
            self._lib.rk_wait_destroy(self._ws)
            self._ws = ffi.NULL
        for i in reversed(range(self._n)):
            self._lib.rk_conn_destroy(self._lanes[i])
        self._lib.rk_cq_destroy(self._cq)
        self._xfer._release()

    def __repr__(self) -> str:
        return "<rdmakit.Peer %s, %d lanes%s>" % (getattr(self, "name", "?"),
                                                 getattr(self, "_n", 0),
                                                 " closed" if self._closed else "")


def _free_batch(h, peer):
    """Free a batch handle (the lock held); its peer may go after it."""
    lib.rk_xfer_batch_free(h)
    peer._release()


def _resolve(fut, v):
    if not fut.done():
        fut.set_result(v)


def _expire(fut, e):
    if not fut.done():
        fut.set_exception(e)


class Remote(Closable):
    """A descriptor imported from the peer's node: the ``length`` bytes it
    may READ and/or WRITE there (``access``). Made by Peer.import_remote();
    closed with its peer."""

    def __init__(self, peer: Peer, handle) -> None:
        self._r = handle
        self._lib = lib
        self.peer: Peer = peer
        """The peer it was imported from."""
        self.length: int = lib.rk_xfer_remote_len(handle)
        """The exported segment's length in bytes."""
        self.access: Access = Access(lib.rk_xfer_remote_access(handle) & 3)
        """What the descriptor grants."""
        peer._remotes.add(self)
        peer._holds += 1

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._r == ffi.NULL

    def _use(self):
        if self._r == ffi.NULL:
            raise closed("Remote")
        return self._r

    def _free_locked(self):
        r, self._r = self._r, ffi.NULL
        if r != ffi.NULL:
            self._lib.rk_xfer_remote_free(r)
            self.peer._release()

    def close(self) -> None:
        """Forget the descriptor (batches posted with it run on). Idempotent."""
        if self._r == ffi.NULL:
            return
        with self.peer._xfer._lock:
            self._free_locked()

    def __repr__(self) -> str:
        return "<rdmakit.Remote %d B %s%s>" % (self.length, self.access,
                                               " closed" if self.closed else "")


# ---- ops and batches --------------------------------------------------------

class Op:
    """One op of a batch: ``length`` bytes between the local segment at
    ``local_offset`` and the remote one at ``remote_offset``. ``length``
    None: as much as fits both from the offsets. Checked here against both
    lengths and the descriptor's access (ValueError naming the argument).
    Use Read and Write."""

    __slots__ = ("local", "remote", "length", "local_offset", "remote_offset")
    _opcode = -1
    _needs = Access.NONE

    def __init__(self, local: Segment, remote: Remote, length: Optional[int] = None, *,
                 local_offset: int = 0, remote_offset: int = 0) -> None:
        if type(self) is Op:
            raise TypeError("Op: use rdmakit.Read or rdmakit.Write")
        if not isinstance(local, Segment):
            raise TypeError("local: an rdmakit.Segment expected, not %s" % type(local).__name__)
        if not isinstance(remote, Remote):
            raise TypeError("remote: an rdmakit.Remote expected, not %s"
                            % type(remote).__name__)
        lo = check_int(local_offset, "local_offset", 0, local.nbytes)
        ro = check_int(remote_offset, "remote_offset", 0, remote.length)
        if length is None:
            length = min(local.nbytes - lo, remote.length - ro)
            if length == 0:
                raise ValueError("length: nothing left to move at these offsets")
        length = check_int(length, "length", 1, _U64)
        if length > local.nbytes - lo:
            raise ValueError("length: %d bytes at local_offset %d pass the %d-byte segment"
                             % (length, lo, local.nbytes))
        if length > remote.length - ro:
            raise ValueError("length: %d bytes at remote_offset %d pass the %d-byte remote"
                             % (length, ro, remote.length))
        if not remote.access & self._needs:
            raise ValueError("remote: the descriptor grants %s, not %s"
                             % (remote.access, self._needs))
        self.local: Segment = local
        self.remote: Remote = remote
        self.length: int = length
        self.local_offset: int = lo
        self.remote_offset: int = ro

    def __repr__(self) -> str:
        return "%s(%d B, local +%d, remote +%d)" % (type(self).__name__, self.length,
                                                    self.local_offset, self.remote_offset)


class Read(Op):
    """RDMA READ: from the remote segment into the local one."""

    __slots__ = ()
    _opcode = lib.RK_XFER_OP_READ
    _needs = Access.READ


class Write(Op):
    """RDMA WRITE: from the local segment into the remote one."""

    __slots__ = ()
    _opcode = lib.RK_XFER_OP_WRITE
    _needs = Access.WRITE


class Batch:
    """A posted batch of ops (Peer.post). It ends once, when all its ops
    completed or one failed: ``wait()`` blocks for that, ``check()`` looks,
    ``await batch`` (or ``await batch.wait_async()``) waits on asyncio.
    A failure raises the library's Error (RemoteAccessError: refused by
    the owner; PeerGoneError; DeadlineError); ``op_status(i)`` says which
    ops failed.

    close() cancels a batch still running (its lanes are disconnected, so
    nothing of it lands later: the peer is then gone). A batch merely
    dropped while running runs to its end and is freed then.
    """

    def __init__(self, peer: Peer, handle, ops: List[Op], timeout_ms: int) -> None:
        self._peer = peer
        self._b = handle
        self._keep = ops  # the segments and descriptors, until the batch ends
        self._result = None  # True, or the Error it failed with
        self._closed = False
        self.nops: int = len(ops)
        """How many ops."""
        t = 10.0 if timeout_ms == 0 else timeout_ms / 1000.0
        self._deadline = None if timeout_ms < 0 else time.monotonic() + t

    def _check_locked(self):
        """None (running), True or the Error (the lock held)."""
        if self._result is None and self._b != ffi.NULL:
            err = self._peer._err
            r = lib.rk_xfer_batch_check(self._b, err)
            if r != 0:
                self._result = True if r == 1 else _error(r, err)
                self._keep = None
        return self._result

    def _outcome(self, res):
        if res is True:
            return
        raise res

    @property
    def done(self) -> bool:
        """True once the batch ended (well or not); looks for completions."""
        return self.check(raise_error=False)

    def check(self, raise_error: bool = True) -> bool:
        """Look once (no waiting): True if the batch ended well, False
        while it runs; raises the Error it failed with (or returns True
        with ``raise_error=False``)."""
        x = self._peer._xfer
        with x._lock:
            if self._closed:
                raise closed("Batch")
            if self._result is None:
                if self._b == ffi.NULL:
                    raise closed("Batch")
                if not self._peer._closed:
                    lib.rkpy_xfer_poll(self._peer._cq, x._x)
                self._check_locked()
            res = self._result
        if res is None:
            return False
        if raise_error:
            self._outcome(res)
        return True

    def wait(self, timeout: Optional[float] = None) -> None:
        """Block until the batch ends (the GIL released), at most
        ``timeout`` seconds (None: up to the batch's own deadline). Raises
        the batch's Error, or DeadlineError if ``timeout`` passed first
        (the batch then runs on: see ``done``)."""
        deadline = self._deadline if timeout is None else _deadline(timeout, "timeout", 0)
        peer = self._peer
        x = peer._xfer
        while True:
            with x._lock:
                if self._result is not None:
                    break
                if self._b == ffi.NULL or peer._closed:
                    raise closed("Batch")
                ms = _left_ms(deadline) if deadline is not None else _SLICE_MS
                r = lib.rkpy_batch_wait(self._b, peer._lanes, peer._n, ms, peer._err)
                if r != 0:
                    self._check_locked()
                    peer._kick()
                    break
            x._lock.let_in()
            if timeout is not None and deadline is not None and time.monotonic() >= deadline:
                raise DeadlineError(errno.ETIMEDOUT, "wait: batch still running after %s s"
                                    % timeout, op="rk_xfer_batch_wait")
        self._outcome(self._result)

    async def wait_async(self, timeout: Optional[float] = None) -> None:
        """wait() for asyncio: the peer's wait set on the running loop (the
        peer needs mode "event" or "adaptive"); ``await batch`` is the
        same with no timeout."""
        peer = self._peer
        loop = asyncio.get_running_loop()
        peer._attach(loop)
        with peer._xfer._lock:
            if self._result is None and self._b == ffi.NULL:
                raise closed("Batch")
            res = self._check_locked()
        if res is not None:
            return self._outcome(res)
        fut = loop.create_future()
        st = (self, fut)
        peer._waiting.add(st)
        timers = []
        if timeout is not None:
            ms = seconds_to_ms(timeout, "timeout")
            if ms >= 0:
                timers.append(loop.call_later(ms / 1000.0, _expire, fut, DeadlineError(
                    errno.ETIMEDOUT, "wait: batch still running after %s s" % timeout,
                    op="rk_xfer_batch_wait")))
        if self._deadline is not None:  # the batch's own deadline, seen by a look then
            timers.append(loop.call_at(loop.time() + max(0.0, self._deadline - time.monotonic())
                                       + 0.005, peer._readable))
        try:
            peer._readable()
            await fut
        finally:
            for t in timers:
                t.cancel()
            peer._waiting.discard(st)

    def __await__(self):
        return self.wait_async().__await__()

    def op_status(self, i: int) -> OpStatus:
        """Op ``i``'s outcome once the batch ended (see OpStatus); all zero
        for every op of a batch that ended well."""
        i = check_int(i, "i", 0, self.nops - 1)
        wc = ffi.new("int *")
        with self._peer._xfer._lock:
            if self._b == ffi.NULL:
                raise closed("Batch")
            if self._check_locked() is None:
                raise ValueError("i: the batch is still running")
            r = lib.rkpy_op_status(self._b, i, wc)
        return OpStatus(-r if r < 0 else 0, wc[0])

    def _free_locked(self):
        b, self._b = self._b, ffi.NULL
        if b != ffi.NULL:
            if self._result is None:
                self._result = Error(errno.ECANCELED, "batch canceled", op="rk_xfer_batch_free")
            _free_batch(b, self._peer)
        self._keep = None

    def close(self) -> None:
        """Release the batch; one still running is canceled (its lanes are
        disconnected so that nothing of it lands later). Idempotent."""
        with self._peer._xfer._lock:
            self._closed = True
            self._free_locked()

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            x = self._peer._xfer
            with x._lock:
                b = self._b
                if b == ffi.NULL:
                    return
                self._b = ffi.NULL
                if self._result is not None or self._peer._closed or \
                        lib.rk_xfer_batch_check(b, ffi.NULL) != 0:
                    _free_batch(b, self._peer)
                else:  # running: freed once it ends (its memory kept till then)
                    x._orphans.append([b, self._peer, self._keep])
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "running" if self._result is None else (
            "done" if self._result is True else "failed")
        return "<rdmakit.Batch %d ops %s>" % (self.nops, state)
