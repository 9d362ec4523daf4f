"""rdmakit._util - what every module of the package shares: argument
checks, buffers, deadlines, errors from a struct rk_error, and the lifetime
of objects that own library handles."""
from __future__ import annotations

import atexit
import errno
import math
import os
import threading
import weakref

from ._rk import ffi, lib
from .errors import ClosedError, RemoteError, error_class

U32_MAX = 0xFFFFFFFF
INT32_MAX = 0x7FFFFFFF

_MODES = {
    "busy": lib.RK_WAIT_BUSY,
    "event": lib.RK_WAIT_EVENT,
    "adaptive": lib.RK_WAIT_ADAPTIVE,
}


def wait_mode(mode, name="mode"):
    """The enum rk_wait_mode for "busy", "event" or "adaptive"."""
    if not isinstance(mode, str):
        raise TypeError("%s: 'busy', 'event' or 'adaptive' expected, not %s"
                        % (name, type(mode).__name__))
    try:
        return _MODES[mode]
    except KeyError:
        raise ValueError("%s: 'busy', 'event' or 'adaptive' expected, not %r" % (name, mode)) from None


def check_int(v, name, lo, hi):
    """@v as an int in [lo, hi], or TypeError / ValueError naming @name."""
    if isinstance(v, bool):
        raise TypeError("%s: an integer expected, not bool" % name)
    if not isinstance(v, int):
        try:
            v = v.__index__()
        except AttributeError:
            raise TypeError("%s: an integer expected, not %s" % (name, type(v).__name__)) from None
    if v < lo or v > hi:
        raise ValueError("%s: %d is out of range [%d, %d]" % (name, v, lo, hi))
    return v


def seconds_to_ms(t, name, default_ms=0):
    """A timeout in seconds (None: @default_ms; math.inf: -1, no deadline)
    as milliseconds for the library: at least 1, at most INT32_MAX."""
    if t is None:
        return default_ms
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError("%s: seconds (int or float) or None expected, not %s"
                        % (name, type(t).__name__))
    if math.isnan(t) or t < 0:
        raise ValueError("%s: %r is not a duration" % (name, t))
    if math.isinf(t):
        return -1
    ms = int(math.ceil(t * 1000.0))
    if ms > INT32_MAX:
        raise ValueError("%s: %r s is too long (use math.inf for no deadline)" % (name, t))
    return max(ms, 1)


def in_buffer(obj, name):
    """A read-only view of @obj for the library: (cdata pointer, length).
    No copy: the pointer is @obj's memory (keep the cdata alive while the
    library may read it)."""
    if type(obj) is bytes:  # the common case, without a memoryview
        n = len(obj)
    else:
        n = _view_len(obj, name, False)
    if n > U32_MAX:
        raise ValueError("%s: %d bytes, at most %d" % (name, n, U32_MAX))
    if n == 0:
        return ffi.NULL, 0
    return ffi.from_buffer("char[]", obj), n


def out_buffer(obj, name, limit=U32_MAX):
    """A writable view of @obj: (cdata pointer, length); TypeError for a
    read-only buffer (bytes, a read-only memoryview or numpy array),
    ValueError for one longer than @limit bytes."""
    n = _view_len(obj, name, True)
    if n > limit:
        raise ValueError("%s: %d bytes, at most %d" % (name, n, limit))
    if n == 0:
        return ffi.NULL, 0
    return ffi.from_buffer("char[]", obj, require_writable=True), n


def _view_len(obj, name, writable):
    if isinstance(obj, str):
        raise TypeError("%s: a bytes-like object is required, not str (encode it)" % name)
    try:
        with memoryview(obj) as mv:
            if writable and mv.readonly:
                raise TypeError("%s: a writable buffer is required, %s is read-only"
                                % (name, type(obj).__name__))
            if not mv.c_contiguous:
                raise ValueError("%s: the buffer must be C-contiguous" % name)
            return mv.nbytes
    except TypeError as e:
        if str(e).startswith(name + ":"):
            raise
        raise TypeError("%s: a bytes-like object (buffer protocol) is required, not %s"
                        % (name, type(obj).__name__)) from None


def _s(p):
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


def raise_error(status, err, cls=None, **extra):
    """Raise the Error for negative @status described by *@err (a struct
    rk_error *); a library call that did not fill @err still gives an
    Error with its errno. @extra: RemoteError's code and data."""
    if err.err:
        e, msg = err.err, _s(err.msg) or _s(err.err_str)
    else:
        e = -status if status < 0 else errno.EIO
        msg = os.strerror(e)
    cls = cls or error_class(e)
    kw = dict(op=_s(err.op), wc_status=err.wc_status if err.wc_status >= 0 else None,
              wc_status_str=_s(err.wc_status_str), vendor_err=err.vendor_err,
              qp_num=err.qp_num, hint=_s(err.hint) or None, reject_reason=err.reject_reason)
    if issubclass(cls, RemoteError):
        kw.update(extra)
    raise cls(e, msg, **kw)


def closed(what):
    return ClosedError(errno.EBADF, "%s is closed" % what, op="")


class Closable:
    """Context manager and finaliser for an object with close(): ``with`` closes
    it, and so does garbage collection (errors there are swallowed: the
    interpreter may be shutting down)."""

    def close(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Guard:
    """Who may use a handle and when it may go.

    Calls enter() and leave() around every use of the handle; close()
    marks the object closed (later enter() raise ClosedError) and waits for
    the uses under way to leave, so a handle is never destroyed under a
    call on another thread."""

    __slots__ = ("_cond", "_users", "closed", "what")

    def __init__(self, what):
        self._cond = threading.Condition(threading.Lock())
        self._users = 0
        self.closed = False
        self.what = what

    def enter(self):
        with self._cond:
            if self.closed:
                raise closed(self.what)
            self._users += 1

    def leave(self):
        with self._cond:
            self._users -= 1
            if self._users == 0 and self.closed:
                self._cond.notify_all()

    def close(self):
        """Mark closed; wait for the uses under way. True the first time."""
        with self._cond:
            if self.closed:
                return False
            self.closed = True
            while self._users:
                self._cond.wait()
            return True

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *a):
        self.leave()


# Every object that owns a handle, newest last: closed at interpreter exit
# (before Python's finalization, while threads may still run), newest first,
# so a client goes before its device and a server's thread is stopped.
_live = weakref.WeakValueDictionary()
_seq = [0]
_seq_lock = threading.Lock()


def track(obj):
    with _seq_lock:
        _seq[0] += 1
        _live[_seq[0]] = obj


@atexit.register
def _close_all():
    for k in sorted(list(_live.keys()), reverse=True):
        o = _live.get(k)
        if o is not None:
            try:
                o.close()
            except Exception:
                pass
