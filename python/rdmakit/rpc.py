"""rdmakit.rpc - request / response calls (librdmakit's rpc.h and rpc_pool.h).

RpcServer serves methods (numbers 0..65535) with Python callables; a
handler answers at once (by returning) or later, from any thread
(Request.defer, Request.reply). RpcClient calls one server: call() blocks
(the GIL released) until the answer or the deadline, ``await acall()`` does
the same on an asyncio loop through the client's file descriptor. RpcPool
keeps connections to many servers and may be called from any thread.

Data: requests and answers are any object with the buffer protocol (bytes,
bytearray, memoryview, array, numpy arrays, mmap), passed to the library
without a copy; an answer lands in the caller's writable buffer (``out=``)
or comes back as bytes.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import threading
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from ._rk import ffi, lib
from ._util import (INT32_MAX, U32_MAX, Closable, Guard, check_int, closed, in_buffer, out_buffer,
                    raise_error, seconds_to_ms, track, wait_mode)
from .device import Device
from .errors import Error, HandlerError

__all__ = ["RpcServer", "Request", "RpcClient", "RpcPool", "DEFAULT_MAX_SIZE"]

log = logging.getLogger("rdmakit")

DEFAULT_MAX_SIZE = 4084
"""The answer size call() accepts when given neither ``out`` nor
``max_size``: what fits the response slot of a server with default
settings (4096 - 12 bytes), so no memory is registered for the call."""

Buffer = Any  # anything with the buffer protocol

if lib.RKPY_ANSWER_MAX != DEFAULT_MAX_SIZE:  # call()'s per-thread answer buffer (rdmakit_build.py)
    raise ImportError("rdmakit: RKPY_ANSWER_MAX != DEFAULT_MAX_SIZE")

_EAGAIN = -errno.EAGAIN
_fcall = lib.rkpy_fcall  # module globals: found faster than attributes, per call
_acall = lib.rkpy_acall
_afcall = lib.rkpy_afcall
_unpack = ffi.unpack
_CLOSED = lib.RKPY_FAST_CLOSED
_BAD_METHOD = lib.RKPY_FAST_BAD_METHOD
_INFLIGHT = lib.RKPY_INFLIGHT
_FAILED = lib.RKPY_FAILED
_ELSEWHERE = lib.RKPY_FAST_ELSEWHERE
_NOT_HERE = lib.RKPY_NOT_HERE
_get_ident = threading.get_ident
_fcall_many = lib.rkpy_fcall_many
_MANY = lib.RKPY_MANY_MAX
# The answer of a call() from a thread that does not own the client's
# answer buffer (rdmakit_build.py, rkpy_fcall): that thread's rkpy_answer
# as a cffi buffer, made once per thread. Slicing a cffi buffer is the
# cheapest way from C memory to bytes (fetching lib.rkpy_answer makes a
# new cdata at every access, and ffi.unpack parses keyword arguments); the
# owner's buffer is an attribute of its client, which costs less to reach
# than a threading.local.
_tls = threading.local()


def _thread_answer():
    """This thread's answer buffer (made on its first use)."""
    try:
        return _tls.answer
    except AttributeError:
        b = _tls.answer = ffi.buffer(lib.rkpy_answer)
        return b


def _many_buffers():
    """This thread's call_many() buffers: the answers (room for a chunk of
    64), that memory as a cffi buffer, their ends, the requests' lengths,
    the failed call's status."""
    out = ffi.new("char[]", DEFAULT_MAX_SIZE * lib.RKPY_MANY_MAX)
    m = _tls.many = (out, ffi.buffer(out), ffi.new("uint32_t[]", lib.RKPY_MANY_MAX),
                     ffi.new("uint32_t[]", lib.RKPY_MANY_MAX), ffi.new("int *"))
    return m


class _CLock:
    """An RpcClient's lock: the mutex in its struct rkpy_fast, which the
    fast paths (rkpy_fcall, rkpy_acall) take inside their one foreign
    call. Taking it here blocks with the GIL released."""

    __slots__ = ("_f",)

    def __init__(self, f):
        self._f = f

    def __enter__(self):
        lib.rkpy_fast_lock(self._f)
        return self

    def __exit__(self, *exc):
        lib.rkpy_fast_unlock(self._f)


def _token(token, opts, keep):
    if token is None:
        return
    if isinstance(token, str):
        token = token.encode()
    t, n = in_buffer(token, "token")
    if n > lib.RK_HELLO_TOKEN_MAX:
        raise ValueError("token: %d bytes, at most %d" % (n, lib.RK_HELLO_TOKEN_MAX))
    keep.append(token)
    keep.append(t)
    opts.token = t
    opts.token_len = n


def _method(m):
    return check_int(m, "method", 0, 0xFFFF)


def _cstr(v, name, keep):
    if isinstance(v, int) and not isinstance(v, bool) and name == "port":
        v = str(check_int(v, "port", 0, 65535))
    if not isinstance(v, str):
        raise TypeError("%s: a string expected, not %s" % (name, type(v).__name__))
    if "\0" in v:
        raise ValueError("%s: %r contains NUL" % (name, v))
    c = ffi.new("char[]", v.encode())
    keep.append(c)
    return c


# ---- server -----------------------------------------------------------------

class Request:
    """One call to an RpcServer, handed to the handler.

    The handler answers by returning (bytes-like or None), by calling
    reply(), or by raising (HandlerError: that code and data; anything else:
    logged, and answered with -EIO, or -errno of an OSError). To answer
    later, possibly from another thread, call defer() and keep the request;
    reply() then exactly once. Until the answer, the request holds its
    connection's slot and its data.
    """

    __slots__ = ("_srv", "_req", "_p", "_n", "_data", "method", "deferred")

    def __init__(self, srv: "RpcServer", req, method: int, p, n: int) -> None:
        self._srv = srv
        self._req = req
        self._p = p
        self._n = n
        self._data = None
        self.method: int = method
        """The method called."""
        self.deferred: bool = False
        """True once defer() was called."""

    @property
    def data(self) -> bytes:
        """The request's body (a copy, read once; the library's memory is
        freed by the answer). Not available after an answer unless read
        before."""
        if self._data is None:
            with self._srv._lock:
                if self._req is None:
                    raise ValueError("data: the request was answered before its data was read")
                self._data = ffi.unpack(self._p, self._n) if self._n else b""
        return self._data

    def __len__(self) -> int:
        """The request body's length in bytes."""
        return self._n

    def _info(self, what):
        with self._srv._lock:
            if self._req is None:
                raise ValueError("%s: the request was answered" % what)
            if what == "peer":
                return ffi.string(lib.rk_rpc_req_peer(self._req)).decode()
            return lib.rk_rpc_req_resp_cap(self._req)

    @property
    def peer(self) -> str:
        """The caller's address ("10.0.0.2:51234"); until the answer."""
        return self._info("peer")

    @property
    def max_answer(self) -> int:
        """The largest answer (bytes) the caller accepts; until the answer."""
        return self._info("max_answer")

    @property
    def answered(self) -> bool:
        """True once the request was answered (or its server closed)."""
        return self._req is None

    def defer(self) -> "Request":
        """Answer later: the handler may return without answering; reply()
        then, from any thread. Returns the request."""
        self.deferred = True
        return self

    def reply(self, data: Buffer = b"", code: int = 0) -> None:
        """Answer with ``data`` (any bytes-like object; copied before the
        return) and ``code`` (0: success; otherwise the caller gets a
        RemoteError with it). Exactly once, from any thread. ValueError if
        already answered; ClosedError if the server was closed."""
        code = check_int(code, "code", -0x80000000, INT32_MAX)
        p, n = in_buffer(data, "data")
        self._answer(code, p, n)

    def _answer(self, code, p, n):
        srv = self._srv
        with srv._lock:
            req = self._req
            if req is None:
                if srv._guard.closed:
                    raise closed("RpcServer")
                raise ValueError("reply: the request was answered already")
            self._req = None
            srv._deferred.discard(self)
            lib.rkpy_reply(req, code, p, n)

    def __repr__(self) -> str:
        return "<rdmakit.Request method %d%s>" % (self.method,
                                                  " answered" if self._req is None else "")


Handler = Callable[[Request], Optional[Buffer]]


@ffi.def_extern()
def rkpy_handler(req, arg, method, p, n):
    ffi.from_handle(arg)._dispatch(req, method, p, n)


def _exc_code(e):
    if isinstance(e, OSError) and isinstance(e.errno, int) and 0 < e.errno < 4096:
        return -e.errno
    return -errno.EIO


class RpcServer(Closable):
    """An RPC server on a device: listens on ``port`` (0: pick one, see
    ``port``) and serves methods with Python handlers.

    Handlers run on the server's progress thread: ``start()`` runs one in
    the background; ``serve()`` runs the loop in the calling thread;
    ``progress()`` does one step. A handler is ``fn(request) -> answer``:
    see Request. A handler that raises answers the call with an error code
    and the exception is logged (logger "rdmakit"); the server goes on.

    Arguments (0 / None: the library's default): window (calls in flight
    per connection, 64), max_msg (largest request or answer, 64 MiB),
    max_conns (64), mode ("busy" spins a core and answers fastest, "event"
    sleeps; also "adaptive"), token (bytes clients must bring), idle (close
    a connection idle this many seconds; 60; math.inf never), addr (the
    local address to bind; any). A context manager; closed on garbage
    collection and at interpreter exit (requests not answered then are
    dropped: their callers see the connection end).
    """

    def __init__(self, device: Device, port: Union[int, str] = 0, *,
                 addr: Optional[str] = None, window: int = 0, max_msg: int = 0,
                 max_conns: int = 0, mode: str = "busy", token: Optional[bytes] = None,
                 idle: Optional[float] = None) -> None:
        self._srv = ffi.NULL
        self._guard = Guard("RpcServer")
        self._lock = threading.Lock()  # requests answered vs. the server's end
        self._handlers: Dict[int, Handler] = {}
        self._deferred = set()
        self._thread: Optional[threading.Thread] = None
        self._stop = False
        self._progress_ident = None
        self._lib = lib
        if not isinstance(device, Device):
            raise TypeError("device: an rdmakit.Device expected, not %s" % type(device).__name__)
        keep = []
        opts = ffi.new("struct rk_rpc_server_opts *")
        opts.port = _cstr(port, "port", keep)
        if addr is not None:
            opts.addr = _cstr(addr, "addr", keep)
        opts.window = check_int(window, "window", 0, lib.RK_RPC_MAX_WINDOW)
        opts.max_msg = check_int(max_msg, "max_msg", 0, U32_MAX)
        opts.max_conns = check_int(max_conns, "max_conns", 0, 65535)
        opts.mode = wait_mode(mode)
        _token(token, opts, keep)
        if idle is not None:
            ms = seconds_to_ms(idle, "idle")
            opts.idle_ms = lib.RK_RPC_IDLE_NEVER if ms < 0 else ms
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_rpc_server **")
        r = lib.rk_rpc_server_create(device._use(), opts, err, out)
        if r < 0:
            raise_error(r, err)
        self._srv = out[0]
        self._device = device
        self._err = ffi.new("struct rk_error *")
        self._handle = ffi.new_handle(self)
        self.port: int = lib.rk_rpc_server_port(self._srv)
        """The port the server listens on."""
        device._adopt(self)
        track(self)

    # -- handlers

    def add(self, method: int, handler: Handler) -> None:
        """Serve ``method`` with ``handler(request)``. Before start() /
        serve(), or from a handler. ValueError if the method has one."""
        method = _method(method)
        if not callable(handler):
            raise TypeError("handler: a callable expected, not %s" % type(handler).__name__)
        if method in self._handlers:
            raise ValueError("method: %d has a handler already" % method)
        running = self._thread is not None or self._progress_ident is not None
        if running and threading.get_ident() != self._progress_ident:
            raise RuntimeError("add: handlers are added before start() or from a handler")
        with self._guard:
            r = lib.rkpy_server_add(self._srv, method, self._handle)
        if r < 0:
            raise OSError(-r, "rk_rpc_server_add: method %d" % method)
        self._handlers[method] = handler

    def handler(self, method: int) -> Callable[[Handler], Handler]:
        """Decorator form of add(): ``@server.handler(1) def echo(req): ...``."""
        def deco(fn):
            self.add(method, fn)
            return fn
        return deco

    def _dispatch(self, req, method, p, n):
        r = Request(self, req, method, p, n)
        try:
            out = self._handlers[method](r)
            if r.deferred or r._req is None:
                if r.deferred and r._req is not None:
                    with self._lock:
                        if r._req is not None:
                            self._deferred.add(r)
                return
            # Answered on the progress thread: close() waits for it to stop.
            if out is None:
                out, n = ffi.NULL, 0
            elif type(out) is bytes:
                n = len(out)
            else:
                out, n = in_buffer(out, "the handler's answer")
            with self._lock:
                req, r._req = r._req, None
            if req is not None:
                lib.rkpy_reply(req, 0, out, n)
        except HandlerError as e:
            self._answer_error(r, e.code, e.data)
        except BaseException as e:  # noqa: B902 - a handler must never take the server down
            log.error("rdmakit: the handler of method %d raised %s: %s", method,
                      type(e).__name__, e, exc_info=True)
            self._answer_error(r, _exc_code(e), b"")

    def _answer_error(self, r, code, data):
        if r._req is None:
            return
        try:
            code = check_int(code, "code", -0x80000000, INT32_MAX)
            if code == 0:
                code = -errno.EIO
            p, n = in_buffer(data, "data")
        except (TypeError, ValueError):
            code, p, n = -errno.EIO, ffi.NULL, 0
        try:
            r._answer(code, p, n)
        except ValueError:
            pass  # answered meanwhile by another thread

    # -- the progress loop

    def progress(self, timeout: float = 0.0) -> bool:
        """One step: wait up to ``timeout`` seconds for work and do it
        (accept, run handlers, send answers). True if something was done.
        One thread at a time, not beside start()."""
        ms = seconds_to_ms(timeout, "timeout") if timeout else 0
        if self._thread is not None:
            raise RuntimeError("progress: the server runs on its own thread (start())")
        with self._guard:
            self._progress_ident = threading.get_ident()
            try:
                r = lib.rk_rpc_server_progress(self._srv, ms, self._err)
            finally:
                self._progress_ident = None
        if r == 0:
            return True
        if r in (-errno.ETIMEDOUT, -errno.EINTR):
            return False
        raise_error(r, self._err)

    def serve(self) -> None:
        """Run the progress loop in this thread until stop() (from another
        thread or a handler) or close()."""
        with self._guard:
            self._progress_ident = threading.get_ident()
            try:
                self._loop()
            finally:
                self._progress_ident = None

    def _loop(self):
        err = ffi.new("struct rk_error *")
        srv = self._srv
        progress = lib.rk_rpc_server_progress
        while not self._stop:
            r = progress(srv, 100, err)
            if r < 0 and r not in (-errno.ETIMEDOUT, -errno.EINTR):
                log.error("rdmakit: RpcServer progress failed: %s",
                          ffi.string(err.msg).decode("utf-8", "replace"))
                break

    def start(self) -> "RpcServer":
        """Run the progress loop on a thread of its own (a daemon thread,
        stopped by stop(), close() or interpreter exit). Returns self."""
        if self._thread is not None:
            raise RuntimeError("start: already started")
        self._guard.enter()
        self._stop = False
        t = threading.Thread(target=self._run, name="rdmakit-rpc-server", daemon=True)
        self._thread = t
        t.start()
        return self

    def _run(self):
        self._progress_ident = threading.get_ident()
        try:
            self._loop()
        finally:
            self._progress_ident = None
            self._guard.leave()

    def stop(self) -> None:
        """Stop the progress loop (serve() returns, start()'s thread ends)
        and wait for it, unless called from it."""
        self._stop = True
        if self._srv != ffi.NULL:
            lib.rk_rpc_server_wake(self._srv)
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
            self._thread = None

    def stats(self) -> Dict[str, int]:
        """The server's counters: conns_accepted, conns_refused,
        conns_closed, conns_dropped, conns_idle, calls, errors_sent,
        conns, rdv_bytes. Read while the loop runs they may be a little
        stale."""
        st = ffi.new("struct rk_rpc_server_stats *")
        with self._guard:
            lib.rk_rpc_server_get_stats(self._srv, st)
        return {k: getattr(st, k) for k in (
            "conns_accepted", "conns_refused", "conns_closed", "conns_dropped", "conns_idle",
            "calls", "errors_sent", "conns", "rdv_bytes")}

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._guard.closed

    def close(self) -> None:
        """Stop, close every connection and the listener. Deferred requests
        not answered yet are dropped (reply() then raises ClosedError).
        Idempotent; not from a handler."""
        if self._progress_ident == threading.get_ident():
            raise RuntimeError("close: not from a handler (use stop())")
        self.stop()
        if not self._guard.close():
            return
        with self._lock:
            for r in self._deferred:
                r._req = None
            self._deferred.clear()
            srv, self._srv = self._srv, ffi.NULL
            if srv != ffi.NULL:
                self._lib.rk_rpc_server_destroy(srv)

    def __repr__(self) -> str:
        return "<rdmakit.RpcServer port %s%s>" % (getattr(self, "port", "?"),
                                                  " closed" if self.closed else "")


# ---- client -----------------------------------------------------------------

class _Async:
    """An asynchronous call in flight: its future and what the library may
    still touch (the request and answer buffers), kept until it completes."""

    __slots__ = ("fut", "resp", "out", "keep", "handle", "timer", "loop", "c", "req")


@ffi.def_extern()
def rkpy_done(arg, status, resp_len, app_code, err):
    st = ffi.from_handle(arg)
    cl = st.keep
    cl._pending.discard(st)
    if st.timer is not None:
        st.timer.cancel()
    fut = st.fut
    if status == 0:
        res = resp_len if st.out is not None else bytes(ffi.buffer(st.resp, resp_len))
        exc = None
    else:
        res = None
        try:
            data = b""
            if status == -errno.EREMOTEIO:
                data = resp_len if st.out is not None else bytes(ffi.buffer(st.resp, resp_len))
            raise_error(status, err, code=app_code, data=data)
        except Exception as e:
            exc = e
    st.resp = st.keep = st.req = None
    try:
        if threading.get_ident() == cl._loop_ident:
            _settle(fut, res, exc)
        else:
            st.loop.call_soon_threadsafe(_settle, fut, res, exc)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass


def _settle(fut, res, exc):
    if fut.done():
        return
    if exc is None:
        fut.set_result(res)
    else:
        fut.set_exception(exc)


class RpcClient(Closable):
    """A connection to an RpcServer at ``host``:``port``.

    ``call()`` blocks until the answer or the deadline (the GIL is
    released); ``await acall()`` does the same on an asyncio loop, through
    the client's file descriptor (loop.add_reader; no thread), which needs
    ``mode="event"`` (or "adaptive"). "busy" (the default) spins while a
    call() waits: the shortest round trip, a core busy meanwhile.
    ``call_many()`` makes a list of calls with one foreign call per 64:
    Python's own cost per call paid once for the lot.

    Arguments: window (calls in flight; the server may grant fewer; 64),
    connect_timeout (seconds per connection step; 5), mode, token,
    spin_us (mode "adaptive": how long acall looks for the answer before
    it waits on the loop; 50).

    One thread (or one event loop) at a time: calls from other threads
    wait for the one under way. A context manager; closed on garbage
    collection and at interpreter exit; calls in flight then fail with
    PeerGoneError.
    """

    def __init__(self, device: Device, host: str, port: Union[int, str], *, window: int = 0,
                 connect_timeout: Optional[float] = None, mode: str = "busy",
                 token: Optional[bytes] = None, spin_us: int = 50, _leased=None) -> None:
        self._cl = ffi.NULL
        self._spin_us = 0
        self._closed = False
        # call()'s and acall()'s common case: the client and its lock (a
        # mutex) in one struct, the lock taken in C inside the one foreign
        # call; the answer in the struct's buffer when the calling thread
        # owns it, else in that thread's rkpy_answer (rdmakit_build.py).
        self._fast = fast = ffi.new("struct rkpy_fast *")
        lib.rkpy_fast_init(fast)
        # The answer of call()'s and acall()'s common case (rkpy_fcall,
        # rkpy_afcall) as a cffi buffer, sliced into the answer's bytes;
        # acall()'s outcome struct.
        self._answer = ffi.buffer(fast.answer)
        self._fans = fast.answer
        self._fc = ffi.addressof(fast, "acall")
        # One lock: held by every use of the handle (a blocking call too) and
        # by close(), so the handle never goes under a call.
        self._lock = _CLock(fast)
        self._pending = set()
        self._loop = None
        self._loop_ident = None
        self._fd = -1
        self._room = None
        self._lib = lib
        self._pool = None
        self._err = ffi.new("struct rk_error *")
        self._len = ffi.new("uint32_t *")
        self._code = ffi.new("int32_t *")
        if _leased is not None:  # a client of an RpcPool (RpcPool.lease)
            self._pool, self._cl, self._mode = _leased
            fast.cl = self._cl
            self._device = None
            self._pool._leases.add(self)
            track(self)
            return
        if not isinstance(device, Device):
            raise TypeError("device: an rdmakit.Device expected, not %s" % type(device).__name__)
        keep = []
        opts = ffi.new("struct rk_rpc_client_opts *")
        opts.host = _cstr(host, "host", keep)
        opts.port = _cstr(port, "port", keep)
        opts.window = check_int(window, "window", 0, lib.RK_RPC_MAX_WINDOW)
        opts.timeout_ms = seconds_to_ms(connect_timeout, "connect_timeout")
        if opts.timeout_ms < 0:
            raise ValueError("connect_timeout: must be finite")
        self._mode = mode
        opts.mode = wait_mode(mode)
        spin_us = check_int(spin_us, "spin_us", 0, 1000000)
        self._spin_us = spin_us if mode == "adaptive" else 0
        _token(token, opts, keep)
        out = ffi.new("struct rk_rpc_client **")
        r = lib.rk_rpc_client_connect(device._use(), opts, self._err, out)
        if r < 0:
            raise_error(r, self._err)
        self._cl = fast.cl = out[0]
        fast.spin_us = self._spin_us
        self._device = device
        device._adopt(self)
        track(self)

    # -- properties

    def _use(self):
        """The handle (the lock held), or ClosedError."""
        if self._closed:
            raise closed("RpcClient")
        return self._cl

    @property
    def window(self) -> int:
        """Calls that may be in flight at once (as the server granted)."""
        with self._lock:
            return lib.rk_rpc_client_window(self._use())

    @property
    def inflight(self) -> int:
        """Asynchronous calls started and not completed."""
        with self._lock:
            return lib.rk_rpc_client_inflight(self._use())

    @property
    def alive(self) -> bool:
        """False once the connection died (or the client was closed)."""
        with self._lock:
            return not self._closed and bool(lib.rk_rpc_client_alive(self._cl, ffi.NULL))

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._closed

    # -- calls

    @staticmethod
    def _prepare(method, data, timeout, out, max_size):
        """The call's arguments, checked: (method, request, its length,
        answer buffer, its capacity, timeout_ms)."""
        method = _method(method)
        req, n = (data, len(data)) if type(data) is bytes else in_buffer(data, "data")
        if n > U32_MAX:
            raise ValueError("data: %d bytes, at most %d" % (n, U32_MAX))
        ms = seconds_to_ms(timeout, "timeout")
        if out is not None:
            if max_size is not None:
                raise ValueError("max_size: not with out (the buffer's size is the limit)")
            resp, cap = out_buffer(out, "out")
        else:
            cap = DEFAULT_MAX_SIZE if max_size is None else check_int(max_size, "max_size",
                                                                      0, U32_MAX)
            resp = ffi.new("char[]", cap) if cap else ffi.NULL
        return method, req, n, resp, cap, ms

    def call(self, method: int, data: Buffer = b"", *, timeout: Optional[float] = None,
             out: Optional[Buffer] = None, max_size: Optional[int] = None) -> Union[bytes, int]:
        """Call ``method`` with ``data`` and wait for the answer.

        Returns the answer as bytes (at most ``max_size`` bytes accepted,
        DEFAULT_MAX_SIZE by default), or, given a writable buffer ``out``
        (bytearray, numpy array, mmap...), writes the answer into it and
        returns its length. ``timeout``: the deadline in seconds (None: 5;
        math.inf: none). Raises RemoteError (the handler's non-zero code),
        NoMethodError, MessageTooBigError, DeadlineError, PeerGoneError
        ("peer gone": the connection died) or another Error.
        """
        if (timeout is None and out is None and max_size is None and type(data) is bytes
                and type(method) is int):
            # The common small call: one foreign call of four arguments,
            # which takes the lock itself; nothing to allocate but the
            # answer's bytes, sliced from this thread's buffer.
            try:
                r = _fcall(self._fast, method, data, len(data))
            except OverflowError:  # a method or a length beyond C's ints
                self._prepare(method, data, timeout, out, max_size)
                raise
            if r >= 0:
                return self._answer[:r]
            return self._fast_failed(r, method)
        method, req, n, resp, cap, ms = self._prepare(method, data, timeout, out, max_size)
        with self._lock:
            if self._closed:
                raise closed("RpcClient")
            r = lib.rkpy_call(self._cl, method, req, n, resp, cap, ms, self._len, self._code,
                              self._err)
            if r == 0:
                return self._len[0] if out is not None else ffi.unpack(resp, self._len[0])
            return self._failed(r, method, out, resp)

    def call_many(self, method: int, payloads: Iterable[Buffer], *,
                  timeout: Optional[float] = None) -> List[bytes]:
        """Call ``method`` once for each request of ``payloads`` (bytes-like
        objects), one after another in order, and return the answers, a
        list of bytes.

        What call() does per call, the interpreter's path and the foreign
        call's crossing, is done once per up to 64 calls, so a call costs
        close to the same call made from C: for many small calls in a loop.
        Each answer may be up to DEFAULT_MAX_SIZE bytes; ``timeout`` is each
        call's deadline (None: 5 s). The calls run one at a time (no more
        than one in flight; acall() and gather() overlap them). A call that
        fails raises as call() does, and the calls after it are not made;
        the exception's ``answers`` holds the answers of those before it.
        A thread's first call_many() makes its answer buffer (64 answers'
        room, 256 KiB), kept for the thread's life.
        """
        method = _method(method)
        ms = seconds_to_ms(timeout, "timeout")
        reqs = payloads if isinstance(payloads, list) else list(payloads)
        try:
            m = _tls.many
        except AttributeError:  # this thread's first call_many: its buffers
            m = _many_buffers()
        out, ob, ends, lens, st = m
        fast = self._fast
        answers: List[bytes] = []
        for i in range(0, len(reqs), _MANY):
            chunk = reqs[i:i + _MANY]
            try:
                joined = b"".join(chunk)
            except TypeError:
                for p in chunk:
                    in_buffer(p, "payloads")  # names the culprit
                raise
            k = len(chunk)
            ln = [len(p) for p in chunk]
            if sum(ln) != len(joined):  # buffers of items wider than a byte
                ln = [memoryview(p).nbytes for p in chunk]
            lens[0:k] = ln
            r = _fcall_many(fast, method, joined, lens, k, out, ends, ms, st)
            if r == k:
                e = ffi.unpack(ends, k)
                answers += [ob[a:b] for a, b in zip([0] + e, e)]
                continue
            if r < 0:
                return self._fast_failed(r, method)
            e = ffi.unpack(ends, r + 1)
            answers += [ob[a:b] for a, b in zip([0] + e[:r], e[:r])]
            o = lib.rkpy_fast_out()
            back = ob[e[r - 1] if r else 0:e[r]] if st[0] == -errno.EREMOTEIO else b""
            try:
                raise_error(st[0], ffi.addressof(o, "err"), code=o.code, data=back)
            except Error as exc:
                exc.answers = answers
                raise
        return answers

    @staticmethod
    def _fast_failed(r, method):
        """The answer of a call() that answered into this thread's own buffer
        (@r RKPY_FAST_ELSEWHERE), or raise for the fast path's status @r (its
        outcome in this thread's rkpy_out)."""
        if r == _ELSEWHERE:
            return _thread_answer()[:lib.rkpy_fast_out().len]
        if r == _CLOSED:
            raise closed("RpcClient")
        if r == lib.RKPY_FAST_BAD_METHOD:
            _method(method)
        o = lib.rkpy_fast_out()
        back = ffi.unpack(lib.rkpy_answer, o.len) if r == -errno.EREMOTEIO else b""
        raise_error(r, ffi.addressof(o, "err"), code=o.code, data=back)

    def _failed(self, r, method, out, resp):
        """Raise for call status @r (the lock held)."""
        if r == lib.RKPY_BAD_METHOD:
            _method(method)
        n = self._len[0]
        back = b""
        if r == -errno.EREMOTEIO:
            back = n if out is not None else ffi.unpack(resp, n)
        raise_error(r, self._err, code=self._code[0], data=back)

    async def acall(self, method: int, data: Buffer = b"", *, timeout: Optional[float] = None,
                    out: Optional[Buffer] = None,
                    max_size: Optional[int] = None) -> Union[bytes, int]:
        """call() for asyncio: ``await client.acall(method, data)``.

        Many may be in flight at once (up to ``window``; more wait for
        room). The client must have been made with mode "event" or
        "adaptive" and is then tied to the running loop. In "adaptive" mode
        acall first looks for the answer for up to ``spin_us``
        microseconds (the loop waits meanwhile; the GIL is released) and
        only then waits on the loop: the round trip of a call the server
        answers at once is then close to call()'s. ``data`` and ``out``
        must not change until the call completes; a cancelled acall's call
        still runs to its end in the library (its buffers are kept until
        then).
        """
        if (timeout is None and out is None and max_size is None and type(data) is bytes
                and type(method) is int):
            # The common small call: one foreign call of four arguments, as
            # call()'s, which answers into the client's buffer when the
            # answer comes within the spin. It runs only in the thread of
            # the event loop the client is tied to (checked in C, which
            # costs nothing there: asking asyncio costs a Python call, and
            # asyncio.get_running_loop() a getpid() system call); whether
            # that loop still runs matters only to a call that has to wait
            # on it, and is asked then (_afast_wait).
            try:
                r = _afcall(self._fast, method, data, len(data))
            except OverflowError:  # a method or a length beyond C's ints
                self._prepare(method, data, timeout, out, max_size)
                raise
            if r >= 0:
                return self._answer[:r]
            return await self._afast_rest(r, method, data)
        return await self._acall_any(method, data, timeout, out, max_size, self._running_loop())

    def _running_loop(self):
        """The running loop, the client tied to it (ClosedError, RuntimeError,
        ValueError as acall raises them)."""
        loop = self._loop
        if loop is None or self._loop_ident != _get_ident() or not loop.is_running():
            # asyncio.get_running_loop() costs a getpid() system call (Python
            # 3.11): asked only when this thread's loop is not the client's.
            loop = self._attach(asyncio.get_running_loop())
        return loop

    async def _afast_rest(self, r, method, data):
        """acall()'s common case past its first try (@r): in flight, failed,
        not for this thread (the general path then), or the window full."""
        while True:
            if r >= 0:
                return self._answer[:r]
            if r == _INFLIGHT:  # the client's answer buffer is the call's until it completes
                return await self._afast_wait(data)
            if r == _FAILED:
                return self._outcome(self._fc, self._fans, None)
            if r == _NOT_HERE:
                return await self._acall_any(method, data, None, None, None,
                                             self._running_loop())
            if r == _CLOSED:
                raise closed("RpcClient")
            if r == _BAD_METHOD:
                _method(method)
            if r != _EAGAIN:
                raise_error(r, ffi.addressof(self._fc, "err"))
            loop = self._running_loop()
            with self._lock:
                self._poll_locked()  # the window is full: completions make room
            await self._wait_room(loop)
            r = _afcall(self._fast, method, data, len(data))

    def _afast_wait(self, data):
        """The future of acall()'s common case in flight, on the running loop.
        The call was made in the loop's thread; if that loop no longer runs
        (another one does), the client is tied to the running one, or, when
        it cannot be (RuntimeError: the old loop is not closed; no loop), the
        call is left to complete on its own before the error is raised."""
        loop = self._loop
        if not loop.is_running():
            try:
                loop = self._attach(asyncio.get_running_loop())
            except BaseException:
                try:  # the call's end then wakes nobody
                    self._await_call(self._loop, self._fc, self._fans, None, data, 0)
                except RuntimeError:  # that loop is closed
                    pass
                raise
        return self._await_call(loop, self._fc, self._fans, None, data, 0)

    async def _acall_any(self, method, data, timeout, out, max_size, loop):
        """acall() with a deadline, ``out``, ``max_size`` or a request that is
        not bytes."""
        method, req, n, resp, cap, ms = self._prepare(method, data, timeout, out, max_size)
        c = ffi.new("struct rkpy_call *")
        while True:
            # One foreign call, which takes the client's lock itself.
            r = _acall(self._fast, method, req, n, resp, cap, ms, c, self._spin_us, self._err)
            if r == 1:
                return self._outcome(c, resp, out)
            if r == 0:
                return await self._await_call(loop, c, resp, out, req, ms)
            if r == _CLOSED:
                raise closed("RpcClient")
            if r != _EAGAIN:
                raise_error(r, self._err)
            with self._lock:
                self._poll_locked()  # the window is full: completions make room
            await self._wait_room(loop)

    def _await_call(self, loop, c, resp, out, req, ms):
        """The future of call @c in flight (its buffers kept until it completes)."""
        st = _Async()
        st.fut = fut = loop.create_future()
        st.out, st.resp, st.c, st.req, st.loop = out, resp, c, req, loop
        st.keep = self
        st.handle = h = ffi.new_handle(st)
        self._pending.add(st)
        if lib.rkpy_acall_wait(self._fast, c, h):  # it completed meanwhile
            self._pending.discard(st)
            st.keep = None
            try:
                fut.set_result(self._outcome(c, resp, out))
            except Exception as exc:  # noqa: B902 - handed to the awaiting caller
                fut.set_exception(exc)
            return fut
        st.timer = None
        if ms >= 0:
            st.timer = loop.call_later((ms or 5000) / 1000.0 + 0.004, self._deadline, st)
        return fut

    @staticmethod
    def _outcome(c, resp, out):
        """A completed call's answer (or its error raised), from its struct @c."""
        if c.status == 0:
            return c.len if out is not None else ffi.unpack(resp, c.len)
        back = b""
        if c.status == -errno.EREMOTEIO:
            back = c.len if out is not None else ffi.unpack(resp, c.len)
        raise_error(c.status, ffi.addressof(c, "err"), code=c.code, data=back)

    # -- asyncio plumbing

    def _attach(self, loop):
        """Tie the client to @loop (its fd on the loop); returns @loop."""
        if self._loop is loop:
            return loop
        if self._loop is not None and not self._loop.is_closed():
            raise RuntimeError("acall: the client is tied to another event loop")
        with self._lock:
            fd = lib.rk_rpc_client_fd(self._use())
            if fd < 0:
                raise ValueError("acall: needs a client made with mode='event' or "
                                 "'adaptive' (this one is %r)" % self._mode)
            # Arms the completion queue: the fd fires for what comes next.
            lib.rk_rpc_client_progress(self._cl, 0, self._err)
            lib.rkpy_fast_attach(self._fast)  # acall()'s common case, in this thread
        self._loop = loop
        self._loop_ident = threading.get_ident()
        self._fd = fd
        loop.add_reader(fd, self._readable)
        return loop

    def _poll_locked(self):
        """Run completions (the lock held): progress until it finds nothing."""
        if self._closed:
            return
        for _ in range(1024):
            r = lib.rk_rpc_client_progress(self._cl, 0, self._err)
            if r <= 0:
                if r < 0:
                    self._detach()
                break
        room = self._room
        if room is not None:
            self._room = None
            if not room.done():
                room.set_result(None)

    def _readable(self):
        with self._lock:
            self._poll_locked()

    def _deadline(self, st):
        st.timer = None
        self._readable()
        if st.keep is not None and not self._closed:  # the coarse clock lags a tick
            st.timer = st.loop.call_later(0.004, self._deadline, st)

    async def _wait_room(self, loop):
        if self._room is None:
            self._room = loop.create_future()
        room = self._room
        # Sends still to be retired do not make the fd readable: look again soon.
        h = loop.call_later(0.002, self._readable)
        try:
            await room
        finally:
            h.cancel()

    def _detach(self):
        if self._loop is not None and self._fd >= 0:
            try:
                self._loop.remove_reader(self._fd)
            except Exception:
                pass
        self._fd = -1

    # -- the end

    def close(self) -> None:
        """Disconnect (a leased client goes back to its pool). Calls in
        flight fail with PeerGoneError. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._detach()
            cl, self._cl = self._cl, ffi.NULL
            self._fast.cl = ffi.NULL  # the fast paths see it closed (the lock held)
            if cl == ffi.NULL:
                return
            if self._pool is not None:
                self._pool._put(cl)
            else:
                self._lib.rk_rpc_client_destroy(cl)

    def __repr__(self) -> str:
        return "<rdmakit.RpcClient%s>" % (" closed" if self.closed else "")


# ---- pool -------------------------------------------------------------------

class RpcPool(Closable):
    """Connections to many servers, made on first use and reused: call
    ``pool.call("host:port", method, data)`` from any thread.

    Arguments (0 / None: the library's default): max_per_peer (clients per
    peer, 4; a call that finds them all busy waits for one), idle (close a
    client idle this many seconds; 30), window, mode ("busy"), connect_timeout
    (seconds per connection step; 5), token. A call whose connection died is
    not retried (the request may have run). Thread-safe; a context manager;
    closed on garbage collection and at interpreter exit (it waits for the
    calls under way).
    """

    def __init__(self, device: Device, *, max_per_peer: int = 0, idle: Optional[float] = None,
                 window: int = 0, mode: str = "busy", connect_timeout: Optional[float] = None,
                 token: Optional[bytes] = None, max_peers: int = 0) -> None:
        self._pool = ffi.NULL
        self._guard = Guard("RpcPool")
        self._lib = lib
        if not isinstance(device, Device):
            raise TypeError("device: an rdmakit.Device expected, not %s" % type(device).__name__)
        self._keep = []
        opts = ffi.new("struct rk_rpc_pool_opts *")
        opts.max_per_peer = check_int(max_per_peer, "max_per_peer", 0, 65535)
        opts.max_peers = check_int(max_peers, "max_peers", 0, 1 << 20)
        if idle is not None:
            ms = seconds_to_ms(idle, "idle")
            opts.idle_ms = INT32_MAX if ms < 0 else ms
        opts.client.window = check_int(window, "window", 0, lib.RK_RPC_MAX_WINDOW)
        self._mode = mode
        opts.client.mode = wait_mode(mode)
        t = seconds_to_ms(connect_timeout, "connect_timeout")
        if t < 0:
            raise ValueError("connect_timeout: must be finite")
        opts.client.timeout_ms = t
        _token(token, opts.client, self._keep)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_rpc_pool **")
        r = lib.rk_rpc_pool_create(device._use(), opts, err, out)
        if r < 0:
            raise_error(r, err)
        self._pool = out[0]
        self._device = device
        self._tls = threading.local()
        self._leases = weakref.WeakSet()
        device._adopt(self)
        track(self)

    def _peer(self, peer):
        if not isinstance(peer, str):
            raise TypeError("peer: 'host:port' expected, not %s" % type(peer).__name__)
        if ":" not in peer or "\0" in peer:
            raise ValueError("peer: 'host:port' or '[v6]:port' expected, not %r" % peer)
        return peer.encode()

    def call(self, peer: str, method: int, data: Buffer = b"", *,
             timeout: Optional[float] = None, out: Optional[Buffer] = None,
             max_size: Optional[int] = None) -> Union[bytes, int]:
        """Call ``method`` on ``peer`` ("host:port", "[v6]:port"): lease a
        client (connecting if needed), call, give it back; the deadline
        covers all of it. Returns and raises as RpcClient.call()."""
        tls = self._tls
        c = getattr(tls, "c", None)
        if c is None:
            c = tls.c = (ffi.new("uint32_t *"), ffi.new("int32_t *"),
                         ffi.new("struct rk_error *"))
        n, code, err = c
        p = self._peer(peer)
        method, req, rn, resp, cap, ms = RpcClient._prepare(method, data, timeout, out, max_size)
        with self._guard:
            r = lib.rkpy_pool_call(self._pool, p, method, req, rn, resp, cap, ms, n, code, err)
        if r == 0:
            return n[0] if out is not None else ffi.unpack(resp, n[0])
        back = b""
        if r == -errno.EREMOTEIO:
            back = n[0] if out is not None else ffi.unpack(resp, n[0])
        raise_error(r, err, code=code[0], data=back)

    def lease(self, peer: str, timeout: Optional[float] = None) -> RpcClient:
        """A client of the pool for ``peer``, this thread's until closed:
        ``with pool.lease("host:port") as c: c.call(...)``. Waits up to
        ``timeout`` seconds (None: 5) for a free one."""
        p = self._peer(peer)
        ms = seconds_to_ms(timeout, "timeout")
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_rpc_client **")
        self._guard.enter()
        r = lib.rk_rpc_pool_get(self._pool, p, ms, err, out)
        if r < 0:
            self._guard.leave()
            raise_error(r, err)
        return RpcClient(None, "", "", _leased=(self, out[0], self._mode))

    def _put(self, cl):
        lib.rk_rpc_pool_put(self._pool, cl)
        self._guard.leave()

    def reap(self) -> int:
        """Close the clients idle longer than ``idle`` now; how many."""
        with self._guard:
            return lib.rk_rpc_pool_reap(self._pool)

    def stats(self) -> Dict[str, int]:
        """The pool's counters: connects, connect_failures, reuses,
        idle_closed, dead_closed, waits; peers, clients, leased (now)."""
        st = ffi.new("struct rk_rpc_pool_stats *")
        with self._guard:
            lib.rk_rpc_pool_get_stats(self._pool, st)
        return {k: getattr(st, k) for k in (
            "connects", "connect_failures", "reuses", "idle_closed", "dead_closed", "waits",
            "peers", "clients", "leased")}

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._guard.closed

    def close(self) -> None:
        """Close every client, once the calls under way and the leased
        clients are done (close those first). Idempotent."""
        for c in list(self._leases):
            try:
                c.close()
            except Exception:
                pass
        if not self._guard.close():
            return
        pool, self._pool = self._pool, ffi.NULL
        if pool != ffi.NULL:
            self._lib.rk_rpc_pool_destroy(pool)

    def __repr__(self) -> str:
        return "<rdmakit.RpcPool%s>" % (" closed" if self.closed else "")
