"""rdmakit.xfer's lanes: the rdma_cm connections a Peer is made of. The
connecting side's connect_lanes (Xfer.connect) and the Listener, which
groups arriving lanes into peers by their hello's token. Import the public
names from rdmakit.xfer."""
from __future__ import annotations

import errno
import time
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

from ._rk import ffi, lib
from ._util import Closable, check_int, closed, raise_error, track, wait_mode
from .errors import DeadlineError, Error
from .rpc import _cstr
from .xfer_base import (LANES_APP_ID, _TOKEN_LEN, _Lock, _conn_opts, _deadline, _finite_ms,
                        _left_ms, _make_cq)
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
        return Peer(xfer, cq, conns, mode, "%s:%s" % (host, port)), data
    except BaseException:
        for c in reversed(conns):
            lib.rk_conn_destroy(c)
        lib.rk_cq_destroy(cq)
        raise


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
        from .xfer import Xfer  # which imports this module
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

