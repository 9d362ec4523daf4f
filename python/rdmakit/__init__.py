"""rdmakit - RDMA from Python, over librdmakit.

    import rdmakit

    with rdmakit.Device("rxe0") as dev:
        srv = rdmakit.RpcServer(dev, 7700)
        srv.add(1, lambda req: req.data)          # an echo
        srv.start()
        with rdmakit.RpcClient(dev, "10.0.0.1", 7700) as c:
            assert c.call(1, b"hello") == b"hello"

What is here: Device (an RDMA device and port), RpcServer (handlers are
Python callables; a handler may answer later, from any thread), Request,
RpcClient (call(), and ``await acall()`` on asyncio), RpcPool (connections
to many servers, any thread); the one-sided layer (rdmakit.xfer): Xfer,
Segment (memory of this node, registered in place), Peer (lanes to another
node), Remote (an imported descriptor), Read / Write ops in a Batch,
notifications; and the exceptions of rdmakit.errors, all OSError
subclasses carrying the library's error fields.

Requests and answers are anything with the buffer protocol (bytes,
bytearray, memoryview, numpy arrays, mmap), passed without a copy. Importing
rdmakit imports neither numpy nor torch.
"""
from ._rk import ffi as _ffi
from ._rk import lib as _lib
from .device import Device
from .errors import (ClosedError, DeadlineError, Error, HandlerError, MessageTooBigError,
                     NoMethodError, PeerGoneError, RefusedError, RemoteAccessError, RemoteError)
from .rpc import DEFAULT_MAX_SIZE, Request, RpcClient, RpcPool, RpcServer
from .xfer import (READ, WRITE, Access, Batch, Listener, Op, OpStatus, Peer, Read, Remote, Segment,
                   Write, Xfer)

__all__ = [
    "Device", "RpcServer", "Request", "RpcClient", "RpcPool", "DEFAULT_MAX_SIZE",
    "Error", "PeerGoneError", "DeadlineError", "RemoteError", "NoMethodError",
    "MessageTooBigError", "RefusedError", "ClosedError", "HandlerError", "RemoteAccessError",
    "Xfer", "Listener", "Peer", "Segment", "Remote", "Batch", "Op", "Read", "Write", "OpStatus",
    "Access", "READ", "WRITE",
    "library_version", "__version__",
]

__version__ = "0.1.0"
"""The version of this package."""


def library_version() -> str:
    """The version of the librdmakit the package runs on ("0.1.0")."""
    return _ffi.string(_lib.rk_version()).decode()
