"""rdmakit.xfer's Peer: the node at the other end of 1..16 lanes; imports
its descriptors, posts batches to it, takes its notifications (blocking and
on asyncio). Import it from rdmakit.xfer."""
from __future__ import annotations

import asyncio
import collections
import errno
import threading
import time
import weakref
from typing import TYPE_CHECKING, Iterable, Optional, Union

from ._rk import ffi, lib
from ._util import U32_MAX, Closable, check_int, closed, in_buffer, raise_error, seconds_to_ms, track
from .errors import DeadlineError, PeerGoneError
from .xfer_base import (_deadline, _error, _expire, _free_batch, _left_ms, _raise, _resolve)
from .xfer_batch import Batch, Op
from .xfer_segment import Buffer, Remote

if TYPE_CHECKING:
    from .xfer import Xfer

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

    def __init__(self, xfer: Xfer, cq, conns, mode: str, name: str, token: bytes = b"") -> None:
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
        self._floop = None       # the loop its futures belong to (kept after _detach)
        self._loop_ident = None  # the thread it runs on
        self._fd = -1
        self._waiting = set()                 # batches awaited on the loop: (batch, future)
        self._notif_futs = collections.deque()  # notif_wait_async's futures, oldest first
        self.name: str = name
        """The other end, "host:port"."""
        self.token: bytes = token
        """The peer token its lanes' hellos carried (Xfer.connect's
        ``token``): 16 bytes; b"" for a lane of another protocol."""
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
            self._loop, self._fd, self._floop = loop, fd, loop
            self._loop_ident = threading.get_ident()
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

    def _detach(self, wait=True):
        """Take the wait set's fd off its loop. An event loop is not
        thread-safe: from another thread than the loop's (a running loop)
        the removal goes to the loop by call_soon_threadsafe and is waited
        for, up to 1 s (@wait), so that the fd is not closed under a loop
        still watching it. Not to be waited for under the Xfer's lock: the
        loop's _readable takes it."""
        loop, fd = self._loop, self._fd
        self._loop, self._fd = None, -1
        if loop is None or fd < 0 or loop.is_closed():
            return
        if threading.get_ident() == self._loop_ident or not loop.is_running():
            try:
                loop.remove_reader(fd)
            except Exception:
                pass
            return
        done = threading.Event()

        def off():
            try:
                loop.remove_reader(fd)
            finally:
                done.set()
        try:
            loop.call_soon_threadsafe(off)
        except RuntimeError:  # closed meanwhile
            return
        if wait:
            done.wait(1.0)

    def _cancel_using(self, seg):
        """Cancel the batches still running that use @seg (the lock held)."""
        for b in list(self._batches):
            if b._b != ffi.NULL and b._result is None and b._keep and any(
                    o.local is seg for o in b._keep):
                b._free_locked()
        x = self._xfer
        orphans, x._orphans = x._orphans, []  # as Xfer._reap: finalisers append to the new one
        keep, done = [], []
        for o in orphans:
            (done if o[1] is self and any(op.local is seg for op in o[2]) else keep).append(o)
        x._orphans.extend(keep)
        for h, p, _ in done:
            _free_batch(h, p)

    def close(self) -> None:
        """Cancel the batches still running, forget the imported
        descriptors, revoke what was exported to the peer, disconnect.
        Idempotent."""
        if self._closed:
            return
        x = self._xfer
        loop = self._floop
        on_loop = loop is None or loop.is_closed() or not loop.is_running() or (
            threading.get_ident() == self._loop_ident)
        self._detach()  # outside the lock: see there
        with x._lock:
            if self._closed:
                return
            self._detach(wait=False)  # attached meanwhile
            for b in list(self._batches):
                b._free_locked()
            x._reap(self)
            for r in list(self._remotes):
                r._free_locked()
            self._closed = True
            if self._holds == 0:
                self._end()
            e = closed("Peer")
            futs = [f for _, f in self._waiting] + list(self._notif_futs)
            self._waiting.clear()
        # The awaited futures fail on their loop's thread (a future is not thread-safe).
        for fut in futs:
            if on_loop:
                _expire(fut, e)
            else:
                try:
                    loop.call_soon_threadsafe(_expire, fut, e)
                except RuntimeError:  # the loop is closed: nobody awaits them
                    pass

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

