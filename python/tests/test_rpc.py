"""test_rpc.py - RPC from Python on a real device (the sandbox; label rdma).

One server in this process (its progress loop on its thread) on port 7700
and clients: echo at 0 B, 1 B, 4 KiB, 1 MiB and 64 MiB with every byte
checked, into bytes and into the caller's buffers (numpy arrays too);
1,000 asyncio calls in flight, each matched to its caller; one client from
several threads and from sync and asyncio code at once; a handler that
raises (logged, answered with an error, the server goes on); a handler's
own error code; a deferred answer from another thread; deadlines, sync and
asyncio; bad arguments and closed objects; the pool from several threads;
a server in another process killed mid-call ("peer gone" well within the
deadline); and interpreter exit and garbage collection with live objects
(python3 -X dev). Ports 7700-7719.
"""
import asyncio
import errno
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import rdmakit

DEV = os.environ.get("RK_DEV")
ADDR = os.environ.get("RK_ADDR")
PORT = 7700
M_ECHO, M_RAISE, M_CODE, M_DEFER, M_NEVER, M_SUM = 1, 2, 3, 4, 5, 6

pytestmark = pytest.mark.skipif(not DEV or not ADDR, reason="needs RK_DEV and RK_ADDR (sandbox)")

held = []  # requests M_NEVER never answers (until the server closes)


def pattern(n, seed=0):
    base = bytes((i * 7 + seed) & 0xFF for i in range(4096))
    return (base * (n // 4096 + 1))[:n]


@pytest.fixture(scope="module")
def dev():
    with rdmakit.Device(DEV) as d:
        yield d


@pytest.fixture(scope="module")
def server(dev):
    srv = rdmakit.RpcServer(dev, PORT, addr=ADDR, mode="event", window=1024)

    @srv.handler(M_ECHO)
    def echo(req):
        return req.data

    @srv.handler(M_RAISE)
    def boom(req):
        raise KeyError("no such key")

    @srv.handler(M_CODE)
    def code(req):
        raise rdmakit.HandlerError(42, b"nope")

    @srv.handler(M_DEFER)
    def defer(req):
        req.defer()
        data = req.data
        threading.Timer(0.05, req.reply, (data[::-1],)).start()

    @srv.handler(M_NEVER)
    def never(req):
        held.append(req.defer())

    srv.start()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def client(dev, server):
    with rdmakit.RpcClient(dev, ADDR, PORT, mode="event") as c:
        yield c


@pytest.mark.parametrize("n", [0, 1, 4096, 1 << 20])
def test_echo(client, n):
    data = pattern(n, n & 0xFF)
    assert client.call(M_ECHO, data, max_size=max(n, 1)) == data
    out = bytearray(n)
    assert client.call(M_ECHO, bytearray(data), out=out) == n
    assert out == data


def test_echo_64mib(client):
    n = 64 << 20
    data = pattern(n, 3)
    out = bytearray(n)
    assert client.call(M_ECHO, data, out=out, timeout=60) == n
    assert out == data


def test_echo_numpy(client):
    np = pytest.importorskip("numpy")
    x = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
    y = np.zeros_like(x)
    assert client.call(M_ECHO, x, out=y) == x.nbytes
    assert np.array_equal(x, y)
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="out"):
        client.call(M_ECHO, b"x", out=ro)


def test_asyncio_1000_in_flight(dev, server):
    async def main():
        with rdmakit.RpcClient(dev, ADDR, PORT, mode="event", window=1000) as c:
            assert c.window == 1000
            calls = [c.acall(M_ECHO, b"call %d" % i, timeout=60) for i in range(1000)]
            got = await asyncio.gather(*calls)
            assert got == [b"call %d" % i for i in range(1000)]
            assert c.inflight == 0
    asyncio.run(main())


def test_asyncio_matched_and_errors(dev, server):
    async def main():
        with rdmakit.RpcClient(dev, ADDR, PORT, mode="event") as c:
            got = await asyncio.gather(*[c.acall(M_ECHO, b"%d" % i) for i in range(200)])
            assert got == [b"%d" % i for i in range(200)]
            with pytest.raises(rdmakit.RemoteError) as ei:
                await c.acall(M_CODE)
            assert ei.value.code == 42 and ei.value.data == b"nope"
            t = time.monotonic()
            with pytest.raises(rdmakit.DeadlineError):
                await c.acall(M_NEVER, timeout=0.3)
            assert time.monotonic() - t < 5
            assert await c.acall(M_DEFER, b"abc") == b"cba"
    asyncio.run(main())


def test_asyncio_adaptive_answers_within_the_spin(dev, server):
    async def main():
        with rdmakit.RpcClient(dev, ADDR, PORT, mode="adaptive", spin_us=2000) as c:
            for i in range(100):  # mostly answered within the spin, struct and buffer reused
                assert await c.acall(M_ECHO, b"seq %d" % i) == b"seq %d" % i
            got = await asyncio.gather(*[c.acall(M_ECHO, b"%d" % i) for i in range(100)])
            assert got == [b"%d" % i for i in range(100)]
            assert await c.acall(M_ECHO, b"") == b""
            assert await c.acall(M_ECHO, b"x" * 4084) == b"x" * 4084
            with pytest.raises(rdmakit.MessageTooBigError):
                await c.acall(M_ECHO, b"x" * 4085)
            with pytest.raises(rdmakit.RemoteError) as ei:
                await c.acall(M_CODE)
            assert ei.value.code == 42 and ei.value.data == b"nope"
            with pytest.raises(ValueError, match="method"):
                await c.acall(1 << 16)
            with pytest.raises(ValueError, match="method"):
                await c.acall(-1)
            assert await c.acall(M_DEFER, b"abc") == b"cba"  # in flight past the spin
            assert await c.acall(M_ECHO, b"after") == b"after"
            assert c.inflight == 0
    asyncio.run(main())
    asyncio.run(main())  # a second loop, a new client


def test_one_client_from_threads(dev, server):
    # The answer buffer of call()'s and acall()'s common case belongs to one
    # thread (the first to call); the others' answers land in their own
    # buffers, and so do the owner's while an acall() in flight holds it.
    with rdmakit.RpcClient(dev, ADDR, PORT, mode="adaptive", spin_us=2000) as c:
        assert c.call(M_ECHO, b"owner") == b"owner"
        bad = []

        def work(k):
            for i in range(200):
                want = b"t%d-%d" % (k, i) * (1 + i % 9)
                got = c.call(M_ECHO, want)
                if got != want:
                    bad.append((want, got))
        ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in ts:
            t.start()
        work(9)
        for t in ts:
            t.join()
        assert bad == []

        async def main():
            assert await c.acall(M_ECHO, b"tie") == b"tie"  # tied to this loop
            held = asyncio.ensure_future(c.acall(M_DEFER, b"abc"))
            await asyncio.sleep(0)  # in flight past the spin, in the client's buffer
            assert c.call(M_ECHO, b"sync meanwhile") == b"sync meanwhile"
            assert await c.acall(M_ECHO, b"async meanwhile") == b"async meanwhile"
            assert await held == b"cba"
            assert await c.acall(M_ECHO, b"after") == b"after"
            assert c.call(M_ECHO, b"after too") == b"after too"
        asyncio.run(main())


def test_call_many(client):
    reqs = [pattern(n, n & 0xFF) for n in (0, 1, 64, 4084)] * 40  # 160: three chunks
    assert client.call_many(M_ECHO, reqs) == reqs
    assert client.call_many(M_ECHO, iter([bytearray(b"ab"), memoryview(b"cd")])) == [b"ab", b"cd"]
    import array
    a = array.array("i", [1, 2, 3])
    assert client.call_many(M_ECHO, [a, b"z"], timeout=5) == [a.tobytes(), b"z"]
    assert client.call_many(M_ECHO, []) == []
    with pytest.raises(rdmakit.MessageTooBigError) as ei:
        client.call_many(M_ECHO, [b"a"] * 70 + [b"x" * 5000, b"never"])
    assert ei.value.answers == [b"a"] * 70
    with pytest.raises(rdmakit.RemoteError) as ei:
        client.call_many(M_CODE, [b"1", b"2"])
    assert ei.value.code == 42 and ei.value.data == b"nope" and ei.value.answers == []
    with pytest.raises(TypeError, match="payloads"):
        client.call_many(M_ECHO, [b"ok", "text"])
    with pytest.raises(ValueError, match="method"):
        client.call_many(1 << 16, [b"x"])
    assert client.call(M_ECHO, b"still") == b"still"


def test_asyncio_needs_a_sleeping_client(dev, server):
    async def main():
        with rdmakit.RpcClient(dev, ADDR, PORT, mode="busy") as c:
            with pytest.raises(ValueError, match="mode"):
                await c.acall(M_ECHO)
            assert c.call(M_ECHO, b"busy") == b"busy"
    asyncio.run(main())


def test_handler_that_raises(client, caplog):
    with caplog.at_level(logging.ERROR, logger="rdmakit"):
        with pytest.raises(rdmakit.RemoteError) as ei:
            client.call(M_RAISE, b"x")
    assert ei.value.errno == errno.EREMOTEIO and ei.value.code == -errno.EIO
    assert "KeyError" in caplog.text
    assert client.call(M_ECHO, b"still here") == b"still here"


def test_handler_code(client):
    with pytest.raises(rdmakit.RemoteError) as ei:
        client.call(M_CODE)
    assert ei.value.code == 42 and ei.value.data == b"nope"


def test_deferred_answer_from_another_thread(client):
    assert client.call(M_DEFER, b"hello") == b"olleh"


def test_deadline(client):
    t = time.monotonic()
    with pytest.raises(rdmakit.DeadlineError) as ei:
        client.call(M_NEVER, b"", timeout=0.3)
    assert isinstance(ei.value, TimeoutError) and ei.value.op
    assert time.monotonic() - t < 5
    assert client.call(M_ECHO, b"after") == b"after"


def test_library_errors(client):
    with pytest.raises(rdmakit.NoMethodError):
        client.call(999)
    with pytest.raises(rdmakit.MessageTooBigError):
        client.call(M_ECHO, b"x" * 100, out=bytearray(10))
    with pytest.raises(rdmakit.MessageTooBigError):
        client.call(M_ECHO, b"", max_size=(64 << 20) + 1)


def test_bad_arguments(dev, client):
    with pytest.raises(TypeError, match="method"):
        client.call("echo")
    with pytest.raises(ValueError, match="method"):
        client.call(1 << 16)
    with pytest.raises(TypeError, match="data"):
        client.call(M_ECHO, "text")
    with pytest.raises(TypeError, match="data"):
        client.call(M_ECHO, 5)
    with pytest.raises(TypeError, match="out"):
        client.call(M_ECHO, b"x", out=b"read-only")
    with pytest.raises(ValueError, match="max_size"):
        client.call(M_ECHO, b"x", max_size=-1)
    with pytest.raises(ValueError, match="max_size"):
        client.call(M_ECHO, b"x", max_size=1 << 40)
    with pytest.raises(ValueError, match="timeout"):
        client.call(M_ECHO, b"x", timeout=-1)
    with pytest.raises(TypeError, match="port"):
        rdmakit.RpcClient(dev, ADDR, 1.5)
    assert client.call(M_ECHO, b"ok") == b"ok"


def test_closed_objects(dev, server):
    c = rdmakit.RpcClient(dev, ADDR, PORT, mode="event")
    c.close()
    c.close()
    with pytest.raises(rdmakit.ClosedError):
        c.call(M_ECHO, b"x")
    with pytest.raises(rdmakit.ClosedError):
        asyncio.run(c.acall(M_ECHO, b"x"))
    assert not c.alive
    d2 = rdmakit.Device(DEV)
    c2 = rdmakit.RpcClient(d2, ADDR, PORT)
    d2.close()  # closes the client first
    assert c2.closed
    with pytest.raises(rdmakit.ClosedError):
        c2.call(M_ECHO)
    with pytest.raises(rdmakit.ClosedError):
        rdmakit.RpcClient(d2, ADDR, PORT)


def test_pool_from_threads(dev, server):
    peer = "%s:%d" % (ADDR, PORT)
    errors = []
    with rdmakit.RpcPool(dev, max_per_peer=2, mode="event") as pool:
        def work(k):
            try:
                for i in range(20):
                    msg = b"%d-%d" % (k, i)
                    assert pool.call(peer, M_ECHO, msg) == msg
            except Exception as e:  # reported below
                errors.append(e)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        with pool.lease(peer) as c:
            assert c.call(M_ECHO, b"leased") == b"leased"
        st = pool.stats()
        assert st["connects"] <= 2 and st["leased"] == 0
        with pytest.raises(ValueError, match="peer"):
            pool.call("no-port", M_ECHO)
        with pytest.raises(rdmakit.RemoteError):
            pool.call(peer, M_CODE)


SERVER_PROC = """
import os, sys, rdmakit
dev = rdmakit.Device(os.environ["RK_DEV"])
srv = rdmakit.RpcServer(dev, int(sys.argv[1]), addr=os.environ["RK_ADDR"], mode="event")
held = []
def hold(req):
    held.append(req.defer())
    print("held", flush=True)
srv.add(1, hold)
srv.add(2, lambda req: req.data)
print("ready", flush=True)
srv.serve()
"""


def test_server_killed_mid_call(dev):
    port = PORT + 1
    p = subprocess.Popen([sys.executable, "-c", SERVER_PROC, str(port)], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        with rdmakit.RpcClient(dev, ADDR, port, mode="event") as c:
            assert c.call(2, b"up") == b"up"
            result = []

            def call():
                t = time.monotonic()
                try:
                    c.call(1, b"x", timeout=60)
                except Exception as e:
                    result.append((e, time.monotonic() - t))
            t = threading.Thread(target=call)
            t.start()
            assert p.stdout.readline().strip() == "held"
            p.kill()
            t.join(60)
            e, took = result[0]
            assert isinstance(e, rdmakit.PeerGoneError), e
            assert e.errno == errno.ECONNRESET and "peer gone" in str(e)
            assert took < 30
            assert not c.alive
            with pytest.raises(rdmakit.PeerGoneError):
                c.call(2, b"again")
    finally:
        p.kill()
        p.wait()


EXIT_PROC = """
import asyncio, os, sys, threading, rdmakit
dev = rdmakit.Device(os.environ["RK_DEV"])
srv = rdmakit.RpcServer(dev, int(sys.argv[1]), addr=os.environ["RK_ADDR"], mode="event")
held = []
srv.add(1, lambda req: held.append(req.defer()))
srv.add(2, lambda req: req.data)
srv.start()
c = rdmakit.RpcClient(dev, os.environ["RK_ADDR"], int(sys.argv[1]), mode="event")
assert c.call(2, b"x") == b"x"
pool = rdmakit.RpcPool(dev, mode="event")
assert pool.call("%s:%s" % (os.environ["RK_ADDR"], sys.argv[1]), 2, b"y") == b"y"
lease = pool.lease("%s:%s" % (os.environ["RK_ADDR"], sys.argv[1]))
async def pending():
    ac = rdmakit.RpcClient(dev, os.environ["RK_ADDR"], int(sys.argv[1]), mode="event")
    t = asyncio.ensure_future(ac.acall(1, b"never", timeout=60))
    await asyncio.sleep(0.2)
    return ac, t
loop = asyncio.new_event_loop()
ac, t = loop.run_until_complete(pending())
if sys.argv[2] == "gc":
    del c, pool, lease, ac, t, srv, dev
    import gc; gc.collect()
    print("collected", flush=True)
print("exit", flush=True)
"""


@pytest.mark.parametrize("how", ["exit", "gc"])
def test_exit_with_live_objects(how):
    port = PORT + 2 + (how == "gc")
    r = subprocess.run([sys.executable, "-X", "dev", "-c", EXIT_PROC, str(port), how],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "exit" in r.stdout
    # (asyncio may say that the pending call's PeerGoneError was never retrieved)
    for bad in ("Fatal Python error", "Exception ignored", "Segmentation", "cffi callback"):
        assert bad not in r.stderr, r.stderr


def test_server_stats_and_closed_request(dev):
    srv = rdmakit.RpcServer(dev, PORT + 4, addr=ADDR, mode="event")
    got = []
    srv.add(1, lambda req: got.append(req.defer()))
    srv.start()
    with pytest.raises(RuntimeError, match="start"):
        srv.add(2, lambda req: None)
    with rdmakit.RpcClient(dev, ADDR, PORT + 4, mode="event") as c:
        with pytest.raises(rdmakit.DeadlineError):
            c.call(1, b"held", timeout=0.3)
        assert srv.stats()["conns"] == 1
        srv.close()
        with pytest.raises(rdmakit.ClosedError):
            got[0].reply(b"late")
        assert got[0].answered
        with pytest.raises(rdmakit.PeerGoneError):
            c.call(1, b"again", timeout=10)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_echo_example(mode):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "echo.py")
    port = 7710 + (mode == "asyncio")
    args = [sys.executable, example, "both", ADDR, "--port", str(port), "--count", "200"]
    if mode == "asyncio":
        args.append("--asyncio")
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("every answer matched" if mode == "asyncio" else "round trip median") in r.stdout
