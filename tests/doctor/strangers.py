#!/usr/bin/env python3
"""Strangers at rk doctor --listen, kept up until OUT/stop exists (or SECONDS pass).

usage: strangers.py HOST PORT OUT SECONDS
       strangers.py hold HOST PORT OUT SECONDS

Kinds, each (but cut, sent once) reconnecting AGAIN_S after the listener lets it go:
  idle     IDLE connections that send nothing
  slow     a frame header for 32 bytes, then one byte every 0.4 s
  garbage  an HTTP request
  wrong    a well-formed rk doctor hello with a wrong token
  none     a well-formed rk doctor hello without a token
  huge     a frame header announcing 1 GiB
  cut      a hello's header and 10 of its 32 bytes, then our side closed
Everything a kind receives is appended to OUT/KIND; OUT/report has a line a kind,
"KIND closed N held_ms MS": how many of its connections the listener closed, and
the longest it held one.
Prints "ready" once every kind has connected.

hold: once OUT/go exists, an rk doctor client that says hello (no token), writes
what it gets to OUT/holder, and then sends nothing more, until OUT/stop exists or
SECONDS pass.
"""
import json
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rk_frame  # noqa: E402

IDLE = 16  # with the slow one, more than the listener keeps waiting (16)
AGAIN_S = 0.5  # back this long after the listener let go (the log shows 20 a second)


HELLO = 5  # the hello's frame type (doctor_wire.h)


def hello(token):
    body = json.dumps({"v": 3, "t": "hello", "token": token}).encode()
    return rk_frame.frame(rk_frame.DOCTOR, HELLO, body)


FIRST = {
    "idle": b"",
    "slow": rk_frame.header(rk_frame.DOCTOR, HELLO, 32),
    "garbage": rk_frame.hostile(rk_frame.DOCTOR, HELLO)["garbage"],
    "wrong": hello(os.urandom(16).hex()),
    "none": hello(""),
    "huge": b"RKDR\x40\x00\x00\x00",  # 1 GiB, judged from its length alone
    "cut": rk_frame.header(rk_frame.DOCTOR, HELLO, 32) + b"x" * 10,
}
CLOSE_AFTER = ("cut",)  # our side closed once sent: a truncated frame, then EOF


def hold(host, port, out, seconds):
    os.makedirs(out, exist_ok=True)
    end = time.monotonic() + seconds
    while not os.path.exists(os.path.join(out, "go")):  # started early: python is slow to start
        if time.monotonic() > end:
            return
        time.sleep(0.05)
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(hello(""))
    got = b""
    s.settimeout(0.1)
    print("ready", flush=True)
    while time.monotonic() < end and not os.path.exists(os.path.join(out, "stop")):
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        got += data
        with open(os.path.join(out, "holder"), "wb") as f:
            f.write(got)
    s.close()


def main():
    if sys.argv[1] == "hold":
        hold(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
        return
    host, port, out, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    # cut first and once: it lets go of itself, and coming back it would take the slots the
    # slow one needs to be timed out (rather than dropped as the oldest) and told so
    kinds = ["cut"] + ["idle"] * IDLE + ["slow", "garbage", "wrong", "none", "huge"]
    conns = {}  # socket -> [kind, opened at, last slow byte at]
    again = []  # [time, kind]: reconnect then
    closed = {k: 0 for k in FIRST}
    held = {k: 0.0 for k in FIRST}
    files = {k: open(os.path.join(out, k), "ab") for k in FIRST}

    def connect(kind):
        try:
            s = socket.create_connection((host, port), timeout=5)
        except OSError:
            return
        if FIRST[kind]:
            s.sendall(FIRST[kind])
        if kind in CLOSE_AFTER:
            s.shutdown(socket.SHUT_WR)
        s.setblocking(False)
        conns[s] = [kind, time.monotonic(), time.monotonic()]

    for k in kinds:
        connect(k)
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not os.path.exists(os.path.join(out, "stop")):
        r, _, _ = select.select(list(conns), [], [], 0.1)
        now = time.monotonic()
        for s in r:
            kind, opened, _ = conns[s]
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data:
                files[kind].write(data)
                files[kind].flush()
                continue
            closed[kind] += 1
            held[kind] = max(held[kind], now - opened)
            del conns[s]
            s.close()
            if kind not in CLOSE_AFTER:
                again.append([now + AGAIN_S, kind])
        for a in [a for a in again if a[0] <= now]:
            again.remove(a)
            connect(a[1])
        for s, c in list(conns.items()):
            if c[0] == "slow" and now - c[2] >= 0.4:
                c[2] = now
                try:
                    s.send(b" ")
                except OSError:
                    pass
    for s in conns:
        s.close()
    with open(os.path.join(out, "report"), "w") as f:
        for k in FIRST:
            f.write("%s closed %d held_ms %d\n" % (k, closed[k], held[k] * 1000))


if __name__ == "__main__":
    main()
