"""rdmakit.xfer's ops and batches: Op, Read, Write, Batch. Import them from
rdmakit.xfer."""
from __future__ import annotations

import asyncio
import errno
import time
from typing import TYPE_CHECKING, List, Optional

from ._rk import ffi, lib
from ._util import check_int, closed, seconds_to_ms
from .errors import DeadlineError, Error
from .xfer_base import (_SLICE_MS, _U64, Access, OpStatus, _deadline, _error, _expire,
                        _free_batch, _left_ms)
from .xfer_segment import Remote, Segment

if TYPE_CHECKING:
    from .xfer_peer import Peer

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
