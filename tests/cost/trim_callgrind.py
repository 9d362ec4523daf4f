#!/usr/bin/env python3
"""trim_callgrind - keep only some objects' functions of a callgrind.out file.

usage: trim_callgrind.py IN OUT OBJECT_SUBSTRING...

Writes the header and the blocks (fn= ... up to the next fn=) of the
functions whose object's path holds one of the substrings; a compressed
name first used in a dropped block is written out in full where the kept
text first uses it. Made the test profiles in tests/cost/data from runs
of bench/cost --keep. Positions written relative to the line before
(callgrind's "+3", "-2", "*", as --dump-instr=yes writes them) are written
out absolute first: a kept line may follow a dropped one.
"""
import re
import sys

REF = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn)=\((\d+)\)(?: (.*))?$")
KIND = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
        "fn": "fn", "cfn": "fn"}


POS = re.compile(r"^[0-9+\-*]")


def absolute(lines):
    """The lines with every cost line's positions absolute (instruction
    addresses in hex)."""
    npos, names, last, out = 1, [], [], []
    for line in lines:
        if line.startswith("positions:"):
            names = line.split(":", 1)[1].split()
            npos, last = len(names), [0] * len(names)
        if not names or not POS.match(line):
            out.append(line)
            continue
        tok = line.split()
        for j in range(npos):
            t = tok[j]
            last[j] = last[j] if t == "*" else last[j] + int(t, 0) if t[0] in "+-" else int(t, 0)
            tok[j] = hex(last[j]) if names[j] == "instr" else str(last[j])
        out.append(" ".join(tok))
    return out


def main():
    src, dst, keep = sys.argv[1], sys.argv[2], sys.argv[3:]
    names = {"ob": {}, "fl": {}, "fn": {}}
    written = {"ob": set(), "fl": set(), "fn": set()}
    lines = absolute(open(src).read().splitlines())
    for line in lines:  # every compressed name's text
        m = REF.match(line)
        if m and m.group(3) is not None:
            names[KIND[m.group(1)]][m.group(2)] = m.group(3)
    out, header, block, ob, keep_block = [], True, [], "", False

    def flush():
        if keep_block:
            out.extend(block)

    for line in lines:
        m = REF.match(line)
        if m and m.group(1) == "ob":
            ob = names["ob"].get(m.group(2), "")
        if header and (line.startswith("fn=") or line.startswith("ob=") or line.startswith("fl=")):
            header = False
        if header:
            out.append(line)
            continue
        if line.startswith("totals:"):
            flush()
            block, keep_block = [line], True
            continue
        if line.startswith("fn="):
            flush()
            keep_block = any(k in ob for k in keep)
            block = ["ob=" + "(%s)" % [i for i, t in names["ob"].items() if t == ob][0]
                     if ob else "ob=???"]
        block.append(line)
    flush()
    final = []
    for line in out:
        m = REF.match(line)
        if m:
            kind, ident = KIND[m.group(1)], m.group(2)
            if ident not in written[kind]:
                written[kind].add(ident)
                line = "%s=(%s) %s" % (m.group(1), ident, names[kind].get(ident, "???"))
            elif m.group(3) is not None:
                line = "%s=(%s)" % (m.group(1), ident)
        final.append(line)
    open(dst, "w").write("\n".join(final) + "\n")


if __name__ == "__main__":
    main()
