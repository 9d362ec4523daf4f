"""test_host.py - the Python package on the host, no RDMA device needed:
import, public names and their docstrings, the exceptions, argument checks
and buffer handling (zero copy, read-only, non-contiguous, wrong types)."""
import array
import errno
import inspect
import math
import mmap
import pickle
import subprocess
import sys

import pytest

import rdmakit
from rdmakit import _util
from rdmakit._rk import ffi


def test_import_needs_neither_numpy_nor_torch():
    code = ("import sys, rdmakit; bad = [m for m in ('numpy', 'torch') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_versions():
    assert rdmakit.library_version() == rdmakit.__version__


def test_every_public_name_has_a_docstring():
    missing = []
    for name in rdmakit.__all__:
        obj = getattr(rdmakit, name)
        if name == "__version__" or isinstance(obj, (int, str)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for m, v in vars(obj).items():
                if m.startswith("_") or not (callable(v) or isinstance(v, property)):
                    continue
                if not (v.__doc__ or "").strip():
                    missing.append("%s.%s" % (name, m))
    assert not missing


def test_errors_are_oserrors_with_the_library_fields():
    assert issubclass(rdmakit.Error, OSError)
    assert issubclass(rdmakit.PeerGoneError, ConnectionResetError)
    assert issubclass(rdmakit.DeadlineError, TimeoutError)
    assert issubclass(rdmakit.RefusedError, ConnectionRefusedError)
    e = rdmakit.PeerGoneError(errno.ECONNRESET, "rk_rpc_call: peer gone", op="rk_rpc_call",
                              wc_status=12, wc_status_str="transport retry counter exceeded",
                              vendor_err=0x81, qp_num=17, hint="check the peer")
    assert e.errno == errno.ECONNRESET and e.op == "rk_rpc_call" and e.wc_status == 12
    assert e.vendor_err == 0x81 and e.qp_num == 17
    assert "peer gone" in str(e) and "check the peer" in str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is rdmakit.PeerGoneError and e2.errno == e.errno and e2.qp_num == 17
    r = rdmakit.RemoteError(errno.EREMOTEIO, "code 42", code=42, data=b"nope")
    assert r.code == 42 and r.data == b"nope"
    from rdmakit.errors import error_class
    assert error_class(errno.ETIMEDOUT) is rdmakit.DeadlineError
    assert error_class(errno.EOPNOTSUPP) is rdmakit.NoMethodError
    assert error_class(errno.EMSGSIZE) is rdmakit.MessageTooBigError
    assert error_class(errno.EINVAL) is rdmakit.Error


def test_raise_error_fills_the_fields_from_rk_error():
    err = ffi.new("struct rk_error *")
    err.err = errno.ECONNRESET
    err.op = b"rk_rpc_call"
    err.msg = b"rk_rpc_call: peer gone: connection closed"
    err.wc_status = -1
    with pytest.raises(rdmakit.PeerGoneError) as ei:
        _util.raise_error(-errno.ECONNRESET, err)
    assert ei.value.op == "rk_rpc_call" and ei.value.wc_status is None
    assert str(ei.value) == "rk_rpc_call: peer gone: connection closed"
    blank = ffi.new("struct rk_error *")  # a call that filled nothing
    with pytest.raises(rdmakit.Error) as ei:
        _util.raise_error(-errno.ENOMEM, blank)
    assert ei.value.errno == errno.ENOMEM


def test_no_such_device():
    with pytest.raises(rdmakit.Error) as ei:
        rdmakit.Device("no-such-device0")
    assert ei.value.errno == errno.ENODEV and ei.value.op


@pytest.mark.parametrize("kw,exc,word", [
    (dict(name=5), TypeError, "name"),
    (dict(name="x\0y"), ValueError, "name"),
    (dict(name="x", port=0), ValueError, "port"),
    (dict(name="x", port="1"), TypeError, "port"),
    (dict(name="x", gid_index=1 << 20), ValueError, "gid_index"),
])
def test_device_arguments(kw, exc, word):
    with pytest.raises(exc, match=word):
        rdmakit.Device(**kw)


def test_objects_need_a_device():
    with pytest.raises(TypeError, match="device"):
        rdmakit.RpcServer(None)
    with pytest.raises(TypeError, match="device"):
        rdmakit.RpcClient("rxe0", "127.0.0.1", 1)
    with pytest.raises(TypeError, match="device"):
        rdmakit.RpcPool(object())


def test_ints_and_timeouts():
    assert _util.check_int(7, "x", 0, 10) == 7
    with pytest.raises(TypeError, match="method"):
        _util.check_int("1", "method", 0, 10)
    with pytest.raises(TypeError, match="method"):
        _util.check_int(True, "method", 0, 10)
    with pytest.raises(ValueError, match="method"):
        _util.check_int(-1, "method", 0, 10)
    with pytest.raises(ValueError, match="max_size"):
        _util.check_int(1 << 40, "max_size", 0, _util.U32_MAX)
    assert _util.seconds_to_ms(None, "timeout") == 0
    assert _util.seconds_to_ms(0.0001, "timeout") == 1
    assert _util.seconds_to_ms(2.5, "timeout") == 2500
    assert _util.seconds_to_ms(math.inf, "timeout") == -1
    for bad, exc in ((-1, ValueError), (math.nan, ValueError), ("1", TypeError),
                     (1e12, ValueError)):
        with pytest.raises(exc, match="timeout"):
            _util.seconds_to_ms(bad, "timeout")
    assert _util.wait_mode("event") == _util.lib.RK_WAIT_EVENT
    with pytest.raises(ValueError, match="mode"):
        _util.wait_mode("spin")


def _addr(p):
    return int(ffi.cast("uintptr_t", p))


def test_buffers_without_a_copy():
    b = bytearray(b"abcdef")
    p, n = _util.out_buffer(b, "out")
    assert n == 6
    p[0] = b"Z"
    assert b[0:1] == b"Z"  # the pointer is the bytearray's own memory
    a = array.array("d", [1.0, 2.0])
    p, n = _util.in_buffer(a, "data")
    assert n == 16 and _addr(p) == a.buffer_info()[0]
    m = mmap.mmap(-1, 4096)
    p, n = _util.out_buffer(m, "out")
    assert n == 4096
    p[5] = b"Q"
    assert m[5:6] == b"Q"
    p, n = _util.in_buffer(memoryview(b)[2:4], "data")
    assert n == 2 and ffi.buffer(p, n)[:] == b"cd"
    assert _util.in_buffer(b"", "data") == (ffi.NULL, 0)
    m.close()


def test_bad_buffers_name_the_argument():
    with pytest.raises(TypeError, match="data.*str"):
        _util.in_buffer("text", "data")
    with pytest.raises(TypeError, match="data"):
        _util.in_buffer(12, "data")
    with pytest.raises(TypeError, match="out.*read-only"):
        _util.out_buffer(b"abc", "out")
    with pytest.raises(TypeError, match="out.*read-only"):
        _util.out_buffer(memoryview(bytearray(4)).toreadonly(), "out")
    with pytest.raises(ValueError, match="contiguous"):
        _util.in_buffer(memoryview(bytearray(8))[::2], "data")


def test_numpy_arrays_without_a_copy():
    np = pytest.importorskip("numpy")
    x = np.arange(16, dtype=np.float32)
    p, n = _util.out_buffer(x, "out")
    assert n == 64 and _addr(p) == x.ctypes.data
    ffi.cast("float *", p)[3] = 42.0
    assert x[3] == 42.0
    ro = np.arange(4)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="out"):
        _util.out_buffer(ro, "out")
    _util.in_buffer(ro, "data")  # a read-only array is a fine request
    with pytest.raises(ValueError, match="contiguous"):
        _util.in_buffer(np.arange(16).reshape(4, 4)[:, 1], "data")


def test_guard_waits_for_users():
    import threading
    g = _util.Guard("Thing")
    g.enter()
    done = []
    t = threading.Thread(target=lambda: done.append(g.close()))
    t.start()
    t.join(0.2)
    assert not done  # close waits for the use under way
    g.leave()
    t.join(5)
    assert done == [True]
    with pytest.raises(rdmakit.ClosedError, match="Thing"):
        g.enter()
    assert g.close() is False


def test_handler_error():
    e = rdmakit.HandlerError(7, b"why")
    assert e.code == 7 and e.data == b"why"


def test_xfer_names_and_flags():
    assert rdmakit.READ | rdmakit.WRITE == 3 and rdmakit.Access(0) == rdmakit.Access.NONE
    assert issubclass(rdmakit.RemoteAccessError, rdmakit.Error)
    assert issubclass(rdmakit.RemoteAccessError, PermissionError)
    st = rdmakit.OpStatus(errno.EREMOTEIO, 10)
    assert st.errno == errno.EREMOTEIO and st.wc_status == 10
    from rdmakit.xfer import LANES_APP_ID
    assert LANES_APP_ID.to_bytes(4, "big") == b"RKXL"
    assert ffi.sizeof("struct rk_xfer_op") >= 40
    assert _util.lib.RK_XFER_DESC_MAX == 96 and _util.lib.RK_XFER_LANES_MAX == 16


def test_xfer_objects_need_their_parents():
    with pytest.raises(TypeError, match="device"):
        rdmakit.Xfer(None)
    with pytest.raises(TypeError, match="device"):
        rdmakit.Xfer("rxe0", mode="mw")
    with pytest.raises(TypeError, match="xfer"):
        rdmakit.Segment(None, bytearray(8))
    with pytest.raises(TypeError, match="xfer"):
        rdmakit.Listener(object(), 7720)
    with pytest.raises(TypeError, match="local"):
        rdmakit.Read(bytearray(8), None)
    with pytest.raises(TypeError, match="Read or rdmakit.Write"):
        rdmakit.Op(None, None)


def test_connect_lane_checks_its_arguments_first():
    # Checked before the Xfer or the network is touched: no device needed.
    lane = rdmakit.Xfer.connect_lane
    for kw, exc, word in (
            (dict(app_id=-1), ValueError, "app_id"),
            (dict(app_id=1 << 32), ValueError, "app_id"),
            (dict(app_id="KVC1"), TypeError, "app_id"),
            (dict(app_id=1, app_arg=1 << 32), ValueError, "app_arg"),
            (dict(app_id=1, token="abc"), TypeError, "token"),
            (dict(app_id=1, token=bytes(33)), ValueError, "token.*at most 32"),
            (dict(app_id=1, mode="sleepy"), ValueError, "mode"),
            (dict(app_id=1, timeout=-1.0), ValueError, "timeout"),
            (dict(app_id=1, timeout=math.inf), ValueError, "timeout"),
            (dict(app_id=1, src_addr=7), TypeError, "src_addr")):
        with pytest.raises(exc, match=word):
            lane(None, "127.0.0.1", 7550, **kw)
    with pytest.raises(TypeError, match="host"):
        lane(None, None, 7550, 1)
    with pytest.raises(TypeError):
        lane(None, "127.0.0.1", 7550)  # app_id is required


def test_segment_buffers_are_checked_like_answers():
    # Segment takes its buffer through out_buffer, with a 64-bit limit.
    with pytest.raises(ValueError, match="buf.*at most 5"):
        _util.out_buffer(bytearray(10), "buf", 5)
    p, n = _util.out_buffer(bytearray(10), "buf", 1 << 62)
    assert n == 10
    with pytest.raises(TypeError, match="buf.*read-only"):
        _util.out_buffer(b"abc", "buf", 1 << 62)
