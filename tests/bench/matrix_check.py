#!/usr/bin/env python3
"""matrix_check.py JSON clean|delayed - rk matrix's document from matrix_slurm.sh.

4 ranks, two on each of rk-a and rk-b, --intra: all six pairs measured, the
ranks named by their hosts. clean: no pair flagged. delayed (host B's link
50 ms slower): the four pairs between the hosts flagged, retested alone and
found slow links; the two on one host not flagged.
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
bad = []
hosts = {r["rank"]: r["host"] for r in doc["ranks"]}
if doc["ranks_n"] != 4 or sorted(hosts.values()) != ["rk-a", "rk-a", "rk-b", "rk-b"]:
    bad.append("ranks: %r" % doc["ranks"])
pairs = {(p["a"], p["b"]): p for p in doc["pairs"]}
if sorted(pairs) != [(a, b) for a in range(4) for b in range(a + 1, 4)]:
    bad.append("pairs: %s" % sorted(pairs))
for (a, b), p in sorted(pairs.items()):
    cross = hosts[a] != hosts[b]
    m = p["measured"]
    print("%d (%s) - %d (%s): %s %s %s" % (a, hosts[a], b, hosts[b], m, p["flags"],
                                           p.get("verdict", "")))
    if not p["ok"]:
        bad.append("%d-%d not measured: %s" % (a, b, p["error"]))
    if sys.argv[2] == "clean" and p["flags"]:
        bad.append("%d-%d flagged %s on a clean link" % (a, b, p["flags"]))
    if sys.argv[2] == "delayed":
        if cross and ("lat" not in p["flags"] or p.get("verdict") != "slow link"):
            bad.append("%d-%d crosses to rk-b but is not a flagged slow link" % (a, b))
        if not cross and p["flags"]:
            bad.append("%d-%d stays on %s but is flagged %s" % (a, b, hosts[a], p["flags"]))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
