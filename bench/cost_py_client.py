"""cost_py_client - bench/cost's Python side: N RPC calls of 64 B from Python.

usage: python3 bench/cost_py_client.py ADDR PORT N [MODE]

It prints "ready" once the interpreter, the binding and the device are up,
and connects when a line comes on its standard input: example 09's server
gives up after a few idle seconds, less than a Python start under callgrind.

Calls method 1 (example 09's "upper") N times with 64 bytes through
rdmakit.RpcClient.call() and then method 2 (its "bye"), against example
09's server (bench/cost starts it). What it does per call is what a Python
user's loop does: one call() with a bytes object, its answer returned as
bytes. The import and the connection are constant work, which the slope
between two N drops.
"""
import sys

import rdmakit


def main():
    addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "busy"
    msg = b"m" * 64
    with rdmakit.Device(addr=addr) as dev:
        print("ready", flush=True)
        sys.stdin.readline()
        with rdmakit.RpcClient(dev, addr, port, mode=mode) as c:
            run(c, msg, n)
    return 0


def run(c, msg, n):
    call = c.call
    for _ in range(n):
        call(1, msg)
    c.call(2)


if __name__ == "__main__":
    sys.exit(main())
