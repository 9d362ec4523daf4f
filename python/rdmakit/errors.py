"""rdmakit.errors - the exceptions rdmakit raises.

Every failure of the library is an :class:`Error`, a subclass of
:class:`OSError` whose ``errno`` is the library's (positive) errno and whose
other attributes are the fields of the library's ``struct rk_error``: the
operation that failed, the work-completion status and vendor error of a
failed completion, the QP number and a one-line hint. Some failures have a
class of their own, which also derives from the matching built-in class
(``PeerGoneError`` is a ``ConnectionResetError``, ``DeadlineError`` a
``TimeoutError``), so code that knows nothing of rdmakit catches them too.

Bad arguments are not library failures: they raise ``TypeError`` or
``ValueError`` naming the argument, before anything reaches the library.
"""
from __future__ import annotations

import errno as _errno
from typing import Optional

__all__ = [
    "Error", "PeerGoneError", "DeadlineError", "RemoteError", "NoMethodError",
    "MessageTooBigError", "RefusedError", "ClosedError", "HandlerError", "RemoteAccessError",
]


class Error(OSError):
    """A failure of librdmakit, with the fields of its ``struct rk_error``.

    Attributes (besides ``errno`` and ``strerror``, which is the whole
    one-line story):
      op             what failed ("rk_rpc_call", "ibv_reg_mr", ...), or "".
      wc_status      the failed work completion's ``ibv_wc_status``, or None.
      wc_status_str  its name ("transport retry counter exceeded"), or "".
      vendor_err     the completion's vendor error, 0 when none.
      qp_num         the QP involved, 0 when none.
      hint           a one-line fix for the common causes, or None.
      reject_reason  a refused connect's ``enum rk_reject_reason``, 0 when none.
    """

    def __init__(self, errno: int, message: str, *, op: str = "",
                 wc_status: Optional[int] = None, wc_status_str: str = "",
                 vendor_err: int = 0, qp_num: int = 0, hint: Optional[str] = None,
                 reject_reason: int = 0) -> None:
        super().__init__(errno, message)
        self.op = op
        self.wc_status = wc_status
        self.wc_status_str = wc_status_str
        self.vendor_err = vendor_err
        self.qp_num = qp_num
        self.hint = hint
        self.reject_reason = reject_reason

    def __str__(self) -> str:
        s = self.strerror or ""
        if self.hint and self.hint not in s:
            s += " (hint: %s)" % self.hint
        return s

    def __reduce__(self):
        return (_rebuild, (type(self), self.errno, self.strerror, dict(self.__dict__)))


def _rebuild(cls, errno, message, state):
    e = cls.__new__(cls, errno, message)
    Error.__init__(e, errno, message)
    e.__dict__.update(state)
    return e


class PeerGoneError(Error, ConnectionResetError):
    """The connection died ("peer gone"): the peer crashed, closed or became
    unreachable. Every call in flight on it fails at once with this error;
    ``errno`` is ECONNRESET, or ENOTCONN for a call on a client already dead."""


class DeadlineError(Error, TimeoutError):
    """The call's deadline passed without an answer (ETIMEDOUT). A late
    answer is dropped by the library."""


class RemoteError(Error):
    """The handler answered with a non-zero code (EREMOTEIO).

    ``code`` is the handler's code; ``data`` the bytes it answered with (an
    RpcClient.call given ``out`` leaves them there and sets ``data`` to the
    length)."""

    def __init__(self, errno: int, message: str, *, code: int = 0, data=b"", **kw) -> None:
        super().__init__(errno, message, **kw)
        self.code = code
        self.data = data


class NoMethodError(Error):
    """The server has no handler for the method (EOPNOTSUPP)."""


class MessageTooBigError(Error):
    """A request or answer larger than the server's max_msg, or an answer
    larger than the caller's buffer (EMSGSIZE)."""


class RefusedError(Error, ConnectionRefusedError):
    """The server refused the connection (ECONNREFUSED): busy, a wrong
    token, not an RPC server; ``reject_reason`` says which."""


class RemoteAccessError(Error, PermissionError):
    """A one-sided READ or WRITE the owner's NIC refused (a remote access
    error, EREMOTEIO): the descriptor was revoked, or the op reached outside
    what was exported. The memory was not touched; the lane that carried the
    op is in the error state, so the peer's other batches fail too."""


class ClosedError(Error):
    """The object was closed (EBADF); nothing reached the library."""


class HandlerError(Exception):
    """Raise it in an RpcServer handler to answer the call with ``code``
    (non-zero) and ``data``: the caller gets a RemoteError with both. Not
    logged, unlike any other exception a handler raises."""

    def __init__(self, code: int, data=b"") -> None:
        super().__init__(code, data)
        self.code = code
        self.data = data


_BY_ERRNO = {
    _errno.ECONNRESET: PeerGoneError,
    _errno.ENOTCONN: PeerGoneError,
    _errno.ETIMEDOUT: DeadlineError,
    _errno.EREMOTEIO: RemoteError,
    _errno.EOPNOTSUPP: NoMethodError,
    _errno.EMSGSIZE: MessageTooBigError,
    _errno.ECONNREFUSED: RefusedError,
}


def error_class(errno: int) -> type:
    """The Error subclass rdmakit raises for (positive) ``errno``."""
    return _BY_ERRNO.get(errno, Error)
