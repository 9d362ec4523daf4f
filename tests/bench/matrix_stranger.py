#!/usr/bin/env python3
"""A stranger at rk matrix's rendezvous: hellos no rank of the job sends.

As a module (matrix_test.py): knock(host, port, hello, after) sends one
hello (and the frames in after) and returns what rank 0 answered. As a
command (matrix_slurm.sh):

  matrix_stranger.py HOST PORT RANK SIZE munge CRED-FILE...   a hello with each credential

prints rank 0's answers ("refuse: why", "welcome", or "closed" when it
did not answer) and exits 0 when every one was refused, 1 otherwise.
Every wait is bounded (60 s to connect while rank 0 starts, 10 s for an
answer); only the given address is contacted.
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rk_frame  # noqa: E402

# What every rank sends by default (cmd_matrix.c params_json), version aside.
DEFAULT_PARAMS = {"size": 1048576, "duration": 2, "lat-duration": 1, "bw-frac": 0.9,
                  "lat-mult": 2.0, "intra": False, "quick": False, "retest": True,
                  "pairs": "all", "port": 20000, "watchdog": 10, "poll": "busy"}


MX_FRAME_JSON = 1  # the one frame type (matrix_wire.h)


def frame(obj):
    text = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return rk_frame.frame(rk_frame.MATRIX, MX_FRAME_JSON, text)


def read_frame(s):
    """One frame's object, or None (closed, not a frame)."""
    try:
        f = rk_frame.read_frame(s, rk_frame.MATRIX)
    except ValueError:
        return None
    return None if f is None else json.loads(f[1])


def connect(host, port, wait=60.0):
    """A connection to rank 0, retried while it is not listening yet."""
    end = time.monotonic() + wait
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=10)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def hello(rank, size, addr="127.0.0.66", params=None, proto=3, **proof):
    h = {"t": "hello", "proto": proto, "rank": rank, "size": size, "host": "stranger",
         "addr": addr, "params": dict(DEFAULT_PARAMS, **(params or {}))}
    if not proof:
        proof = {"auth": "none"}
    h.update(proof)
    return h


def knock(host, port, msg, after=()):
    """Send @msg (an object or raw bytes), then @after; rank 0's answer as text."""
    with connect(host, port) as s:
        s.settimeout(10)
        s.sendall(msg if isinstance(msg, bytes) else frame(msg))
        for m in after:
            try:
                s.sendall(frame(m))
            except OSError:
                break
        try:
            a = read_frame(s)
        except (OSError, ValueError):
            a = None
    if a is None:
        return "closed"
    if a.get("t") == "refuse":
        return "refuse: %s" % a.get("why")
    return a.get("t", "?")


def main(argv):
    host, port, rank, size, kind = argv[1:6]
    if kind != "munge" or len(argv) < 7:
        sys.exit("usage: matrix_stranger.py HOST PORT RANK SIZE munge CRED-FILE...")
    rc = 0
    for path in argv[6:]:
        with open(path) as f:
            cred = f.read().strip()
        got = knock(host, port, hello(int(rank), int(size), auth="munge", cred=cred))
        print("stranger as rank %s with %s: %s" % (rank, path, got), flush=True)
        if not got.startswith("refuse"):
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
