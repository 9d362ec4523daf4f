#!/usr/bin/env python3
"""echo.py - an RPC echo over RDMA from Python (rdmakit).

usage: echo.py server ADDR [--port P]             serve method 1 (echo) until Ctrl-C
       echo.py client ADDR [--port P] [--count N] [--size BYTES] [--asyncio]
       echo.py both ADDR [...]                    a server and a client in one process

The client calls the echo N times with BYTES of data, checks every answer
and prints the round trip's median. With --asyncio it makes the calls with
``await client.acall()``, all N in flight at once (the client's window
bounds what the library sends; the rest wait their turn), each answer
matched to its caller.

Run it in the sandbox:
  scripts/softroce run -- sh -c 'PYTHONPATH=build/python examples/python/echo.py both "$RK_ADDR"'
"""
import argparse
import asyncio
import statistics
import sys
import time

import rdmakit

ECHO = 1  # method numbers are the application's choice


def serve(dev, addr, port):
    """An echo server: method ECHO answers with the request's data."""
    srv = rdmakit.RpcServer(dev, port, addr=addr)

    @srv.handler(ECHO)
    def echo(req):
        return req.data  # any bytes-like object; copied before the handler returns

    return srv


def client_sync(dev, addr, port, count, size):
    with rdmakit.RpcClient(dev, addr, port) as c:
        rtt = []
        for i in range(count):
            msg = (b"%08d" % i * (size // 8 + 1))[:size]
            t = time.perf_counter()
            answer = c.call(ECHO, msg, max_size=max(size, 1))
            rtt.append(time.perf_counter() - t)
            if answer != msg:
                raise SystemExit("call %d: wrong answer" % i)
        print("%d calls of %d B: round trip median %.1f us" % (count, size,
                                                               statistics.median(rtt) * 1e6))


async def client_async(dev, addr, port, count, size):
    with rdmakit.RpcClient(dev, addr, port, mode="event") as c:
        msgs = [(b"%08d" % i * (size // 8 + 1))[:size] for i in range(count)]
        t = time.perf_counter()
        answers = await asyncio.gather(*[c.acall(ECHO, m, max_size=max(size, 1), timeout=30)
                                         for m in msgs])
        took = time.perf_counter() - t
        if answers != msgs:
            raise SystemExit("asyncio: an answer did not match its call")
        print("%d asyncio calls of %d B in flight: %.0f calls/s, every answer matched" %
              (count, size, count / took))


def main():
    ap = argparse.ArgumentParser(description="RPC echo over RDMA (rdmakit)")
    ap.add_argument("role", choices=["server", "client", "both"])
    ap.add_argument("addr", help="the server's address (RoCE / IPoIB)")
    ap.add_argument("--port", type=int, default=7710)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--asyncio", action="store_true")
    a = ap.parse_args()
    # The device that owns the address (the server's) or routes to it (a client's).
    with rdmakit.Device(**({"addr": a.addr} if a.role != "client" else {"peer": a.addr})) as dev:
        srv = None
        try:
            if a.role in ("server", "both"):
                srv = serve(dev, a.addr, a.port)
                print("echo server on %s port %d (device %s)" % (a.addr, srv.port, dev.name),
                      flush=True)
                if a.role == "server":
                    try:
                        srv.serve()
                    except KeyboardInterrupt:
                        pass
                    return
                srv.start()
            if a.asyncio:
                asyncio.run(client_async(dev, a.addr, a.port, a.count, a.size))
            else:
                client_sync(dev, a.addr, a.port, a.count, a.size)
        except rdmakit.Error as e:
            sys.exit("echo: %s" % e)
        finally:
            if srv is not None:
                srv.close()


if __name__ == "__main__":
    main()
