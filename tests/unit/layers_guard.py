#!/usr/bin/env python3
"""layers_guard.py SOURCE_DIR - lib/ calls only into its own layer or below.

The layers are described in lib/rk_internal.h. A function defined in one
lib/*.c file and called from another is a dependency; it must point to the
same layer or a lower one (news travels upward through hooks, never by a
call). Within a layer the files must not call each other in a cycle, so
each can be read and tested from the bottom up; only the files of one
module (MODULES: one unit split by concern, sharing a private header) may.
A new lib/*.c file must be given a layer here.

It also holds the naming rule: a function lib/ defines without `static`
is public when include/rdmakit/ declares it (its name rk_, never rk__),
and private otherwise, its name rk__ (libuv's rule: one prefix for what
users may call, another for what they must not).
"""
import re
import sys
from pathlib import Path

LAYERS = {
    0: "error explain explain_table log time tcp oob hello version xfer_desc xfer_plan xfer_cache xfer_gens",
    1: "device async pd mr slab pool",
    2: "cq",
    3: "conn qp_connect post post_recv_kept recv_prep",
    4: "cm_event cm_client cm_listener",
    5: "wait msgbuf ring_seq ring xfer xfer_import xfer_batch xfer_prep xfer_poll xfer_notif",
    6: "rpc_wire rpc_client rpc_client_call rpc_client_answer rpc_client_sleep rpc_server rpc_server_conn rpc_server_answer rpc_pool_book rpc_pool",
}
layer_of = {f"{n}.c": k for k, names in LAYERS.items() for n in names.split()}
MODULES = {
    "rpc_server": "rpc_server rpc_server_conn rpc_server_answer",  # rpc_server_int.h
    "rpc_client": "rpc_client rpc_client_call rpc_client_answer rpc_client_sleep",  # rpc_client_int.h
    "xfer_batch": "xfer_batch xfer_prep",  # xfer_int.h: a batch holds its prepared batch
}
module_of = {f"{n}.c": m for m, names in MODULES.items() for n in names.split()}


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out

DEF = re.compile(r"^[A-Za-z_][\w \*]*?\b(rk_\w+)\s*\([^;]*$", re.M)
CALL = re.compile(r"\b(rk_\w+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)


def public_names(include):
    names = set()
    for h in sorted(include.glob("*.h")):
        names.update(m.group(1) for m in CALL.finditer(COMMENT.sub(" ", h.read_text())))
    return names


def naming(name, text, public):
    """Problems of the naming rule in one lib/*.c file's text."""
    out = []
    for m in DEF.finditer(text):
        fn = m.group(1)
        if re.match(r"\s*(static|extern)\b", m.group(0)):
            continue
        line = text.count("\n", 0, m.start()) + 1
        if fn in public and fn.startswith("rk__"):
            out.append(f"{name}:{line}: {fn} is in include/rdmakit/ but named as private")
        elif fn not in public and not fn.startswith("rk__"):
            out.append(f"{name}:{line}: {fn} is private (not in include/rdmakit/): "
                       f"name it rk__{fn[3:]}, or make it static")
    return out


INLINE = re.compile(r"^static inline [^(;]*?\b(rk_[a-z]\w*)\s*\(", re.M)


def main():
    lib = Path(sys.argv[1]) / "lib"
    public = public_names(Path(sys.argv[1]) / "include" / "rdmakit")
    defined, bodies, bad = {}, {}, []
    for h in sorted(lib.glob("*.h")):
        text = COMMENT.sub(" ", h.read_text())
        for m in INLINE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{h.name}:{line}: {m.group(1)} is private (a lib/ header): "
                       f"name it rk__{m.group(1)[3:]}")
    for f in sorted(lib.glob("*.c")):
        if f.name not in layer_of:
            bad.append(f"{f.name}: no layer (add it to tests/unit/layers_guard.py)")
            continue
        text = COMMENT.sub(" ", f.read_text())
        bodies[f.name] = text
        for m in DEF.finditer(text):
            defined.setdefault(m.group(1), f.name)
        bad += naming(f.name, text, public)
    edges = {name: set() for name in bodies}
    for name, text in bodies.items():
        for m in CALL.finditer(text):
            callee = defined.get(m.group(1))
            if callee and callee != name:
                edges[name].add(callee)
            if callee and callee != name and layer_of[callee] > layer_of[name]:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{name}:{line}: calls {m.group(1)} of {callee} "
                           f"(layer {layer_of[callee]} above {layer_of[name]})")
    for comp in cycles(edges):
        if len({module_of.get(f, f) for f in comp}) > 1:
            bad.append("a call cycle among " + ", ".join(comp) +
                       " (report upward through a hook, or make them one module)")
    for b in bad:
        print(b)
    print(f"layers_guard: {len(bodies)} files, {len(defined)} functions, "
          f"{len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
