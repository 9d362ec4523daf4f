#!/usr/bin/env python3
"""Sandbox tests of rk matrix: matrix_test.py RK CASE

mpi (one host): mpirun -np 4 on the one device, --intra: every pair
measured (both bandwidths, latency median <= p99), the JSON parses and
names every rank, the PNG is written; ranks started with different
parameters are refused at the rendezvous, naming the parameter; without a
launcher, the error names the variables looked for.

Timing is never asserted: the flags' thresholds are the product's.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

RK, CASE = sys.argv[1], sys.argv[2]
ADDR = os.environ.get("RK_ADDR")
DEV = os.environ.get("RK_DEV")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp",
          "--mca", "pml", "ob1"]
SHORT = ["--duration", "1", "--lat-duration", "1", "--watchdog", "10", "--wait", "60"]
failures = []


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
    rc, out = run([*MPIRUN, "-np", "4", "-x", "RK_MATRIX_ADDR=" + ADDR, RK, "matrix", "--intra",
                   "--no-retest", *SHORT, "--json", js, "--plot", png], 150)
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

    # Two ranks that disagree on the duration: rank 1 is refused, naming it.
    rc, out = run([*MPIRUN, "-x", "RK_MATRIX_ADDR=" + ADDR, "-np", "1", RK, "matrix",
                   "--intra", *SHORT, ":", "-np", "1", RK, "matrix", "--intra", *SHORT,
                   "--duration", "2"], 120)
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
           "--watchdog", "4", "--wait", "12"]
    procs = [subprocess.Popen(cmd + (["--json", js] if r == 0 else []),
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


CASES = {"mpi": case_mpi, "failures": case_failures}
if __name__ == "__main__":
    if not ADDR or not DEV:
        sys.exit("matrix_test: needs RK_ADDR and RK_DEV (scripts/softroce run)")
    CASES[CASE]()
    if failures:
        sys.exit("%d failure(s)" % len(failures))
    print("matrix_test %s: ok" % CASE)
