#!/usr/bin/env python3
"""Sandbox tests of rk bench: bench_test.py RK CASE PORT

Each case starts an rk bench server and client on RK_ADDR (both in this
host), with short runs, and checks behaviour and data, never timing:
counts add up, percentiles are ordered, the JSON parses, refusals name the
parameter, a dead or silent peer ends the client with an error in time.
"""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

RK, CASE, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
ADDR = os.environ.get("RK_ADDR")
DEV = os.environ.get("RK_DEV")
WATCHDOG = 5
CPU_CLOCK_SLACK_S = 0.005  # one scheduler tick and then some
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def start_server(port, args=()):
    """Start a server and wait until it listens (it says so on stderr)."""
    cmd = [RK, "bench", "-d", DEV, "--bind", ADDR, "-p", str(port),
           "--watchdog", str(WATCHDOG), "--wait", "30", *args]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready, _, _ = select.select([srv.stdout], [], [], 20)
    line = srv.stdout.readline() if ready else ""
    if "waiting" not in line:
        fail("server on port %d did not start: %r" % (port, line))
    return srv


def run_pair(port, client_args, server_args=(), timeout=60):
    """Server then client; returns (client rc, client out, server rc, server out)."""
    srv = start_server(port, server_args)
    cmd = [RK, "bench", "--watchdog", str(WATCHDOG), *client_args, "%s:%d" % (ADDR, port)]
    cli = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout)
    try:
        sout, _ = srv.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        sout, _ = srv.communicate()
        fail("server did not exit")
    return cli.returncode, cli.stdout, srv.returncode, sout


def sizes(lo, hi):
    s, out = lo, []
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def device_rd_atomic():
    """The device's limit on READs in flight per QP, from ibv_devinfo -v."""
    out = subprocess.run(["ibv_devinfo", "-d", DEV, "-v"], stdout=subprocess.PIPE,
                         text=True, timeout=30).stdout
    caps = {}
    for line in out.splitlines():
        k, _, v = line.strip().partition(":")
        if k in ("max_qp_rd_atom", "max_qp_init_rd_atom"):
            caps[k] = int(v)
    return min(caps.values())


def check_doc(doc, want_sizes, what):
    """Every record's numbers must be consistent with the parameters."""
    p = doc["params"]
    if p["op"] == "read":
        # READs in flight follow -t up to the device's limit, as the QP got them.
        want = min(p["tx_depth"], device_rd_atomic(), 255)
        if p.get("reads_in_flight") != want:
            fail("%s: %s READs in flight, expected %d" % (what, p.get("reads_in_flight"), want))
    if p.get("clock") not in ("tsc", "clock_gettime") or \
            (p["clock"] == "tsc") != (p.get("clock_mhz", 0) > 0):
        fail("%s: clock %s at %s MHz" % (what, p.get("clock"), p.get("clock_mhz")))
    got = [r["size"] for r in doc["results"]]
    if got != want_sizes:
        fail("%s: sizes %s, expected %s" % (what, got, want_sizes))
    for r in doc["results"]:
        tag = "%s size %d" % (what, r["size"])
        if r["bytes"] != r["iterations"] * r["size"] and p["mode"] == "bw":
            fail("%s: bytes %d != iterations %d x size" % (tag, r["bytes"], r["iterations"]))
        if p["iters_per_qp"]:
            per_dir = p["iters_per_qp"] * p["num_qp"]
            want = per_dir * (2 if p["bidir"] else 1) if p["mode"] == "bw" else p["iters_per_qp"]
            if r["iterations"] != want:
                fail("%s: %d iterations, expected %d" % (tag, r["iterations"], want))
        elif r["iterations"] <= 0:
            fail("%s: no iterations in duration mode" % tag)
        if p["mode"] == "bw":
            if not r["bw_avg_gbps"] > 0 or r["bw_peak_gbps"] < r["bw_avg_gbps"] * 0.999:
                fail("%s: bw avg %g peak %g" % (tag, r["bw_avg_gbps"], r["bw_peak_gbps"]))
            if not r["mpps"] > 0:
                fail("%s: message rate %g" % (tag, r["mpps"]))
            if p["op"] in ("send", "write-imm"):
                rx = r["peer_rx_msgs"] + r["local_rx_msgs"]
                if rx != r["iterations"]:
                    fail("%s: %d messages received of %d" % (tag, rx, r["iterations"]))
        else:
            lat = r["latency_us"]
            order = [lat[k] for k in ("min", "median", "p99", "p99_9", "max")]
            if order != sorted(order) or not order[0] > 0:
                fail("%s: percentiles out of order: %s" % (tag, order))
            if not lat["min"] <= lat["avg"] <= lat["max"] or lat["stdev"] < 0:
                fail("%s: avg %g stdev %g" % (tag, lat["avg"], lat["stdev"]))
            if lat["samples"] != r["iterations"]:
                fail("%s: %d samples, %d iterations" % (tag, lat["samples"], r["iterations"]))
        if r["cpu"]["local_us_per_msg"] < 0 or r["cpu"]["peer_us_per_msg"] < 0:
            fail("%s: negative CPU" % tag)
        # One thread a side: its CPU time cannot exceed the run's wall time
        # by more than the process CPU clock's error. In the sandbox's guest
        # the kernel marks the TSC unstable, and the scheduler's clock then
        # steps by up to a tick (4 ms at HZ=250): a 2.4 ms run read 208 %.
        limit = 105 + 100 * CPU_CLOCK_SLACK_S / max(r["seconds"], 1e-6)
        for side in ("local_pct", "peer_pct"):
            if not 0 <= r["cpu"][side] <= limit:
                fail("%s: CPU %s %g %% over %g s (limit %g %%)"
                     % (tag, side, r["cpu"][side], r["seconds"], limit))


def bench_json(port, args, want_sizes, what, server_args=()):
    with tempfile.TemporaryDirectory(dir=os.environ.get("RK_BUILD")) as d:
        path = os.path.join(d, "out.json")
        rc, out, src, sout = run_pair(port, [*args, "--json", path], server_args)
        if rc != 0 or src != 0:
            fail("%s: client rc %d server rc %d\n%s\n%s" % (what, rc, src, out, sout))
            return None
        with open(path) as f:
            doc = json.load(f)  # a real parser: any syntax error fails here
        check_doc(doc, want_sizes, what)
        return doc


def case_ops(port, combos, extra):
    """Each op x mode at a few small sizes; READ also with a small -t."""
    for op, mode in combos:
        args = ["--op", op, "--mode", mode, "-a", "--max-size", "16", "-n", "32", "-w", "4",
                *extra]
        bench_json(port, args, sizes(2, 16), "%s %s %s" % (op, mode, " ".join(extra)))
        port += 1
    bench_json(port, ["--op", "read", "-t", "8", "-s", "4096", "-n", "64", *extra], [4096],
               "read -t 8 %s" % " ".join(extra))


def case_all(port):
    """-a: one record per size, 2 B .. 8 MiB (tiny counts), and its chart."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("RK_BUILD")) as d:
        png = os.path.join(d, "bw.png")
        doc = bench_json(port, ["-a", "-n", "2", "-w", "0", "--gbits", "--plot", png],
                         sizes(2, 8 << 20), "-a")
        if doc and len(doc["results"]) != 23:
            fail("-a: %d records" % len(doc["results"]))
        if not os.path.exists(png):
            fail("--plot: %s not written" % png)
        else:
            with open(png, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail("--plot: not a PNG")


def case_mismatch(port):
    cases = [
        (["--op", "read"], ["--op", "write"], "op"),
        (["-q", "2"], ["-q", "1"], "num-qp"),
        (["-s", "4096"], ["-s", "64"], "size"),
        (["--oob"], [], "oob"),
    ]
    for srv_args, cli_args, name in cases:
        rc, out, src, sout = run_pair(port, [*cli_args, "-n", "8"], srv_args, timeout=30)
        port += 1
        if rc != 1 or src != 1:
            fail("mismatch %s: client rc %d server rc %d" % (name, rc, src))
        if ("parameter mismatch: %s:" % name) not in out:
            fail("mismatch %s: client does not name it:\n%s" % (name, out))
        if ("parameter mismatch: %s:" % name) not in sout:
            fail("mismatch %s: server does not name it:\n%s" % (name, sout))
    # A value out of range on the command line is named too.
    cli = subprocess.run([RK, "bench", "--batch", "300", "-t", "128", ADDR],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    if cli.returncode != 2 or "batch" not in cli.stdout:
        fail("--batch 300: rc %d, %s" % (cli.returncode, cli.stdout))


def client_vs_dying_server(port, client_args, how, expect):
    srv = start_server(port)
    cmd = [RK, "bench", "--watchdog", str(WATCHDOG), *client_args, "%s:%d" % (ADDR, port)]
    cli = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
    # Hit the server only once the run is under way: the column heading is out.
    # Raw reads: a buffered reader would hide lines from select().
    seen, deadline = b"", time.monotonic() + 30
    while b"iterations" not in seen and time.monotonic() < deadline and cli.poll() is None:
        if select.select([cli.stdout], [], [], 1)[0]:
            seen += os.read(cli.stdout.fileno(), 4096)
    time.sleep(0.5)
    if cli.poll() is not None:
        fail("%s: client ended before the server was hit:\n%s" % (how, seen + cli.stdout.read()))
        srv.kill()
        srv.wait()
        return
    srv.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        out, _ = cli.communicate(timeout=WATCHDOG + 5)
    except subprocess.TimeoutExpired:
        cli.kill()
        out, _ = cli.communicate()
        fail("%s: client still running %d s after the server stopped" % (how, WATCHDOG + 5))
    took = time.monotonic() - t0
    out = (seen + out).decode(errors="replace")
    if how == "stop":
        srv.send_signal(signal.SIGKILL)
    srv.wait()
    print("%s: client exit %s after %.1f s: %s" % (how, cli.returncode, took,
                                                      out.strip().splitlines()[-1:]))
    if cli.returncode in (0, None):
        fail("%s: client exit status %s" % (how, cli.returncode))
    if expect not in out:
        fail("%s: client output lacks '%s':\n%s" % (how, expect, out))


def case_killed(port):
    # Killed: the control connection closes at once.
    client_vs_dying_server(port, ["-D", "30", "-s", "4096"], "kill", "peer")
    # Stopped: nothing closes, nothing answers: the watchdog must end it.
    client_vs_dying_server(port + 1, ["-D", "30", "--mode", "lat", "-s", "64"], "stop",
                           "watchdog")


def case_multiqp(port):
    bench_json(port, ["--num-qp", "4", "--batch", "16", "-n", "256", "-s", "1024"], [1024],
               "num-qp 4 batch 16")
    bench_json(port + 1, ["--op", "send", "--num-qp", "4", "--batch", "16", "-n", "256",
                          "-s", "1024", "--poll", "event"], [1024], "send num-qp 4 event")
    bench_json(port + 2, ["--op", "write-imm", "--bidir", "-q", "2", "-l", "8", "-n", "128",
                          "-s", "512", "--oob", "--poll", "adaptive"], [512], "write-imm bidir")


def case_duration(port):
    bench_json(port, ["-D", "1", "--mode", "lat", "--op", "send", "-s", "64"], [64], "lat -D 1")
    bench_json(port + 1, ["-D", "1", "-s", "65536", "-Q", "7"], [65536], "bw -D 1")


def main():
    if not ADDR or not DEV:
        print("needs RK_ADDR and RK_DEV: run inside scripts/softroce")
        return 1
    ops = ("send", "write", "write-imm", "read")
    if CASE == "ops":
        case_ops(PORT, [(op, mode) for mode in ("bw", "lat") for op in ops], [])
    elif CASE == "ops-oob":
        case_ops(PORT, [("send", "bw"), ("write", "lat"), ("write-imm", "bw"), ("read", "lat")],
                 ["--oob"])
    else:
        {"all": case_all, "mismatch": case_mismatch, "killed": case_killed,
         "multiqp": case_multiqp, "duration": case_duration}[CASE](PORT)
    print("%s: %s" % (CASE, "FAILED (%d)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
