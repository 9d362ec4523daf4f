#!/usr/bin/env python3
"""kv_client.py - a client of example 10's block server, in Python (rdmakit).

usage: kv_client.py ADDR [--port P] [--keys N] [--batch B]

It speaks examples/10-kv-cache/kv_wire.h: RPC on PORT for the control
(HELLO, LOOKUP, BYE), and a data lane on PORT + 1 whose rdma_cm hello says
"KVC1" and whose accept carries the lane's ticket. With the descriptor HELLO
answers it READs the blocks of keys 0 .. N - 1 one-sided, B blocks a batch,
into one registered buffer, checks every word, says BYE and shows that a
READ after it is refused by the server's NIC.

Run it in the sandbox against the C server (it serves one client, then exits):
  scripts/softroce run -- sh -c 'build/examples/10-kv-cache/ex10_kv_cache --server \\
      --clients 1 --port 7730 "$RK_ADDR" & sleep 1;
      PYTHONPATH=build/python examples/python/kv_client.py "$RK_ADDR" --port 7730'
"""
import argparse
import errno
import struct
import sys

import rdmakit
from rdmakit import Read

try:
    import numpy as np
except ImportError:  # a bytearray and struct then: slower, the same checks
    np = None

KV_APP_ID = 0x4B564331  # "KVC1"
HELLO, LOOKUP, BYE = 1, 2, 3
BLOCK, LOOKUP_MAX, ABSENT, GOLDEN = 4096, 256, (1 << 64) - 1, 0x9E3779B97F4A7C15
WORDS, M64 = BLOCK // 8, (1 << 64) - 1


def kv_word(key, i):
    """Word i of key's block: key itself for i = 0, else splitmix64's finaliser."""
    if i == 0:
        return key
    x = (key + i * GOLDEN) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def expected(keys):
    """The blocks of ``keys``, one row of WORDS u64 each (numpy)."""
    k = np.array(keys, dtype=np.uint64)[:, None]
    x = k + np.arange(WORDS, dtype=np.uint64) * np.uint64(GOLDEN)  # wraps mod 2**64
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    x[:, 0] = k[:, 0]
    return x


def check(buf, keys):
    """Every word of the blocks just read (block j of ``buf`` holds keys[j])."""
    if np is not None:
        bad = np.nonzero(buf[:len(keys)] != expected(keys))
        if bad[0].size:
            j, i = int(bad[0][0]), int(bad[1][0])
            sys.exit("read: key %d, word %d is wrong" % (keys[j], i))
        return
    for j, key in enumerate(keys):
        got = struct.unpack_from("<%dQ" % WORDS, buf, j * BLOCK)
        for i in range(WORDS):
            if got[i] != kv_word(key, i):
                sys.exit("read: key %d, word %d is wrong" % (key, i))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("addr", help="the server's address")
    ap.add_argument("--port", type=int, default=7550, help="RPC port; the data lane: port + 1")
    ap.add_argument("--keys", type=int, default=300, help="keys 0 .. N - 1 to look up")
    ap.add_argument("--batch", type=int, default=16, choices=range(1, 257), metavar="1..256")
    a = ap.parse_args()
    with rdmakit.Device(peer=a.addr) as dev, rdmakit.Xfer(dev) as x, \
            rdmakit.RpcClient(dev, a.addr, a.port) as rpc:
        # The data lane: our hello, the server's ticket in its accept (8 bytes, maybe padded).
        peer, pdata = x.connect_lane(a.addr, a.port + 1, KV_APP_ID)
        if len(pdata) < 8:
            sys.exit("data lane: the server sent no ticket (%d bytes)" % len(pdata))
        ticket = struct.unpack_from("<Q", pdata)[0]
        try:
            rpc.call(HELLO, struct.pack("<Q", ticket ^ 1))
            sys.exit("hello: a ticket not ours was accepted")
        except rdmakit.RemoteError as e:
            if e.code != errno.ENOENT:
                raise
        print("hello: a ticket the server did not give out is refused")
        ans = rpc.call(HELLO, struct.pack("<Q", ticket))
        bsize, nblocks = struct.unpack_from("<II", ans)
        remote = peer.import_remote(ans[8:])  # checked by the library: hostile until then
        if bsize != BLOCK or remote.length < nblocks * BLOCK:
            sys.exit("hello: %u blocks of %u bytes in a %d-byte segment" %
                     (nblocks, bsize, remote.length))
        print("hello: a descriptor of %d bytes, %s, %u blocks of %u bytes" %
              (len(ans) - 8, "READ only" if remote.access == rdmakit.READ else remote.access,
               nblocks, bsize))

        where, calls = {}, 0
        for lo in range(0, a.keys, LOOKUP_MAX):
            keys = list(range(lo, min(a.keys, lo + LOOKUP_MAX)))
            ans = rpc.call(LOOKUP, struct.pack("<%dQ" % len(keys), *keys))
            calls += 1
            if len(ans) != 8 * len(keys):
                sys.exit("lookup: %d bytes for %d keys" % (len(ans), len(keys)))
            for k, off in zip(keys, struct.unpack("<%dQ" % len(keys), ans)):
                if off != ABSENT:
                    if off % BLOCK or off + BLOCK > remote.length:
                        sys.exit("lookup: key %d at offset %d, not a block" % (k, off))
                    where[k] = off
        print("lookup: %d keys in %d call%s: %d present, %d absent" %
              (a.keys, calls, "s" * (calls != 1), len(where), a.keys - len(where)))
        if not where:
            sys.exit("lookup: no key is present")

        # One buffer for a batch of blocks, registered once, for local use only.
        buf = np.zeros((a.batch, WORDS), dtype=np.uint64) if np else bytearray(a.batch * BLOCK)
        seg = x.register(buf, 0)
        present, batches = sorted(where), 0
        for lo in range(0, len(present), a.batch):
            keys = present[lo:lo + a.batch]
            peer.post([Read(seg, remote, BLOCK, local_offset=j * BLOCK,
                            remote_offset=where[k]) for j, k in enumerate(keys)]).wait()
            check(buf, keys)
            batches += 1
        print("read: %d blocks in %d batch%s of up to %d, %d doorbells, all verified" %
              (len(present), batches, "es" * (batches != 1), a.batch, x.stats()["doorbells"]))

        rpc.call(BYE, struct.pack("<Q", ticket))
        calls += 3
        try:
            peer.post(Read(seg, remote, BLOCK, remote_offset=where[present[0]])).wait()
            sys.exit("after bye: the READ was not refused")
        except rdmakit.RemoteAccessError as e:
            print("after bye: the server's NIC refused the READ (%s)" % e)
        peer.close()
        print("client: %d calls, every block checked: OK" % calls)


if __name__ == "__main__":
    main()
