#!/usr/bin/env python3
"""param_server.py - a parameter server over RDMA from Python (rdmakit).

usage: param_server.py server ADDR [--port P] [--workers N] [--rounds R] [--size K]
       param_server.py worker ADDR [--port P] [--size K] [--rounds R]
       param_server.py both ADDR [...]        the server and N worker processes

Each round every worker pushes a gradient (K float32) and pulls the sum of
all of them. The data moves one-sided: a worker WRITEs its gradient into its
own slot of the server's memory, with a notification, and READs the sum
from it; the server's CPU only adds. RPC carries the control: JOIN (your
index and a secret token: the worker's lanes carry it in their hello, so
the server knows them by it, and nobody without it can take a worker's
place), DESC (your descriptors), SUM r (answered once round r is summed)
and BYE (the server closes once every worker said it).
Gradients are whole numbers, so every worker can check the sum exactly.

Run it in the sandbox:
  scripts/softroce run -- sh -c 'PYTHONPATH=build/python examples/python/param_server.py both "$RK_ADDR"'
"""
import argparse
import errno
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np

import rdmakit
from rdmakit import READ, WRITE, Read, Write

JOIN, DESC, SUM, BYE = 1, 2, 3, 4
TOKEN = 16  # bytes: Xfer.connect's token


def gradient(w, r, k):
    return ((np.arange(k, dtype=np.int64) * (w + 3) + r * 7) % 1000).astype(np.float32)


def server(dev, a):
    n, k = a.workers, a.size
    x = rdmakit.Xfer(dev)
    lis = x.listen(a.port + 1, addr=a.addr, mode="event")  # its waits sleep, not spin
    slots = np.zeros((n, k), dtype=np.float32)     # worker w WRITEs row w
    total = np.zeros(k, dtype=np.float32)          # every worker READs it
    total_seg = x.register(total, READ)
    slot_segs = [x.register(slots[w], WRITE) for w in range(n)]
    byes, lock = queue.Queue(), threading.Lock()
    descs, done, waiting = {}, [0], {}  # deferred requests by worker (DESC), by round (SUM)
    tokens = {}  # a worker's token -> its index
    srv = rdmakit.RpcServer(dev, a.port, addr=a.addr)
    srv.add(BYE, lambda req: byes.put(req.defer()))

    @srv.handler(JOIN)
    def join(req):  # the next index, and the token its lanes must show
        with lock:
            if len(tokens) == n:
                raise rdmakit.HandlerError(-errno.EBUSY, b"full")
            token = os.urandom(TOKEN)
            tokens[token] = len(tokens)
            return b"%d " % tokens[token] + token

    @srv.handler(DESC)
    def desc(req):  # the descriptors once exported to the worker's peer
        with lock:
            if int(req.data) in descs:
                return descs[int(req.data)]
            waiting[("desc", int(req.data))] = [req.defer()]

    @srv.handler(SUM)
    def ready(req):  # answered once round r is summed
        with lock:
            if int(req.data) > done[0]:
                waiting.setdefault(int(req.data), []).append(req.defer())

    def publish(key, answer):
        for req in waiting.pop(key, []):
            req.reply(answer)

    srv.start()
    peers = {}
    until = time.monotonic() + 60
    while len(peers) < n:  # in any order: each peer is the worker whose token it shows
        p = lis.accept(max(0.1, until - time.monotonic()))
        with lock:
            w = tokens.get(p.token)
        if w is None or w in peers:
            print("server: lanes from %s without a worker's token: closed" % p.name, flush=True)
            p.close()
            continue
        peers[w] = p
        d1, d2 = slot_segs[w].export(p), total_seg.export(p)
        with lock:
            descs[w] = bytes([len(d1)]) + d1 + d2
            publish(("desc", w), descs[w])
    for r in range(1, a.rounds + 1):
        for w, p in sorted(peers.items()):
            v = p.notif_wait(60)  # worker w's gradient of round v has landed
            assert v == r, "worker %d sent round %d in round %d" % (w, v, r)
        np.sum(slots, axis=0, out=total)
        with lock:
            done[0] = r
            publish(r, b"ok")
        print("server: round %d: %d gradients of %d floats summed" % (r, n, k), flush=True)
    for _ in range(n):  # the workers' last READs are done
        byes.get(timeout=60).reply(b"")
    until = time.monotonic() + 10
    while srv.stats()["conns"] and time.monotonic() < until:  # the answers reach them
        time.sleep(0.05)
    srv.close()
    x.close()


def worker(dev, a):
    k = a.size
    with rdmakit.RpcClient(dev, a.addr, a.port) as c:
        j = c.call(JOIN, timeout=60)
        w, token = int(j[:-TOKEN - 1]), j[-TOKEN:]
        x = rdmakit.Xfer(dev)
        peer = x.connect(a.addr, a.port + 1, lanes=2, token=token)
        d = c.call(DESC, b"%d" % w, timeout=60)
        slot, total = peer.import_remote(d[1:1 + d[0]]), peer.import_remote(d[1 + d[0]:])
        grad, out = np.zeros(k, dtype=np.float32), np.zeros(k, dtype=np.float32)
        gseg, oseg = x.register(grad, 0), x.register(out, 0)
        for r in range(1, a.rounds + 1):
            grad[:] = gradient(w, r, k)
            peer.post(Write(gseg, slot), notify=r).wait()      # push, one-sided
            c.call(SUM, b"%d" % r, timeout=60)                  # the sum of round r is ready
            peer.post(Read(oseg, total)).wait()                 # pull, one-sided
            want = sum(gradient(i, r, k) for i in range(a.workers))
            if not np.array_equal(out, want):
                raise SystemExit("worker %d round %d: wrong sum" % (w, r))
        x.close()
        c.call(BYE)
        print("worker %d: %d rounds, every sum exact" % (w, a.rounds), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("role", choices=["server", "worker", "both"])
    ap.add_argument("addr")
    ap.add_argument("--port", type=int, default=7728, help="RPC port; the lanes use port + 1")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1 << 18, help="floats per gradient")
    a = ap.parse_args()
    with rdmakit.Device(addr=a.addr) as dev:
        if a.role == "worker":
            return worker(dev, a)
        procs = []
        if a.role == "both":
            args = [sys.executable, __file__, "worker", a.addr, "--port", str(a.port),
                    "--size", str(a.size), "--rounds", str(a.rounds), "--workers",
                    str(a.workers)]
            procs = [subprocess.Popen(args) for _ in range(a.workers)]
        server(dev, a)
        if any([p.wait(60) for p in procs]):
            raise SystemExit("a worker failed")
        if procs:
            print("%d workers, %d rounds: every sum exact" % (a.workers, a.rounds))


if __name__ == "__main__":
    main()
