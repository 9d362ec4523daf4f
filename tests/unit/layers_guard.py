#!/usr/bin/env python3
"""layers_guard.py SOURCE_DIR - lib/ calls only into its own layer or below.

The layers are described in lib/rk_internal.h. A function defined in one
lib/*.c file and called from another is a dependency; it must point to the
same layer or a lower one (news travels upward through hooks, never by a
call). A new lib/*.c file must be given a layer here.
"""
import re
import sys
from pathlib import Path

LAYERS = {
    0: "error explain explain_table log time tcp oob hello version",
    1: "device async pd mr slab pool",
    2: "cq",
    3: "conn qp_connect post",
    4: "cm_event cm_client cm_listener",
    5: "wait msgbuf ring_seq ring",
    6: "rpc_wire rpc_client rpc_server rpc_server_conn rpc_server_answer rpc_pool_book rpc_pool",
}
layer_of = {f"{n}.c": k for k, names in LAYERS.items() for n in names.split()}

DEF = re.compile(r"^[A-Za-z_][\w \*]*?\b(rk_\w+)\s*\([^;]*$", re.M)
CALL = re.compile(r"\b(rk_\w+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)


def main():
    lib = Path(sys.argv[1]) / "lib"
    defined, bodies, bad = {}, {}, []
    for f in sorted(lib.glob("*.c")):
        if f.name not in layer_of:
            bad.append(f"{f.name}: no layer (add it to tests/unit/layers_guard.py)")
            continue
        text = COMMENT.sub(" ", f.read_text())
        bodies[f.name] = text
        for m in DEF.finditer(text):
            defined.setdefault(m.group(1), f.name)
    for name, text in bodies.items():
        for m in CALL.finditer(text):
            callee = defined.get(m.group(1))
            if callee and callee != name and layer_of[callee] > layer_of[name]:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{name}:{line}: calls {m.group(1)} of {callee} "
                           f"(layer {layer_of[callee]} above {layer_of[name]})")
    for b in bad:
        print(b)
    print(f"layers_guard: {len(bodies)} files, {len(defined)} functions, "
          f"{len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
