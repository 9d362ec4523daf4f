"""rdmakit.xfer's memory: Segment (this node's, registered in place) and
Remote (a descriptor imported from the peer's node). Import them from
rdmakit.xfer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._rk import ffi, lib
from ._util import Closable, closed, out_buffer, raise_error, track
from .xfer_base import _LEN_MAX, READ, WRITE, Access, _access, _finite_ms

if TYPE_CHECKING:
    from .xfer import Xfer
    from .xfer_peer import Peer

Buffer = Any  # anything with the buffer protocol


class Segment(Closable):
    """Memory of this node that batches use and peers may be given.

    ``buf`` is any writable, C-contiguous object with the buffer protocol
    (bytearray, memoryview, mmap, numpy array, ...): registered in place,
    never copied. The segment holds a view of it, so while registered it
    cannot be freed, resized or (mmap) closed; close() lets it go. One
    exception the buffer protocol cannot stop: numpy's
    ``ndarray.resize(..., refcheck=False)`` moves the array's memory
    whatever holds a view of it, and the NIC then reaches freed memory;
    never resize a registered array that way.

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
        from .xfer import Xfer  # which imports this module
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
        from .xfer_peer import Peer  # which imports this module
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
        from .xfer_peer import Peer
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
        from .xfer_peer import Peer
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
        self.mode: str = "mw" if lib.rk_xfer_remote_mode(handle) == lib.RK_XFER_MW else "mr"
        """How the owner protects it: "mw" (windows bound to this peer's
        lanes) or "mr" (a registration every QP of the owner's PD honours)."""
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

