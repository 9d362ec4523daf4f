#!/usr/bin/env python3
"""Sandbox tests of rk matrix: matrix_test.py RK CASE

mpi (one host): mpirun -np 4 on the one device, --intra: every pair
measured (both bandwidths, latency median <= p99), the JSON parses and
names every rank, the PNG is written; ranks started with different
parameters are refused at the rendezvous, naming the parameter; without a
launcher, the error names the variables looked for.

failures: a rank that never joins and one killed are reported, the rest
measured.

strangers: a real 3-rank matrix (--token-file) while strangers knock at
rank 0's rendezvous (a free rank, wrong parameters, rank 1 before the
real one, a forged address, a forged result, a wrong token, protocol 1, a
huge frame, the control channel's hostile frames (truncated then closed,
oversized, garbage, silent), a protocol 2 rank's frame, 40 silent
connections) and at the pairs' bench ports (bytes
that are no PARAMS of the pair): every one is refused and logged, the job
ends with every pair measured, sane figures and exit 0. Without a token
rk matrix refuses to start, naming --token-file; --no-auth says so loudly.

impostor: a port of rank 1's held by someone without the pair's key
before rank 1 listens: rank 0 connects there, gets no proof, measures
nothing against it; the pair is failed, naming why.

Timing is never asserted: the flags' thresholds are the product's.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import matrix_stranger as stranger  # noqa: E402
import rk_frame  # noqa: E402

RK, CASE = sys.argv[1], sys.argv[2]
ADDR = os.environ.get("RK_ADDR")
DEV = os.environ.get("RK_DEV")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp",
          "--mca", "pml", "ob1"]
SHORT = ["--duration", "1", "--lat-duration", "1", "--watchdog", "10", "--wait", "60"]
failures = []


def token_file():
    """The job's secret, as every rank is given it (owner-only, as rk matrix insists)."""
    fd, path = tempfile.mkstemp(prefix="rkmx-token.")
    os.write(fd, os.urandom(24).hex().encode() + b"\n")
    os.close(fd)
    os.chmod(path, 0o600)
    return path


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def run(cmd, timeout):
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    print("$ %s\n%s(exit %d, %.1f s)" % (" ".join(cmd), p.stdout, p.returncode,
                                         time.monotonic() - t), flush=True)
    return p.returncode, p.stdout


def check_doc(path, n, pairs_expected, dev=None):
    """The JSON document: every expected pair measured both ways, figures sane."""
    with open(path) as f:
        doc = json.load(f)
    if doc["ranks_n"] != n or len(doc["ranks"]) != n:
        fail("JSON: %d ranks, expected %d" % (doc["ranks_n"], n))
    for r in doc["ranks"]:
        if not r["joined"] or r["error"] or (dev and r["dev"] != dev):
            fail("JSON: rank %s: %r" % (r["rank"], r))
    got = {(p["a"], p["b"]): p for p in doc["pairs"]}
    if set(got) != set(pairs_expected):
        fail("JSON: pairs %s, expected %s" % (sorted(got), sorted(pairs_expected)))
    for (a, b), p in got.items():
        m = p["measured"]
        if not p["ok"] or p["error"]:
            fail("pair %d-%d not measured: %r" % (a, b, p))
            continue
        if not (m["bw_ab_gbps"] > 0 and m["bw_ba_gbps"] > 0):
            fail("pair %d-%d: bandwidth %r" % (a, b, m))
        if not (0 < m["lat_median_us"] <= m["lat_p99_us"]):
            fail("pair %d-%d: latency %r" % (a, b, m))
        if p["host_a"] == "" or p["host_b"] == "":
            fail("pair %d-%d: host names missing" % (a, b))
    return doc


def case_mpi():
    w = tempfile.mkdtemp()
    js, png = os.path.join(w, "m.json"), os.path.join(w, "m.png")
    # No launcher: the error names what it looked for.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "RK_MATRIX"))}
    p = subprocess.run([RK, "matrix"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env, timeout=30)
    if p.returncode != 1 or "SLURM_PROCID" not in p.stdout or "OMPI_COMM_WORLD_RANK" not in p.stdout:
        fail("no launcher: exit %d, %r" % (p.returncode, p.stdout))

    # Retests are matrix_slurm's: here every pair runs once (4 ranks on 2 CPUs contend).
    tok = ["--token-file", token_file()]
    rc, out = run([*MPIRUN, "-np", "4", "-x", "RK_MATRIX_ADDR=" + ADDR, RK, "matrix", "--intra",
                   "--no-retest", *SHORT, *tok, "--json=" + js, "--plot", png], 150)
    if rc != 0:
        fail("mpirun -np 4: exit %d" % rc)
    if "from\\to" not in out:
        fail("no text matrix")
    if os.path.exists(js):
        doc = check_doc(js, 4, [(a, b) for a in range(4) for b in range(a + 1, 4)], DEV)
        if doc["rounds"] != 3:
            fail("4 ranks: %d rounds, expected 3" % doc["rounds"])
    else:
        fail("no JSON written")
    with open(png, "rb") if os.path.exists(png) else open(os.devnull, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            fail("no PNG written")

    # Two ranks that disagree on the duration: rank 1 is refused, naming it. (Each app
    # context of an MPMD line has its own environment: the rendezvous goes on both.)
    rdv = ["--rendezvous", ADDR]
    rc, out = run([*MPIRUN, "-np", "1", RK, "matrix", "--intra", *SHORT, *tok, *rdv, ":",
                   "-np", "1", RK, "matrix", "--intra", *SHORT, *tok, *rdv, "--duration", "2"],
                  120)
    if rc == 0 or "parameter mismatch: duration: rank 0 1, rank 1 2" not in out or \
            "rank 0 refused this rank" not in out:
        fail("parameter mismatch not refused: exit %d" % rc)


def case_failures():
    w = tempfile.mkdtemp()
    js = os.path.join(w, "f.json")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_"))}
    env.update(SLURM_NTASKS="4", RK_MATRIX_ADDR=ADDR)
    cmd = [RK, "matrix", "--intra", "--no-retest", "--duration", "1", "--lat-duration", "1",
           "--watchdog", "4", "--wait", "12", "--token-file", token_file()]
    procs = [subprocess.Popen(cmd + (["--json=" + js] if r == 0 else []),
                              env=dict(env, SLURM_PROCID=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(3)]
    time.sleep(8)  # rank 2 has joined (rank 0 waits up to --wait for rank 3)
    procs[2].kill()
    outs = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            fail("rank %d did not end" % r)
        outs.append(out)
        print("--- rank %d (exit %s)\n%s" % (r, p.returncode, out), flush=True)
    if procs[0].returncode != 1:
        fail("rank 0: exit %s, expected 1 (pairs failed)" % procs[0].returncode)
    if not os.path.exists(js):
        fail("no JSON written")
        return
    with open(js) as f:
        doc = json.load(f)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    if ranks[3]["joined"] or "never joined" not in (ranks[3]["error"] or ""):
        fail("rank 3: %r" % ranks[3])
    if not ranks[2]["joined"] or not ranks[2]["error"]:
        fail("rank 2 (killed): %r" % ranks[2])
    pairs = {(p["a"], p["b"]): p for p in doc["pairs"]}
    if sorted(pairs) != [(a, b) for a in range(4) for b in range(a + 1, 4)]:
        fail("pairs: %s" % sorted(pairs))
    for (a, b), p in sorted(pairs.items()):
        if (a, b) == (0, 1):
            if not p["ok"] or p["error"]:
                fail("pair 0-1 not measured: %r" % p)
            continue
        gone = [r for r in (a, b) if r in (2, 3)]
        if p["ok"] or not any("rank %d " % r in (p["error"] or "") for r in gone):
            fail("pair %d-%d: %r, expected a failure naming rank %s" % (a, b, p, gone))
        if a != 2 and b == 3 and "never joined" not in p["error"]:
            fail("pair %d-3: %r, expected 'never joined'" % (a, p["error"]))
    if "pairs measured" not in outs[0] or "failed" not in outs[0]:
        fail("rank 0's report: %r" % outs[0][-500:])


def knock_bench_ports(base, n, stop, counts):
    """At every leg's bench port while the matrix runs: a PARAMS frame (rk bench's control
    channel, type 1) whose token is not the pair's key, bytes that are no frame, and the
    control channel's hostile frames (truncated, oversized, garbage)."""
    hostile = rk_frame.hostile(rk_frame.BENCH, 1)
    sends = [rk_frame.frame(rk_frame.BENCH, 1, os.urandom(84 + 16)), os.urandom(96),
             hostile["truncated"], hostile["oversized"], hostile["garbage"]]
    k = 0
    while not stop.is_set():
        for port in range(base, base + 3 * n):
            k += 1
            try:
                with socket.create_connection((ADDR, port), timeout=1) as s:
                    s.sendall(sends[k % len(sends)])
                    counts[0] += 1
            except OSError:
                pass
        time.sleep(0.3)


def case_strangers():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "RK_MATRIX"))}
    rdv_port = 18596
    env.update(SLURM_NTASKS="3", RK_MATRIX_ADDR="%s:%d" % (ADDR, rdv_port))
    base = ["--intra", "--no-retest", "--duration", "1", "--lat-duration", "1",
            "--watchdog", "10", "--wait", "60", "--port", "20300"]

    # Without a proof of any kind rk matrix does not start, and says how to give one.
    p = subprocess.run([RK, "matrix", *base], env=dict(env, SLURM_PROCID="1"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if p.returncode != 1 or "--token-file" not in p.stdout or "--no-auth" not in p.stdout:
        fail("no token: exit %d, %r" % (p.returncode, p.stdout))
    p = subprocess.run([RK, "matrix", *base, "--no-auth", "--wait", "1"],
                       env=dict(env, SLURM_PROCID="1", RK_MATRIX_ADDR="127.0.0.1:9"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if "WARNING: --no-auth" not in p.stdout:
        fail("--no-auth not said loudly: %r" % p.stdout)

    w = tempfile.mkdtemp()
    js = os.path.join(w, "s.json")
    cmd = [RK, "matrix", *base, "--token-file", token_file()]

    def start(r, extra=()):
        return subprocess.Popen(cmd + list(extra), env=dict(env, SLURM_PROCID=str(r)),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs = {0: start(0, ["--json=" + js])}
    host, port = ADDR, rdv_port
    forged = {"t": "result", "round": 0, "dev": "rxe0",
              "legs": [{"status": 0, "v": [999999.0, 0], "why": ""}] * 3}
    wrong_token = {"auth": "token", "token": os.urandom(24).hex()}
    knocks = [
        ("free rank", stranger.hello(2, 3), "not authenticated"),
        ("wrong parameters", stranger.hello(1, 3, params={"duration": 7}), "not authenticated"),
        ("rank 1 first", stranger.hello(1, 3, **wrong_token), "not authenticated"),
        ("forged address", stranger.hello(2, 3, addr="127.0.0.66", **wrong_token),
         "not authenticated"),
        ("protocol 1", stranger.hello(1, 3, proto=1), "protocol 1"),
    ]
    answers = []
    try:
        for what, h, expect in knocks:
            got = stranger.knock(host, port, h)
            answers.append((what, got))
            if expect not in got:
                fail("stranger (%s): %r, expected a refusal with %r" % (what, got, expect))
        got = stranger.knock(host, port, stranger.hello(1, 3), after=[forged] * 3)
        if "not authenticated" not in got:
            fail("stranger (forged result): %r" % got)
        got = stranger.knock(host, port, b"RKMX\xff\xff\xff\xff")
        if got != "closed":
            fail("stranger (huge frame): %r" % got)
        # The control channel's hostile frames, and a protocol 2 rank's (no type byte):
        # each let go at once (the silent one within rank 0's 5 s for a hello), unanswered.
        kinds = rk_frame.hostile(rk_frame.MATRIX, stranger.MX_FRAME_JSON)
        kinds["older"] = b"RKMX" + struct.pack(">I", 2) + b"{}"
        for kind, data in sorted(kinds.items()):
            secs, got = rk_frame.knock(host, port, data, close=kind == "truncated", wait=20)
            answers.append((kind, secs, got))
            if secs is None or secs > 15 or got:
                fail("stranger (%s): let go after %s s, answered %r" % (kind, secs, got))
        # Silent ones: more than rank 0 keeps, none may stop the real ranks.
        silent = [socket.create_connection((host, port), timeout=5) for _ in range(40)]
        stop, counts = threading.Event(), [0]
        t = threading.Thread(target=knock_bench_ports, args=(20300, 3, stop, counts), daemon=True)
        t.start()
        procs[1] = start(1)
        procs[2] = start(2)
        outs = {}
        for r, p in sorted(procs.items()):
            try:
                outs[r], _ = p.communicate(timeout=200)
            except subprocess.TimeoutExpired:
                p.kill()
                outs[r], _ = p.communicate()
                fail("rank %d did not end" % r)
        stop.set()
        t.join()
        for s in silent:
            s.close()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    for r in sorted(outs):
        print("--- rank %d (exit %s)\n%s" % (r, procs[r].returncode, outs[r]), flush=True)
        if procs[r].returncode != 0:
            fail("rank %d: exit %s, expected 0" % (r, procs[r].returncode))
    print("strangers: %r; %d knocks at bench ports" % (answers, counts[0]), flush=True)
    log = outs.get(0, "")
    refusals = [ln for ln in log.splitlines() if "rk matrix: rendezvous: refused" in ln]
    # Five hellos, the forged result's hello, the huge frame, 8 silent ones dropped.
    if len(refusals) < 15 or not all(ADDR + ":" in ln for ln in refusals):
        fail("rank 0 logged %d refusals with the peer's address, expected 15 or more"
             % len(refusals))
    for what in ("a wrong token", "a proof of kind none", "protocol 1",
                 "a frame of 4294967295 bytes", "without a hello",
                 "a frame of 2147483647 bytes", 'not rk matrix: it sent "GET / HT"',
                 "closed the connection in the middle of a message",
                 "version mismatch: the peer speaks rk matrix protocol 2 or older"):
        if what not in log:
            fail("rank 0's log does not name %r" % what)
    # Whether a knock falls in a leg's short wait for its client is chance: counted, not asserted
    # (every one that did must have been turned away, or a leg would have failed).
    print("bench ports: %d strangers turned away" % "".join(outs.values()).count("turning away"))
    if "999999" in log:
        fail("a forged figure is in the report")
    if not os.path.exists(js):
        fail("no JSON written")
        return
    doc = check_doc(js, 3, [(0, 1), (0, 2), (1, 2)], DEV)
    for p in doc["pairs"]:
        m = p["measured"]
        if max(m["bw_ab_gbps"], m["bw_ba_gbps"]) > 1000:
            fail("pair %d-%d: a forged figure %r" % (p["a"], p["b"], m))
    for r in doc["ranks"]:
        if r["addr"] == "127.0.0.66" or r["host"] == "stranger":
            fail("rank %d: a stranger's claim %r" % (r["rank"], r))


def impostor(port, stop, seen):
    """rk bench's server side at @port, as someone who holds the port but not the pair's key:
    takes PARAMS and answers ACCEPT with a proof of zeros."""
    ls = socket.create_server((ADDR, port))
    ls.settimeout(0.5)
    with ls:
        while not stop.is_set():
            try:
                s, _ = ls.accept()
            except OSError:
                continue
            with s:
                s.settimeout(5)
                try:
                    f = rk_frame.read_frame(s, rk_frame.BENCH)
                    if f:
                        seen.append(f[1])
                        s.sendall(rk_frame.frame(rk_frame.BENCH, 2, bytes(16)))  # ACCEPT
                        s.recv(1)
                except (OSError, ValueError):
                    pass


def case_impostor():
    """A port of rank 1's taken before rank 1 listens there: rank 0 connects to whoever holds
    it, finds no proof and measures nothing; the pair is reported failed, naming why."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "RK_MATRIX"))}
    env.update(SLURM_NTASKS="2", RK_MATRIX_ADDR="%s:%d" % (ADDR, 18597))
    w = tempfile.mkdtemp()
    js = os.path.join(w, "i.json")
    base = 20320
    cmd = [RK, "matrix", "--intra", "--no-retest", "--duration", "1", "--lat-duration", "1",
           "--watchdog", "4", "--wait", "30", "--port", str(base), "--token-file", token_file()]
    stop, seen = threading.Event(), []
    # Rank 1 serves the a->b bandwidth leg on base + 3 x 1 + 0.
    t = threading.Thread(target=impostor, args=(base + 3, stop, seen), daemon=True)
    t.start()
    time.sleep(0.5)
    procs = [subprocess.Popen(cmd + (["--json=" + js] if r == 0 else []),
                              env=dict(env, SLURM_PROCID=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            fail("rank %d did not end" % r)
        outs.append(out)
        print("--- rank %d (exit %s)\n%s" % (r, p.returncode, out), flush=True)
    stop.set()
    t.join()
    if not seen:
        fail("the impostor got no PARAMS: rank 0 never connected to it")
    if procs[0].returncode != 1:
        fail("rank 0: exit %s, expected 1 (the pair failed)" % procs[0].returncode)
    if not os.path.exists(js):
        fail("no JSON written")
        return
    with open(js) as f:
        doc = json.load(f)
    p = doc["pairs"][0]
    if p["ok"] or "did not prove it is the peer of this pair" not in (p["error"] or ""):
        fail("pair 0-1: %r, expected a failure naming the missing proof" % p)
    if p["measured"]["bw_ab_gbps"]:
        fail("pair 0-1: a figure measured against the impostor: %r" % p["measured"])


CASES = {"mpi": case_mpi, "failures": case_failures, "strangers": case_strangers,
         "impostor": case_impostor}
if __name__ == "__main__":
    if not ADDR or not DEV:
        sys.exit("matrix_test: needs RK_ADDR and RK_DEV (scripts/softroce run)")
    CASES[CASE]()
    if failures:
        sys.exit("%d failure(s)" % len(failures))
    print("matrix_test %s: ok" % CASE)
