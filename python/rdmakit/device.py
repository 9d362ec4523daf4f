"""rdmakit.device - an RDMA device and port (librdmakit's rk_device)."""
from __future__ import annotations

import ipaddress
import threading
import weakref
from typing import Optional

from ._rk import ffi, lib
from ._util import Closable, Guard, check_int, raise_error, track

__all__ = ["Device"]


class Device(Closable):
    """An open RDMA device, one of its ports and its protection domain.

    ``Device(name)`` opens the device by name ("rxe0", "mlx5_0");
    ``Device(addr="10.0.0.1")`` the one whose network interface owns that
    address; ``Device(peer="host")`` the one the kernel would use to reach
    that host; ``Device()`` the only device there is. The port must be
    ACTIVE. Costs a few system calls: open one per device and share it.

    Everything made on a device (servers, clients, pools) keeps it open;
    ``close()`` closes them first. A context manager; closed on garbage
    collection and at interpreter exit. Thread-safe.
    """

    def __init__(self, name: Optional[str] = None, *, addr: Optional[str] = None,
                 peer: Optional[str] = None, port: int = 1, gid_index: int = -1) -> None:
        self._dev = ffi.NULL
        self._guard = Guard("Device")
        self._children = weakref.WeakSet()
        self._holds = 0  # objects whose handles need the device's: it goes after them
        self._hold_lock = threading.Lock()
        self._lib = lib
        opts = ffi.new("struct rk_device_opts *")
        keep = []
        for field, v in (("name", name), ("addr", addr), ("peer", peer)):
            if v is None:
                continue
            if not isinstance(v, str):
                raise TypeError("%s: a string expected, not %s" % (field, type(v).__name__))
            if not v or "\0" in v:
                raise ValueError("%s: %r is not a valid %s" % (field, v, field))
            c = ffi.new("char[]", v.encode())
            keep.append(c)
            setattr(opts, field, c)
        opts.port = check_int(port, "port", 1, 255)
        opts.gid_index = check_int(gid_index, "gid_index", -1, 65535)
        err = ffi.new("struct rk_error *")
        out = ffi.new("struct rk_device **")
        r = lib.rk_device_open(opts, err, out)
        if r < 0:
            raise_error(r, err)
        self._dev = out[0]
        info = lib.rk_device_get_info(self._dev)
        self.name: str = ffi.string(info.name).decode()
        """The device's name ("rxe0")."""
        self.port: int = info.port
        """The port number."""
        self.gid_index: int = info.gid_index
        """The GID index connections use."""
        self.mtu: int = info.active_mtu_bytes
        """The port's active MTU in bytes."""
        self.max_mr_size: int = info.max_mr_size
        """The largest memory registration the device allows."""
        self.roce: bool = info.link_layer == 2  # IBV_LINK_LAYER_ETHERNET
        """True on RoCE (Ethernet), False on InfiniBand."""
        raw = ffi.new("unsigned char[16]")
        lib.rkpy_device_gid(self._dev, raw)
        self.gid: bytes = bytes(ffi.buffer(raw, 16))
        """The GID's 16 bytes."""
        track(self)

    @property
    def gid_str(self) -> str:
        """The GID as an IPv6 address ("::ffff:10.0.0.1" for RoCE v2 IPv4)."""
        return str(ipaddress.IPv6Address(self.gid))

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._guard.closed

    def _adopt(self, child, hold: bool = False) -> None:
        """Record an object made on the device (closed before it). With
        @hold, the device's handle also outlives the child's, which says so
        by _release() once its handle is gone: garbage collection may
        finalise the device first."""
        self._children.add(child)
        if hold:
            with self._hold_lock:
                self._holds += 1

    def _release(self) -> None:
        """A held child's handle is gone (see _adopt)."""
        with self._hold_lock:
            self._holds -= 1
            if self._holds or not self._guard.closed:
                return
        self._end()

    def _end(self):
        with self._hold_lock:  # once, whoever comes last: close() or _release()
            dev, self._dev = self._dev, ffi.NULL
        if dev != ffi.NULL:
            self._lib.rk_device_close(dev)

    def _use(self):
        """The handle, for making an object on it (ClosedError once closed)."""
        if self._guard.closed:
            from ._util import closed
            raise closed("Device")
        return self._dev

    def close(self) -> None:
        """Close what was made on the device, then the device. Idempotent."""
        for c in list(self._children):
            try:
                c.close()
            except Exception:
                pass
        if self._guard.close():
            with self._hold_lock:
                if self._holds:
                    return  # the last held child's _release() closes it
            self._end()

    def __repr__(self) -> str:
        return "<rdmakit.Device %s port %d%s>" % (self.name if hasattr(self, "name") else "?",
                                                  getattr(self, "port", 0),
                                                  " closed" if self.closed else "")
