"""rdmakit.xfer's common parts: access flags, op outcomes, deadlines, the
Xfer's lock, the lanes' queues. Import the public names from rdmakit.xfer."""
from __future__ import annotations

import enum
import errno
import math
import threading
import time
from typing import NamedTuple

from ._rk import ffi, lib
from ._util import check_int, raise_error, seconds_to_ms
from .errors import Error, RemoteAccessError

LANES_APP_ID = 0x524B584C
"""The rdma_cm hello's application id of this package's lanes ("RKXL").
Its app_arg is the lane's index (bits 0-7) and the peer's lane count (bits
8-15); its token, 16 random bytes, names the peer the lane belongs to."""

_TOKEN_LEN = 16
_SLICE_MS = 50          # a blocking wait lets other threads in this often
_SQ, _SIGNAL = 128, 16  # each lane's send queue; a completion per chain of 16 (xfer.h)
_U64 = (1 << 64) - 1
_LEN_MAX = 1 << 62      # a segment's length, at most


class Access(enum.IntFlag):
    """What an exported segment lets the peer do (combine with ``|``)."""

    NONE = 0
    READ = 1   # the peer may RDMA READ it
    WRITE = 2  # the peer may RDMA WRITE it


READ = Access.READ
"""The peer may RDMA READ the segment."""
WRITE = Access.WRITE
"""The peer may RDMA WRITE the segment."""


class OpStatus(NamedTuple):
    """One op's outcome once its batch ended: ``errno`` 0 (done) or the
    positive errno (EREMOTEIO refused by the owner, ECONNRESET peer gone,
    ECANCELED flushed behind another op's failure, ETIMEDOUT, EIO), and the
    completion's ``ibv_wc_status`` (0 when none came)."""

    errno: int
    wc_status: int


def _access(v, name, zero_ok):
    a = check_int(v, name, 0, 3)
    if not a and not zero_ok:
        raise ValueError("%s: READ, WRITE or both expected, not nothing" % name)
    return Access(a)


def _raise(r, err):
    raise_error(r, err, RemoteAccessError if r == -errno.EREMOTEIO else None)


def _error(r, err):
    try:
        _raise(r, err)
    except Error as e:
        return e


def _finite_ms(t, name, default_ms):
    ms = seconds_to_ms(t, name, default_ms)
    if ms < 0:
        raise ValueError("%s: must be finite" % name)
    return ms


def _deadline(t, name, default_s):
    """A monotonic deadline @t seconds from now (None: @default_s; inf: none)."""
    ms = seconds_to_ms(t, name, int(default_s * 1000))
    return None if ms < 0 else time.monotonic() + ms / 1000.0


def _left_ms(deadline):
    if deadline is None:
        return _SLICE_MS
    return max(0, min(_SLICE_MS, int(math.ceil((deadline - time.monotonic()) * 1000))))


class _Lock:
    """An Xfer's lock (reentrant), counting the threads that wait for it so
    that a blocking wait lets them in between its slices: a thread that
    releases a lock and takes it again at once would otherwise keep it."""

    __slots__ = ("_l", "_c", "want")

    def __init__(self):
        self._l = threading.RLock()
        self._c = threading.Lock()
        self.want = 0

    def __enter__(self):
        if not self._l.acquire(False):
            with self._c:
                self.want += 1
            self._l.acquire()
            with self._c:
                self.want -= 1
        return self

    def __exit__(self, *exc):
        self._l.release()

    def let_in(self):
        """Outside the lock: if a thread waits for it, give it the chance."""
        if self.want:
            time.sleep(0.001)


# ---- the lanes' queues -----------------------------------------------------

def _make_cq(dev, nlanes, rq, wm):
    o = ffi.new("struct rk_cq_opts *")
    o.depth = nlanes * (_SQ + rq)
    o.mode = wm
    err = ffi.new("struct rk_error *")
    out = ffi.new("struct rk_cq **")
    r = lib.rk_cq_create(dev, o, err, out)
    if r < 0:
        raise_error(r, err)
    return out[0]


def _conn_opts(o, cq, rq):
    o.sq_depth = _SQ
    o.rq_depth = rq
    o.signal_every = _SIGNAL
    o.cq = cq

# ---- batches and futures ---------------------------------------------------

def _free_batch(h, peer):
    """Free a batch handle (the lock held); its peer may go after it."""
    lib.rk_xfer_batch_free(h)
    peer._release()


def _resolve(fut, v):
    if not fut.done():
        fut.set_result(v)


def _expire(fut, e):
    if not fut.done():
        fut.set_exception(e)

