"""test_xfer.py - one-sided transfers from Python on a real device (the
sandbox; label rdma).

Both ends in this process, each its own Xfer, joined by lanes made with
Xfer.connect and Listener.accept over rdma_cm: READ and WRITE batches of 1
B, 4 KiB and 1 MiB into and out of numpy arrays, every byte checked, the
array's memory registered in place (its data pointer is the segment's
address); 64 ops in one batch over 2 lanes; WRITE batches with a
notification, the data checked when notified; a thread waiting for a
notification while another uses the same Xfer; asyncio (await a batch, await
a notification; the peer closed from another thread than the loop's); revocation seen from Python (RemoteAccessError, the op
behind it flushed, memory intact; memory windows and registrations); bad
arguments, closed objects, descriptors that are not; the parameter server
example with 3 workers; the owner killed mid-batch ("peer gone");
garbage collection and interpreter exit with live objects, a batch still
running among them (python3 -X dev); and a Listener under attack: lane
connects that never end their handshake (tests/kv/kv_hostile stall-lanes)
do not delay a good peer beside them and are closed after 3 s; one
address gets 4 half-connected peers, no more; max_pending holds over all.
Ports 7720-7729.
"""
import asyncio
import errno
import mmap
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rdmakit
from rdmakit import READ, WRITE, Read, Write

DEV = os.environ.get("RK_DEV")
ADDR = os.environ.get("RK_ADDR")
PORT = 7720

pytestmark = pytest.mark.skipif(not DEV or not ADDR, reason="needs RK_DEV and RK_ADDR (sandbox)")

MiB = 1 << 20


@pytest.fixture(scope="module")
def dev():
    with rdmakit.Device(DEV) as d:
        yield d


def pair(dev, port, lanes=1, mode="busy", xmode="auto"):
    """(owner Xfer, its Peer, user Xfer, its Peer) over ``lanes`` lanes."""
    own = rdmakit.Xfer(dev, mode=xmode)
    usr = rdmakit.Xfer(dev, mode=xmode)
    lis = own.listen(port, addr=ADDR, mode=mode)
    got = []
    t = threading.Thread(target=lambda: got.append(lis.accept(30)))
    t.start()
    up = usr.connect(ADDR, lis.port, lanes=lanes, mode=mode)
    t.join(30)
    lis.close()
    assert got and got[0].lanes == lanes and up.lanes == lanes
    return own, got[0], usr, up


@pytest.fixture(scope="module")
def world(dev):
    own, op, usr, up = pair(dev, PORT, lanes=2)
    yield own, op, usr, up
    usr.close()
    own.close()


def fill(a, seed):
    a[:] = (np.arange(a.size, dtype=np.uint64) * 2654435761 + seed).astype(np.uint8)


def test_sizes_numpy_every_byte(world):
    own, op, usr, up = world
    print("xfer mode:", own.mode)
    remote_mem = np.zeros(MiB + 8192, dtype=np.uint8)
    local_mem = np.zeros(MiB + 8192, dtype=np.uint8)
    rseg = own.register(remote_mem)
    lseg = usr.register(local_mem, 0)
    assert rseg.address == remote_mem.ctypes.data  # registered in place: no copy
    assert lseg.address == local_mem.ctypes.data and lseg.nbytes == local_mem.nbytes
    assert lseg.numpy() is local_mem
    desc = rseg.export(op)
    assert isinstance(desc, bytes) and 36 <= len(desc) <= 96
    assert rseg.export(op) == desc  # exporting again: the same descriptor
    rem = up.import_remote(desc)
    assert rem.length == remote_mem.nbytes and rem.access == READ | WRITE
    assert rem.mode == own.mode  # the owner's protection, as the descriptor says
    for k, n in enumerate((1, 4096, MiB)):
        off = 7 if n == 1 else 4096
        src = np.empty(n, dtype=np.uint8)
        fill(src, 11 + k)
        local_mem[3:3 + n] = src
        remote_mem[:] = 0xEE
        up.post(Write(lseg, rem, n, local_offset=3, remote_offset=off)).wait()
        assert np.array_equal(remote_mem[off:off + n], src), "WRITE %d B" % n
        assert remote_mem[off - 1] == 0xEE and remote_mem[off + n] == 0xEE
        fill(remote_mem[off:off + n], 50 + k)
        local_mem[:] = 0
        b = up.post([Read(lseg, rem, n, local_offset=5, remote_offset=off)])
        b.wait()
        assert b.done and b.check() and b.op_status(0) == (0, 0)
        assert np.array_equal(local_mem[5:5 + n], remote_mem[off:off + n]), "READ %d B" % n
        assert local_mem[4] == 0 and local_mem[5 + n] == 0
    # 64 x 16 KiB in one batch over the 2 lanes, blocks reversed.
    fill(remote_mem, 7)
    s0 = usr.stats()
    ops = [Read(lseg, rem, 16384, local_offset=i * 16384, remote_offset=(63 - i) * 16384)
           for i in range(64)]
    up.post(ops, timeout=60).wait()
    for i in range(64):
        assert np.array_equal(local_mem[i * 16384:(i + 1) * 16384],
                              remote_mem[(63 - i) * 16384:(64 - i) * 16384]), "op %d" % i
    s1 = usr.stats()
    assert s1["ops"] - s0["ops"] == 64 and s1["batches"] - s0["batches"] == 1
    # A float32 view of the same memory, and a default length (as much as fits both).
    f = lseg.numpy(np.float32, (-1,))
    assert f.ctypes.data == lseg.address
    up.post(Read(lseg, rem)).wait()
    assert np.array_equal(local_mem, remote_mem)
    rem.close()
    lseg.close()
    rseg.close()


def test_other_buffers(world):
    own, op, usr, up = world
    m = mmap.mmap(-1, 65536)
    rseg = own.register(m, WRITE)
    ba = bytearray(b"x" * 65536)
    lseg = usr.register(ba, 0)
    with pytest.raises(BufferError):
        m.close()  # registered: cannot be unmapped under the NIC
    with pytest.raises(BufferError):
        ba.extend(b"more")
    rem = up.import_remote(rseg.export(op))
    assert rem.access == WRITE
    with pytest.raises(ValueError, match="remote.*grants"):
        Read(lseg, rem)
    up.post(Write(lseg, rem, 100, remote_offset=10)).wait()
    assert m[10:110] == b"x" * 100 and m[9] == 0 and m[110] == 0
    with lseg.memoryview() as mv:
        assert mv.nbytes == 65536 and not mv.readonly and mv[0] == ord("x")
    rem.close()
    lseg.close()
    rseg.close()
    ba.extend(b"more")  # deregistered: the buffer is the caller's again
    m.close()


def test_write_with_notification(world):
    own, op, usr, up = world
    blk, nops = 4096, 8
    dst = np.zeros(blk * nops, dtype=np.uint8)
    src = np.zeros(blk * nops, dtype=np.uint8)
    rseg = own.register(dst, WRITE)
    lseg = usr.register(src, 0)
    rem = up.import_remote(rseg.export(op, WRITE))
    assert op.notif_take() is None
    for n in range(1, 101):
        fill(src, n)
        up.post([Write(lseg, rem, blk, local_offset=i * blk, remote_offset=i * blk)
                 for i in range(nops)], notify=n).wait()
        assert op.notif_wait(10) == n
        assert np.array_equal(dst, src), "batch %d notified before its data landed" % n
    with pytest.raises(rdmakit.DeadlineError):
        op.notif_wait(0.05)
    st = own.stats()
    assert st["notifs_received"] >= 100
    rem.close()
    lseg.close()
    rseg.close()


def test_threads_share_an_xfer(world):
    # One thread waits for a notification (GIL released, the Xfer's lock let go
    # every 50 ms) while another registers, exports and posts on the same Xfers.
    own, op, usr, up = world
    got = []
    t = threading.Thread(target=lambda: got.append(op.notif_wait(30)))
    t.start()
    dst = bytearray(4096)
    rseg = own.register(dst, WRITE)
    rem = up.import_remote(rseg.export(op))
    lseg = usr.register(bytearray(b"t" * 4096), 0)
    up.post(Write(lseg, rem), notify=4242).wait()
    t.join(30)
    assert got == [4242] and dst == b"t" * 4096
    rem.close()
    lseg.close()
    rseg.close()


def test_asyncio(dev):
    own, op, usr, up = pair(dev, PORT + 1, lanes=2, mode="event")
    try:
        dst = np.zeros(MiB, dtype=np.uint8)
        src = np.zeros(MiB, dtype=np.uint8)
        fill(src, 3)
        rseg = own.register(dst)
        lseg = usr.register(src, 0)
        rem = up.import_remote(rseg.export(op))

        async def main():
            await up.post(Write(lseg, rem), notify=77)
            assert await op.notif_wait_async(10) == 77
            assert np.array_equal(dst, src)
            dst[:] = 0
            batches = [up.post(Write(lseg, rem, 65536, local_offset=i * 65536,
                                     remote_offset=i * 65536), notify=i) for i in range(16)]
            await asyncio.gather(*(b.wait_async(timeout=30) for b in batches))
            got = [await op.notif_wait_async(10) for _ in range(16)]
            assert sorted(got) == list(range(16))
            assert np.array_equal(dst, src)
            with pytest.raises(rdmakit.DeadlineError):
                await op.notif_wait_async(0.1)

        asyncio.run(main())
    finally:
        usr.close()
        own.close()


def test_asyncio_close_from_another_thread(dev):
    # The loop runs on a thread of its own, in debug mode (which raises on
    # a non-thread-safe use of it from another thread); the peer is closed
    # from this one while a notification and a batch are awaited there.
    own, op, usr, up = pair(dev, PORT + 1, mode="event")
    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    t = threading.Thread(target=loop.run_forever)
    t.start()
    try:
        mem = bytearray(4096)
        rseg = own.register(mem)  # kept: a segment collected is revoked
        rem = up.import_remote(rseg.export(op))
        lseg = usr.register(bytearray(4096), 0)
        waited = asyncio.run_coroutine_threadsafe(op.notif_wait_async(30), loop)

        async def batch():
            b = up.post(Write(lseg, rem), notify=5)
            await b
            return await up.notif_wait_async(30)  # none comes: the peer is closed
        batched = asyncio.run_coroutine_threadsafe(batch(), loop)
        deadline = time.monotonic() + 10
        while (op._fd < 0 or up._fd < 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        fds = op._fd, up._fd
        assert min(fds) >= 0
        # The WRITE's notification settles op's wait; a new one waits for ever.
        assert waited.result(10) == 5
        waited = asyncio.run_coroutine_threadsafe(op.notif_wait_async(30), loop)
        time.sleep(0.2)
        up.close()
        with pytest.raises(rdmakit.ClosedError):
            batched.result(10)
        op.close()  # its lane may have seen up's disconnect first: "peer gone" then
        with pytest.raises((rdmakit.ClosedError, rdmakit.PeerGoneError)):
            waited.result(10)

        async def readers():  # were the fds taken off the loop? (False: not there)
            return [asyncio.get_running_loop().remove_reader(fd) for fd in fds]
        assert asyncio.run_coroutine_threadsafe(readers(), loop).result(10) == [False, False]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()
        usr.close()
        own.close()


@pytest.mark.parametrize("xmode", ["auto", "mr"])
def test_revoke_seen_from_python(dev, xmode):
    own, op, usr, up = pair(dev, PORT + (3 if xmode == "auto" else 7), xmode=xmode)
    try:
        mem = np.full(65536, 0x5A, dtype=np.uint8)
        mine = np.zeros(65536, dtype=np.uint8)
        rseg = own.register(mem)
        lseg = usr.register(mine, 0)
        rem = up.import_remote(rseg.export(op))
        up.post(Read(lseg, rem)).wait()
        assert (mine == 0x5A).all()
        rseg.revoke(op)
        mine[:] = 0xA5
        b = up.post([Write(lseg, rem, 4096), Write(lseg, rem, 4096, remote_offset=4096)],
                    timeout=20)
        with pytest.raises(rdmakit.RemoteAccessError) as ei:
            b.wait()
        e = ei.value
        assert e.errno == errno.EREMOTEIO and isinstance(e, PermissionError)
        assert e.wc_status is not None and e.op
        assert b.op_status(0).errno == errno.EREMOTEIO
        assert b.op_status(1).errno in (errno.ECANCELED, errno.EREMOTEIO)  # flushed behind
        assert (mem == 0x5A).all()  # not touched
        with pytest.raises(rdmakit.Error) as ei:
            rseg.revoke(op)
        assert ei.value.errno == errno.ENOENT
    finally:
        usr.close()
        own.close()


def test_arguments_and_closed_objects(dev):
    own, op, usr, up = pair(dev, PORT + 4)
    try:
        mem = bytearray(4096)
        rseg = own.register(mem)
        lseg = usr.register(bytearray(1024), 0)
        with pytest.raises(TypeError, match="buf.*read-only"):
            own.register(b"read-only bytes")
        with pytest.raises(ValueError, match="buf.*1 byte"):
            own.register(bytearray())
        with pytest.raises(ValueError, match="contiguous"):
            own.register(memoryview(bytearray(64))[::2])
        with pytest.raises(TypeError, match="buf"):
            own.register("text")
        with pytest.raises(ValueError, match="access"):
            own.register(bytearray(8), 4)
        with pytest.raises(ValueError, match="access"):
            lseg.export(up)  # a segment registered for local use only
        with pytest.raises(ValueError, match="peer"):
            rseg.export(up)  # a peer of another Xfer
        with pytest.raises(TypeError, match="peer"):
            rseg.export("peer")
        desc = rseg.export(op, READ)
        with pytest.raises(rdmakit.Error) as ei:
            up.import_remote(b"RKXD" + bytes(60))
        assert ei.value.errno in (errno.EPROTO, errno.EINVAL)
        with pytest.raises(rdmakit.Error):
            up.import_remote(desc[:-3])
        with pytest.raises(ValueError, match="desc"):
            up.import_remote(b"")
        with pytest.raises(TypeError, match="desc"):
            up.import_remote("text")
        rem = up.import_remote(desc)
        with pytest.raises(ValueError, match="length"):
            Read(lseg, rem, 2048)  # beyond the local segment
        with pytest.raises(ValueError, match="length"):
            Read(lseg, rem, 1024, remote_offset=3584)  # beyond the remote one
        with pytest.raises(ValueError, match="length"):
            Read(lseg, rem, -1)
        with pytest.raises(ValueError, match="local_offset"):
            Read(lseg, rem, 1, local_offset=1 << 70)
        with pytest.raises(ValueError, match="remote.*grants"):
            Write(lseg, rem)
        with pytest.raises(TypeError, match="local"):
            Read(mem, rem)
        with pytest.raises(TypeError):
            rdmakit.Op(lseg, rem)
        with pytest.raises(TypeError, match="ops"):
            up.post("not ops")
        with pytest.raises(TypeError, match=r"ops\[1\]"):
            up.post([Read(lseg, rem, 8), 5])
        with pytest.raises(ValueError, match="ops"):
            up.post([])
        with pytest.raises(ValueError, match="notify"):
            up.post(Read(lseg, rem, 8), notify=1 << 32)
        with pytest.raises(ValueError, match="remote"):
            op.post(Read(rseg, rem, 8))  # imported by the other peer
        with pytest.raises(ValueError, match="event"):
            asyncio.run(up.notif_wait_async(0.1))  # a busy peer has no fd to wait on
        b = up.post(Read(lseg, rem, 8))
        b.wait()
        with pytest.raises(ValueError, match="i"):
            b.op_status(1)
        b.close()
        with pytest.raises(rdmakit.ClosedError):
            b.check()
        r = Read(lseg, rem, 8)
        rem.close()
        with pytest.raises(rdmakit.ClosedError, match="Remote"):
            up.post(r)
        lseg.close()
        with pytest.raises(rdmakit.ClosedError, match="Segment"):
            lseg.export(up)
        up.close()
        with pytest.raises(rdmakit.ClosedError, match="Peer"):
            up.import_remote(desc)
        with pytest.raises(rdmakit.ClosedError, match="Peer"):
            up.notif_wait(0.01)
        assert not up.alive
        # The owner sees its peer go (the lanes' disconnect).
        with pytest.raises((rdmakit.PeerGoneError, rdmakit.DeadlineError)):
            op.notif_wait(5)
        own.close()
        assert rseg.closed and op.closed
        with pytest.raises(rdmakit.ClosedError, match="Xfer"):
            own.register(bytearray(8))
        with pytest.raises(rdmakit.RefusedError):
            usr.connect(ADDR, PORT + 2, timeout=5)  # nobody listens there
    finally:
        usr.close()
        own.close()


OWNER_PROC = """
import os, sys, time, numpy as np, rdmakit
dev = rdmakit.Device(os.environ["RK_DEV"])
x = rdmakit.Xfer(dev)
lis = x.listen(int(sys.argv[1]), addr=os.environ["RK_ADDR"])
print("listening", flush=True)
p = lis.accept(60)
mem = np.zeros(64 << 20, dtype=np.uint8)
seg = x.register(mem, rdmakit.READ)
print(seg.export(p).hex(), flush=True)
time.sleep(120)
"""


def test_owner_killed_mid_batch(dev):
    # The owner dies while a 256 MiB READ batch runs: the batch fails well within its
    # deadline and the peer is gone. The dead owner's kernel frees its memory and its
    # lanes in no fixed order: a READ in flight meets either the lanes' disconnect
    # (PeerGoneError) or, when the memory went first, the owner's NIC refusing it
    # (RemoteAccessError; seen with the guest loaded by other tests).
    proc = subprocess.Popen([sys.executable, "-c", OWNER_PROC, str(PORT + 2)],
                            stdout=subprocess.PIPE, text=True)
    usr = rdmakit.Xfer(dev)
    try:
        assert proc.stdout.readline().strip() == "listening"
        up = usr.connect(ADDR, PORT + 2, lanes=2)
        rem = up.import_remote(bytes.fromhex(proc.stdout.readline().strip()))
        lseg = usr.register(np.zeros(64 << 20, dtype=np.uint8), 0)
        b = up.post([Read(lseg, rem)] * 4, timeout=60)
        proc.kill()
        t0 = time.monotonic()
        with pytest.raises((rdmakit.PeerGoneError, rdmakit.RemoteAccessError)) as ei:
            # The READs may all land before the killed owner's kernel lets go of its
            # lanes and its memory (seen in CI, the guest loaded by other tests): the
            # next batch then meets the teardown, or its post the lanes gone.
            while time.monotonic() - t0 < 30:
                b.wait()
                b = None
                b = up.post([Read(lseg, rem)] * 4, timeout=60)
        if isinstance(ei.value, rdmakit.PeerGoneError):
            assert ei.value.errno == errno.ECONNRESET and "peer gone" in str(ei.value)
        else:
            assert ei.value.errno == errno.EREMOTEIO
            assert b is not None and errno.EREMOTEIO in [b.op_status(i).errno for i in range(4)]
        print("owner killed: %s after %.2f s" % (type(ei.value).__name__, time.monotonic() - t0))
        assert time.monotonic() - t0 < 30
        with pytest.raises(rdmakit.PeerGoneError):  # every lane down, within the same 30 s
            up.notif_wait(max(0.1, 30 - (time.monotonic() - t0)))
        assert not up.alive
        with pytest.raises(rdmakit.PeerGoneError):
            up.post(Read(lseg, rem, 8))
    finally:
        proc.kill()
        proc.wait()
        usr.close()


@pytest.mark.parametrize("workers", [3])
def test_param_server_example(workers):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python",
                           "param_server.py")
    r = subprocess.run([sys.executable, "-X", "dev", example, "both", ADDR, "--port",
                        str(PORT + 8), "--workers", str(workers), "--rounds", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "exact" in r.stdout, r.stdout


EXIT_PROC = """
import os, sys, threading, numpy as np, rdmakit
from rdmakit import Read, Write
dev = rdmakit.Device(os.environ["RK_DEV"])
own, usr = rdmakit.Xfer(dev), rdmakit.Xfer(dev)
lis = own.listen(int(sys.argv[1]), addr=os.environ["RK_ADDR"])
got = []
t = threading.Thread(target=lambda: got.append(lis.accept(30)))
t.start()
up = usr.connect(os.environ["RK_ADDR"], lis.port, lanes=2)
t.join()
op = got[0]
mem = np.zeros(8 << 20, dtype=np.uint8)
rseg = own.register(mem)
lseg = usr.register(np.zeros(8 << 20, dtype=np.uint8), 0)
rem = up.import_remote(rseg.export(op))
up.post(Write(lseg, rem), notify=1).wait()
running = up.post([Read(lseg, rem)] * 4)       # still running, most likely
dropped = up.post([Write(lseg, rem)] * 4)
del dropped                                     # dropped while running: freed when it ends
if sys.argv[2] == "gc":
    del running, rem, lseg, rseg, up, op, got, lis, own, usr, dev
    import gc; gc.collect()
    print("collected", flush=True)
print("exit", flush=True)
"""


@pytest.mark.parametrize("how", ["exit", "gc"])
def test_exit_with_live_objects(how):
    port = PORT + 5 + (how == "gc")
    r = subprocess.run([sys.executable, "-X", "dev", "-c", EXIT_PROC, str(port), how],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "exit" in r.stdout
    for bad in ("Fatal Python error", "Exception ignored", "Segmentation", "Traceback",
                "rdmakit warn"):  # e.g. a handle destroyed before one that needs it
        assert bad not in r.stderr, r.stderr


def hostile_bin():
    b = os.path.join(os.environ.get("RK_BUILD", "build"), "tests", "kv", "kv_hostile")
    return b if os.access(b, os.X_OK) else None


def half_peer(usr, host, port):
    """Lane 0 of a peer of 2 lanes: it waits at the listener for lane 1."""
    return usr.connect_lane(host, port, rdmakit.xfer.LANES_APP_ID, app_arg=2 << 8,
                            token=os.urandom(16), timeout=5)[0]


def busy(connect):
    with pytest.raises(rdmakit.RefusedError) as ei:
        connect()
    assert ei.value.reject_reason == rdmakit._lib.RK_REJECT_BUSY, ei.value
    print("refused:", ei.value)
    return str(ei.value)


@pytest.mark.skipif(not hostile_bin(), reason="needs tests/kv/kv_hostile")
def test_listener_under_attack(dev):
    port = PORT + 9
    own, usr = rdmakit.Xfer(dev), rdmakit.Xfer(dev)
    lis = own.listen(port, addr=ADDR)
    stall = subprocess.Popen([hostile_bin(), "stall-lanes", "3", ADDR, str(port)],
                             stdout=subprocess.PIPE, text=True)
    halves = []
    try:
        assert stall.stdout.readline().startswith("stall: sent")
        # Three handshakes that never end wait at the listener: a good peer
        # is accepted beside them (each used to hold accept for 5 s, longer
        # than the good connect's step, 5 s).
        got = []
        t = threading.Thread(target=lambda: got.append(lis.accept(30)))
        t.start()
        t0 = time.monotonic()
        tok = os.urandom(16)
        up = usr.connect(ADDR, port, lanes=2, timeout=5, token=tok)
        t.join(30)
        assert got and got[0].lanes == 2 and up.lanes == 2
        assert got[0].token == up.token == tok  # the token a server may have handed out
        print("good peer accepted in %.2f s beside %d stalled" % (time.monotonic() - t0,
                                                                  lis.pending))
        with pytest.raises(ValueError, match="token"):
            usr.connect(ADDR, port, token=b"short")
        # ... and the stalled lanes are closed after accept_timeout (3 s).
        with pytest.raises(rdmakit.DeadlineError):
            lis.accept(4.5)
        assert lis.pending == 0
        # A flood of half-connected peers from one address: 4, then busy.
        errs = []

        def accepting():
            try:
                lis.accept(60)
            except rdmakit.ClosedError:
                pass
            except BaseException as e:  # noqa: BLE001 (reported below)
                errs.append(e)
        t = threading.Thread(target=accepting)
        t.start()
        for _ in range(4):
            halves.append(half_peer(usr, ADDR, port))
        assert "from this address" in busy(lambda: half_peer(usr, ADDR, port))
        assert lis.pending == 4
        lis.close()  # from another thread than the one accepting
        t.join(30)
        assert not t.is_alive() and not errs, errs
        # The listener's limit, over every address: 2 here, then busy.
        lis = own.listen(port, addr=ADDR, max_pending=2)
        t = threading.Thread(target=accepting)
        t.start()
        for _ in range(2):
            halves.append(half_peer(usr, ADDR, port))
        assert "too many peers connecting (" in busy(lambda: half_peer(usr, ADDR, port))
        lis.close()
        t.join(30)
        assert not t.is_alive() and not errs, errs
    finally:
        stall.kill()
        stall.wait()
        stall.stdout.close()
        for h in halves:
            h.close()
        lis.close()
        usr.close()
        own.close()
