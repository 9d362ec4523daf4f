#!/usr/bin/env python3
"""tool_sources_guard.py SOURCE_DIR BUILD_DIR - each rk source compiled once.

Every tools/rk/**/*.c file belongs to exactly one target: the static
library of its folder (rk_tool_common, rk_tool_copy, rk_tool_bench,
rk_tool_doctor, rk_tool_matrix) or rk's own main. rk, the tests and the
fuzz targets link those libraries, so what a test or a fuzz target runs is
the object rk runs, built with the same flags. The build's
compile_commands.json says what was compiled: each file must appear in it
exactly once, and none may be missing.

Documented exceptions:
  - rk-matrix-mpi's main and its MPI start (ONLY_WITH_MPI) are compiled
    only when the build has RK_MPI=ON, and then once;
  - a file outside tools/rk may #include a tools/rk .c file only where
    INCLUDED says why (a private codec a fuzz target reaches).
Outside tools/rk no CMake file names a tools/rk source: a test links the
tool's library instead.
"""
import json
import re
import sys
from pathlib import Path

ONLY_WITH_MPI = {"tools/rk/main_matrix_mpi.c", "tools/rk/matrix/matrix_launch_mpi.c"}
INCLUDED = {}
INCLUDE_C = re.compile(r'^\s*#\s*include\s+"([^"]+\.c)"', re.M)
CMAKE_COMMENT = re.compile(r"#.*$", re.M)


def main():
    src, build = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    tools = src / "tools" / "rk"
    sources = sorted(str(p.relative_to(src)) for p in tools.rglob("*.c"))
    cache = (build / "CMakeCache.txt").read_text()
    mpi = re.search(r"^RK_MPI:BOOL=(ON|TRUE|1|YES)$", cache, re.M | re.I) is not None
    counts = {}
    for e in json.load(open(build / "compile_commands.json")):
        f = (Path(e["directory"]) / e["file"]).resolve()
        if f.is_relative_to(tools):
            rel = str(f.relative_to(src))
            counts[rel] = counts.get(rel, 0) + 1
    bad = []
    for s in sources:
        want = 0 if s in ONLY_WITH_MPI and not mpi else 1
        got = counts.get(s, 0)
        if got != want:
            bad.append(f"{s}: compiled {got} times, not {want} (one target per file: "
                       "its folder's rk_tool_* library, tools/rk/CMakeLists.txt)")
    for s in sorted(set(counts) - set(sources)):
        bad.append(f"{s}: compiled but not found under tools/rk")
    def ours(f):
        """A file of the tree: not in a build directory, not in .git."""
        rel = f.relative_to(src)
        return not (rel.parts[0] == ".git" or rel.parts[0].startswith("build") or
                    f.is_relative_to(build))

    for f in sorted(src.rglob("*.[ch]")):
        if not ours(f) or f.is_relative_to(tools):
            continue
        for m in INCLUDE_C.finditer(f.read_text(errors="replace")):
            inc = (f.parent / m.group(1)).resolve()
            if not inc.is_relative_to(tools):
                continue
            key = (str(f.relative_to(src)), str(inc.relative_to(src)))
            if key not in INCLUDED:
                bad.append(f"{key[0]}: includes {key[1]}: link its rk_tool_* library "
                           "(or say why in INCLUDED)")
    # A tree's top CMakeLists.txt adds tools/rk; no other CMake file names it.
    for f in sorted(src.rglob("CMakeLists.txt")) + sorted(src.rglob("*.cmake")):
        if not ours(f) or f.is_relative_to(tools) or (f.parent / "tools" / "rk").is_dir():
            continue
        text = CMAKE_COMMENT.sub("", f.read_text(errors="replace"))
        if "tools/rk" in text:
            bad.append(f"{f.relative_to(src)}: names a tools/rk path; link the tool's "
                       "rk_tool_* library")
    for b in bad:
        print(b)
    print(f"tool_sources_guard: {len(sources)} files, {sum(counts.values())} compiles, "
          f"RK_MPI {'on' if mpi else 'off'}, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
