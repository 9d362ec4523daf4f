"""rdmakit.xfer's lanes: the rdma_cm connections a Peer is made of. The
connecting side's connect_lanes (Xfer.connect) and the Listener, which
groups arriving lanes into peers by their hello's token. Import the public
names from rdmakit.xfer."""
from __future__ import annotations

import errno
import math
import select
import threading
import time
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

from ._rk import ffi, lib
from ._util import Closable, check_int, closed, raise_error, track, wait_mode
from .errors import DeadlineError, Error
from .rpc import _cstr
from .xfer_base import (LANES_APP_ID, _SLICE_MS, _TOKEN_LEN, _conn_opts, _deadline, _finite_ms,
                        _make_cq)
from .xfer_peer import Peer

if TYPE_CHECKING:
    from .xfer import Xfer

def connect_lanes(xfer: "Xfer", host: str, port: Union[int, str],
                  hellos: List[Tuple[int, int, bytes]], mode: str, timeout: Optional[float],
                  src_addr: Optional[str]) -> Tuple[Peer, bytes]:
    """A Peer of len(hellos) lanes to ``host``:``port``, lane i connected
    with hello i (app_id, app_arg, token), one after the other; and the
    private data the server accepted lane 0 with (copied). Xfer.connect
    and Xfer.connect_lane, which check the hellos."""
    n = len(hellos)
    wm = wait_mode(mode)
    ms = _finite_ms(timeout, "timeout", 0)
    keep = []
    h_host = _cstr(host, "host", keep)
    h_port = _cstr(port, "port", keep)
    h_src = _cstr(src_addr, "src_addr", keep) if src_addr is not None else ffi.NULL
    dev = xfer._device._use()
    err = ffi.new("struct rk_error *")
    cq = _make_cq(dev, n, xfer._rq, wm)
    conns = []
    try:
        for app_id, app_arg, token in hellos:
            o = ffi.new("struct rk_cm_connect_opts *")
            h = ffi.new("struct rk_hello *")
            h.app_id = app_id
            h.app_arg = app_arg
            h.token_len = len(token)
            ffi.memmove(h.token, token, len(token))
            o.host, o.port, o.src_addr, o.timeout_ms, o.hello = h_host, h_port, h_src, ms, h
            _conn_opts(o.conn, cq, xfer._rq)
            out = ffi.new("struct rk_conn **")
            r = lib.rk_cm_connect(dev, o, err, out)
            if r < 0:
                raise_error(r, err)
            conns.append(out[0])
        ln = ffi.new("size_t *")
        p = lib.rk_conn_peer_data(conns[0], ln)
        data = ffi.unpack(ffi.cast("char *", p), ln[0]) if p != ffi.NULL else b""
        token = hellos[0][2] if hellos[0][0] == LANES_APP_ID else b""
        return Peer(xfer, cq, conns, mode, "%s:%s" % (host, port), token), data
    except BaseException:
        for c in reversed(conns):
            lib.rk_conn_destroy(c)
        lib.rk_cq_destroy(cq)
        raise


class _Pending:
    """A peer whose lanes are arriving: its CQ, its lanes so far (each
    CONNECTING until its handshake ends, then CONNECTED), each lane's
    handshake deadline, the peer's deadline, its name, host and token."""

    __slots__ = ("cq", "conns", "up", "lane_deadline", "n", "deadline", "name", "host", "token")

    def __init__(self, cq, n, name, host, token):
        self.cq, self.n, self.name, self.host, self.token = cq, n, name, host, token
        self.conns, self.up, self.lane_deadline = [], [], []
        self.deadline = time.monotonic() + _PEER_S

    def whole(self):
        return len(self.conns) == self.n and all(self.up)


_PEER_S = 10.0       # a peer's lanes all arrive within this, or it is dropped
_TAKE_PER_TURN = 8   # connect requests taken between two looks at the lanes connecting


def _host(name):
    """The address of "10.0.0.2:51234" or "[fe80::1]:51234", without the port."""
    return name.rsplit(":", 1)[0]


class Listener(Closable):
    """Takes peers' lanes on ``port`` (0: pick one, see ``port``):
    ``accept()`` returns the next Peer whose lanes have all arrived.

    ``mode``: the accepted peers' (see Xfer.connect). ``max_pending``:
    peers whose lanes are still arriving, at most (more are turned away as
    busy); ``max_pending_per_addr``: of them, from one address, at most (so
    that one host cannot take every place). A lane is accepted without
    waiting for its handshake: a lane whose handshake has not ended within
    ``accept_timeout`` (3 s), or a peer whose lanes have not all arrived
    within 10 s, is closed, and meanwhile the others' lanes go on. A
    context manager; closed with its Xfer. One thread accepts at a time;
    close() may come from another.
    """

    def __init__(self, xfer: Xfer, port: Union[int, str] = 0, *, addr: Optional[str] = None,
                 mode: str = "busy", max_pending: int = 8,
                 max_pending_per_addr: int = 4) -> None:
        self._lis = ffi.NULL
        self._closed = True
        self._lib = lib
        from .xfer import Xfer  # which imports this module
        if not isinstance(xfer, Xfer):
            raise TypeError("xfer: an rdmakit.Xfer expected, not %s" % type(xfer).__name__)
        self._wm = wait_mode(mode)
        self._mode = mode
        self._max_pending = check_int(max_pending, "max_pending", 1, 1024)
        self._max_per_addr = check_int(max_pending_per_addr, "max_pending_per_addr", 1, 1024)
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
        self._lock = threading.Lock()  # held for non-blocking steps only, never across a wait
        self._pending = {}  # token -> _Pending
        self._closers = []  # threads closing dropped lanes (a CONNECTING lane's close waits)
        self._fd = lib.rk_listener_fd(self._lis)
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

    @property
    def pending(self) -> int:
        """Peers whose lanes are still arriving (or handshaking)."""
        return len(self._pending)

    def accept(self, timeout: Optional[float] = 10.0, *,
               accept_timeout: Optional[float] = None) -> Peer:
        """Wait up to ``timeout`` seconds (math.inf: no deadline) for a
        peer's lanes and return the Peer. ``accept_timeout``: each lane's
        handshake, seconds (None: 3), after which the lane and its peer are
        closed; the other peers' lanes go on meanwhile (a connector that
        never ends its handshake holds nobody). DeadlineError when none
        came."""
        deadline = _deadline(timeout, "timeout", 10.0)
        ams = _finite_ms(accept_timeout, "accept_timeout", 3000) / 1000.0
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_cm_request **")
        while True:
            with self._lock:
                if self._closed:
                    raise closed("Listener")
                peer, fds, wake = self._turn(ams, err, out)
            if peer is not None:
                try:
                    return Peer(self._xfer, peer.cq, peer.conns, self._mode, peer.name,
                                peer.token)
                except BaseException:
                    self._destroy(peer)
                    raise
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise DeadlineError(errno.ETIMEDOUT, "accept: no peer within %s s" % timeout,
                                    op="accept")
            # The wait, outside the lock: the listener's fd (a connect
            # request) and the CM fds of the lanes connecting (their
            # handshake's end), up to the next lane's deadline.
            until = min(wake, now + _SLICE_MS / 1000.0)
            if deadline is not None:
                until = min(until, deadline)
            pl = select.poll()
            for fd in fds:
                pl.register(fd, select.POLLIN)
            pl.poll(max(0, int(math.ceil((until - now) * 1000))))

    def _turn(self, ams, err, out):
        """One look, not waiting (the lock held): close what is past its
        deadline, see handshakes ended, take the connect requests waiting.
        Returns (a whole peer or None, the fds to wait on, when to look
        again at the latest)."""
        now = time.monotonic()
        for token, s in list(self._pending.items()):
            for i, c in enumerate(s.conns):
                if s.up[i]:
                    continue
                st = lib.rk_conn_progress(c, 0, err)
                if st == lib.RK_CONN_CONNECTED:
                    s.up[i] = True
                elif st < 0 or st != lib.RK_CONN_CONNECTING or now >= s.lane_deadline[i]:
                    s.deadline = 0  # that lane failed or stalled: the peer goes
            if now >= s.deadline:
                self._drop(token)
        for _ in range(_TAKE_PER_TURN):
            r = lib.rk_listener_get_request(self._lis, 0, err, out)
            if r == 0:
                self._take(out[0], ams, err)
            elif r in (-errno.EAGAIN, -errno.ETIMEDOUT, -errno.EINTR):
                break
            else:
                raise_error(r, err)
        fds, wake = [self._fd], now + _PEER_S
        for token, s in list(self._pending.items()):
            if s.whole():
                del self._pending[token]
                return s, fds, now
            wake = min(wake, s.deadline)
            for i, c in enumerate(s.conns):
                if not s.up[i]:
                    fds.append(lib.rk_conn_cm_fd(c))
                    wake = min(wake, s.lane_deadline[i])
        return None, fds, wake

    def _take(self, req, ams, err):
        """One lane's request (the lock held): accepted without waiting for
        its handshake, or rejected."""
        h = lib.rk_cm_request_hello(req)
        lane, n, extra = h.app_arg & 0xFF, (h.app_arg >> 8) & 0xFF, h.app_arg >> 16
        token = ffi.unpack(ffi.cast("char *", h.token), h.token_len)
        name = ffi.string(lib.rk_cm_request_peer(req)).decode("utf-8", "replace")
        s = self._pending.get(token)
        why = None
        if h.token_len != _TOKEN_LEN or extra or not 1 <= n <= lib.RK_XFER_LANES_MAX or lane >= n:
            why = (lib.RK_REJECT_BAD_HELLO, b"not a lane")
        elif lane == 0 and s is not None:
            why = (lib.RK_REJECT_BUSY, b"that peer is connecting")
        elif lane == 0 and len(self._pending) >= self._max_pending:
            why = (lib.RK_REJECT_BUSY, b"too many peers connecting")
        elif lane == 0 and sum(p.host == _host(name)
                               for p in self._pending.values()) >= self._max_per_addr:
            why = (lib.RK_REJECT_BUSY, b"too many peers connecting from this address")
        elif lane and (s is None or s.n != n or len(s.conns) != lane or s.host != _host(name)):
            why = (lib.RK_REJECT_NO_SESSION, b"no such peer")
        if why:
            lib.rk_cm_request_reject(req, why[0], why[1], ffi.NULL)
            return
        if s is None:
            try:
                cq = _make_cq(self._xfer._device._use(), n, self._xfer._rq, self._wm)
            except Error:
                lib.rk_cm_request_reject(req, lib.RK_REJECT_BUSY, b"no CQ", ffi.NULL)
                raise
            s = self._pending[token] = _Pending(cq, n, name, _host(name), token)
        opts = ffi.new("struct rk_conn_opts *")
        _conn_opts(opts, s.cq, self._xfer._rq)
        c = ffi.new("struct rk_conn **")
        # Timeout 0: returns with the lane CONNECTING (cm.h); _turn sees it end.
        r = lib.rk_cm_request_accept(req, opts, ffi.NULL, 0, 0, err, c)
        if r < 0:
            self._drop(token)  # that peer's problem: its connect fails
            return
        s.conns.append(c[0])
        s.up.append(False)
        s.lane_deadline.append(time.monotonic() + ams)

    @staticmethod
    def _destroy(s):
        for c in reversed(s.conns):
            lib.rk_conn_destroy(c)
        lib.rk_cq_destroy(s.cq)

    def _drop(self, token):
        """Close a pending peer's lanes (the lock held) on a thread of its
        own: closing a lane whose handshake is under way waits for the CM
        (up to a second), which would hold the other peers' lanes."""
        s = self._pending.pop(token, None)
        if s is None:
            return
        self._closers = [t for t in self._closers if t.is_alive()]
        t = threading.Thread(target=self._destroy, args=(s,), name="rdmakit-lane-close",
                             daemon=True)
        t.start()
        self._closers.append(t)

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
            closers, self._closers = self._closers, []
        for t in closers:
            t.join()
        self._lib.rk_listener_destroy(lis)
        self._device._release()

    def __repr__(self) -> str:
        return "<rdmakit.Listener port %s%s>" % (getattr(self, "port", "?"),
                                                 " closed" if self._closed else "")

