#!/usr/bin/env python3
"""deps_guard - every external program the tree calls is installed by its scripts.

usage: deps_guard.py SOURCE_DIR [--verbose]

Finds, in the tree itself, the programs that its shell scripts, Makefile
recipes, CMake test commands, Python scripts and C sources run (command
position in shell, subprocess calls in Python, popen/exec/system in C), asks
dpkg which package provides each one, and fails naming every program whose
package the install step for that file would not install:

  everything             scripts/deps --list  +  scripts/softroce deps --list
  scripts/demo, tools/rk/copy/demo-copy.sh, 'make demo' and 'make build' recipes
                         scripts/deps --list --build  +  scripts/softroce deps --list
  bench/                 ... + scripts/deps --list --bench
  scripts/lint, 'make lint' and 'make format' recipes  ... + --lint
  'make fuzz' recipe, fuzz/, scripts/fuzz   ... + --fuzz

A package passes when it is on that list, is pulled in by one on it (Depends
and Pre-Depends, as apt installs them with --no-install-recommends), or is
Essential or of Priority required (present on every Debian system, minimal
container images included).  A program that is not installed at all fails
when every package of its list is installed (so none of them provides it);
when some are not (say --bench was never run), it cannot be judged and is
reported as not checked.

A Python call whose program is computed (say "ib_" + test) must be named in a
'# programs: NAME...' comment in the same file; the guard then checks those.
"""
import ast
import os
import re
import shutil
import subprocess
import sys

SKIP_DIRS = {".git", ".cache", "node_modules"}

# Shell builtins and reserved words: never programs.
BUILTINS = set("""
: . [ [[ ]] alias bg bind break builtin caller cd command compgen complete
continue declare dirs disown echo enable eval exec exit export false fc fg
getopts hash help history jobs kill let local logout mapfile popd printf
pushd pwd read readarray readonly return set shift shopt source suspend test
times trap true type typeset ulimit umask unalias unset wait
if then else elif fi do done while until for case esac in select function
time ! { }
""".split())

# Commands that run another command: (options taking an argument, positional
# arguments before the command).
WRAPPERS = {
    "exec": (set(), 0),
    "command": (set(), 0),
    "nice": ({"-n"}, 0),
    "timeout": ({"-s", "-k", "--signal", "--kill-after"}, 1),
    "env": ({"-u", "-C", "-S"}, 0),
    "setsid": (set(), 0),
    "nohup": (set(), 0),
    "sudo": ({"-u", "-g"}, 0),
    "stdbuf": ({"-i", "-o", "-e"}, 0),
    "taskset": (set(), 1),  # -c LIST counts as the positional mask
    "valgrind": (set(), 0),
    "xargs": ({"-n", "-I", "-P", "-d", "-a", "-L", "-s", "-E"}, 0),
    "chrt": (set(), 1),
    "ionice": ({"-c", "-n"}, 0),
}
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


class Found:
    def __init__(self):
        self.calls = {}  # program -> list of (target, "file:line")

    def add(self, prog, target, where):
        self.calls.setdefault(prog, []).append((target, where))


# ------------------------------------------------------------------ shell

class ShellScan:
    """A small shell tokenizer: enough of sh/bash to find command words.

    It splits the text into simple commands (at newlines, ; & | && || ( ) and
    the reserved words), descends into $(...), `...`, <(...), and into the
    string given to 'sh -c', 'bash -c' and 'trap'; it skips comments, here
    documents (their text is data: the sandbox's initramfs script runs under
    busybox), arithmetic, case patterns and redirection targets.
    """

    def __init__(self, text, line=1):
        self.s = text
        self.i = 0
        self.line = line
        self.cmds = []  # list of [(word, line, literal_text_or_None)]
        self.heredocs = []

    def scan(self):
        self._commands(end=None)
        return self.cmds

    def _peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def _adv(self, n=1):
        for _ in range(n):
            if self.i < len(self.s) and self.s[self.i] == "\n":
                self.line += 1
            self.i += 1

    def _sub(self, closer):
        """Scan a nested command list up to @closer; its commands join ours."""
        self._commands(end=closer)

    def _skip_balanced(self, open_c, close_c):
        depth = 1
        while self.i < len(self.s) and depth:
            c = self._peek()
            if c == "\\":
                self._adv(2)
                continue
            if c == open_c:
                depth += 1
            elif c == close_c:
                depth -= 1
            self._adv()

    def _dollar(self):
        """At '$': consume an expansion; returns the text to put in the word."""
        if self.s.startswith("$((", self.i):
            self._adv(3)
            self._skip_balanced("(", ")")
            self._adv()  # the second ')'
            return "$ARITH"
        if self.s.startswith("$(", self.i):
            self._adv(2)
            self._sub(")")
            return "$SUB"
        if self.s.startswith("${", self.i):
            self._adv(2)
            self._skip_balanced("{", "}")
            return "$VAR"
        self._adv()
        while self._peek() and (self._peek().isalnum() or self._peek() in "_"):
            self._adv()
        if self._peek() in ("@", "*", "#", "?", "$", "!", "-") and self.s[self.i - 1] == "$":
            self._adv()
        return "$VAR"

    def _double(self):
        """Inside "...": returns its literal text (expansions marked with $)."""
        out = []
        while self.i < len(self.s) and self._peek() != '"':
            c = self._peek()
            if c == "\\" and self._peek(1) in '"\\$`\n':
                out.append(self._peek(1))
                self._adv(2)
            elif c == "$":
                out.append(self._dollar())
            elif c == "`":
                self._adv()
                self._sub("`")
                out.append("$SUB")
            else:
                out.append(c)
                self._adv()
        self._adv()
        return "".join(out)

    def _commands(self, end):
        words = []  # current simple command
        cur = None  # current word: [text, line, literal, quoted]
        redirect = False
        in_case = 0
        pattern = False

        def end_word():
            nonlocal cur, redirect
            if cur is None:
                return
            if redirect:
                redirect = False
            else:
                words.append((cur[0], cur[1], cur[2] if cur[3] else None, cur[4]))
            cur = None

        def end_cmd():
            nonlocal words, in_case, pattern
            end_word()
            if words:
                first = words[0][0]
                if first == "case":
                    in_case += 1
                    pattern = True
                    words = []
                    return
                if first == "esac" and in_case:
                    in_case -= 1
                self.cmds.append(words)
            words = []

        def word_char(ch, literal_piece=None, quoted=False):
            nonlocal cur
            if cur is None:
                cur = ["", self.line, "", False, self.i]
            cur[0] += ch
            if literal_piece is not None:
                cur[2] += literal_piece
                cur[3] = cur[3] or quoted

        while self.i < len(self.s):
            c = self._peek()
            if end and c == end and (end != ")" or True):
                if end == "`" or end == ")":
                    self._adv()
                    end_cmd()
                    return
            if pattern:
                # case patterns: drop everything up to the unquoted ')'
                if c == ")":
                    pattern = False
                    words = []
                    cur = None
                    self._adv()
                    continue
                if c == "e" and self.s.startswith("esac", self.i) and (cur is None):
                    pattern = False
                    in_case -= 1
                    self._adv(4)
                    continue
                if c == "'":
                    self._adv()
                    while self.i < len(self.s) and self._peek() != "'":
                        self._adv()
                elif c == '"':
                    self._adv()
                    self._double()
                    continue
                elif c == "#" and cur is None:
                    while self.i < len(self.s) and self._peek() != "\n":
                        self._adv()
                    continue
                if not c.isspace():
                    cur = cur or ["", self.line, "", False, self.i]
                else:
                    cur = None
                self._adv()
                continue
            if c == "\\":
                if self._peek(1) == "\n":
                    self._adv(2)
                    continue
                word_char(self._peek(1))
                self._adv(2)
                continue
            if c == "'":
                self._adv()
                start, line = self.i, self.line
                while self.i < len(self.s) and self._peek() != "'":
                    self._adv()
                text = self.s[start:self.i]
                self._adv()
                word_char(text, text, True)
                if cur is not None and cur[1] > line:
                    cur[1] = line
                continue
            if c == '"':
                self._adv()
                text = self._double()
                word_char(text, text, True)
                continue
            if c == "`":
                self._adv()
                self._sub("`")
                word_char("$SUB")
                continue
            if c == "$":
                word_char(self._dollar())
                continue
            if c == "#" and cur is None:
                while self.i < len(self.s) and self._peek() != "\n":
                    self._adv()
                continue
            if c in "<>":
                if self.s.startswith("<<", self.i) and not self.s.startswith("<<<", self.i):
                    self._adv(2)
                    strip = self._peek() == "-"
                    if strip:
                        self._adv()
                    while self._peek() in " \t":
                        self._adv()
                    m = re.match(r"""['"]?([A-Za-z0-9_]+)['"]?""", self.s[self.i:])
                    if m:
                        self.heredocs.append((m.group(1), strip))
                        self._adv(m.end())
                    continue
                if self._peek(1) == "(":  # process substitution
                    self._adv(2)
                    self._sub(")")
                    word_char("$SUB")
                    continue
                if cur is not None and cur[0].isdigit():
                    cur = None
                end_word()
                while self._peek() in "<>&|":
                    self._adv()
                redirect = True
                continue
            if c == "\n":
                self._adv()
                end_cmd()
                if self.heredocs:
                    self._skip_heredocs()
                continue
            if c == "(" and cur is not None and cur[0].endswith("="):
                self._adv()  # an array assignment: its words are data
                self._skip_balanced("(", ")")
                word_char("$ARRAY")
                continue
            if c in ";&|()":
                if c == ";" and self._peek(1) == ";":
                    self._adv(2)
                    end_cmd()
                    pattern = in_case > 0
                    continue
                if c == "(" and self._peek(1) == "(":  # (( arithmetic ))
                    self._adv(2)
                    self._skip_balanced("(", ")")
                    self._adv()
                    continue
                if c == ")" and end == ")":
                    continue  # handled above
                self._adv()
                end_cmd()
                continue
            if c in " \t":
                self._adv()
                end_word()
                if words and words[-1][0] in ("{", "}", "!", "then", "do", "else", "elif", "if",
                                              "while", "until", "time") and len(words) == 1:
                    words = []
                continue
            word_char(c)
            self._adv()
        end_cmd()

    def _skip_heredocs(self):
        for delim, strip in self.heredocs:
            while self.i < len(self.s):
                j = self.s.find("\n", self.i)
                j = len(self.s) if j < 0 else j
                ln = self.s[self.i:j]
                self.i = j + 1
                self.line += 1
                if (ln.lstrip("\t") if strip else ln) == delim:
                    break
        self.heredocs = []


def shell_programs(text, line, functions):
    """Yield (program, line) for the command words of shell @text."""
    cmds = ShellScan(text, line).scan()
    for words in cmds:
        yield from _command_word(words, functions)


def _command_word(words, functions):
    ws = list(words)
    while ws:
        w = ws[0][0]
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", w) and ws[0][3] is not None:
            ws.pop(0)
            continue
        if w in ("if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time",
                 "fi", "done", "esac"):
            ws.pop(0)
            continue
        break
    if not ws:
        return
    w, line, literal = ws[0][0], ws[0][1], ws[0][2]
    if w in ("for", "case", "select", "function", "[[", "((", "local", "declare", "export",
             "readonly", "typeset", "unset", "return", "exit", "shift", "set", "read"):
        return
    if "$" in w or "/" in w or not NAME_RE.match(w):
        # A path or a variable: a program of the tree.  The sandbox's 'run'
        # and 'peer' run what follows '--'.
        if ("softroce" in w.lower() or "SOFTROCE" in w) and any(x[0] == "--" for x in ws):
            k = next(i for i, x in enumerate(ws) if x[0] == "--")
            yield from _command_word(ws[k + 1:], functions)
        return
    if w == "trap" and len(ws) > 1 and ws[1][2] is not None:
        yield from shell_programs(ws[1][2], ws[1][1], functions)
        return
    if w in ("sh", "bash", "dash") and len(ws) > 2 and ws[1][0] == "-c" and ws[2][2] is not None:
        yield w, line
        yield from shell_programs(ws[2][2], ws[2][1], functions)
        return
    if w in functions or w in BUILTINS:
        if w == "command" and len(ws) > 1 and ws[1][0] in ("-v", "-V"):
            return  # a look-up: whether it is there, not a call
        if w in ("exec", "command"):
            rest = ws[1:]
            while rest and rest[0][0].startswith("-"):
                rest = rest[1:]
            yield from _command_word(rest, functions)
        return
    yield w, line
    if w in WRAPPERS:
        takes_arg, positional = WRAPPERS[w]
        rest = ws[1:]
        while rest:
            a = rest[0][0]
            if a == "--":
                rest = rest[1:]
                break
            if a.startswith("-"):
                rest = rest[2:] if a in takes_arg else rest[1:]
                if w == "taskset" and a == "-c":
                    positional = 0
                    rest = rest[1:]
                continue
            if w == "env" and "=" in a:
                rest = rest[1:]
                continue
            break
        rest = rest[positional:]
        yield from _command_word(rest, functions)


FUNC_RE = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(\)\s*\{?", re.M)


def is_shell(path, head):
    if path.endswith(".sh"):
        return True
    return bool(re.match(r"#!\s*/(usr/)?bin/(env\s+)?(ba|da)?sh\b", head))


def makefile_recipes(text):
    """Yield (target, recipe_text, line) of a Makefile, make variables expanded to $VAR."""
    target = None
    for n, ln in enumerate(text.splitlines(), 1):
        m = re.match(r"^([A-Za-z0-9_.$()/-]+):", ln)
        if m and not ln.startswith("\t"):
            target = m.group(1)
            continue
        if ln.startswith("\t") and target:
            body = ln[1:].lstrip("@-")
            body = body.replace("$$", "\0")
            body = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", r"$\1", body)
            body = body.replace("\0", "$")
            yield target, body, n


def cmake_commands(text):
    """Yield (command_text, line) of add_test / rk_rdma_test calls."""
    text = re.sub(r"#[^\n]*", "", text)  # comments (none of ours has '#' in a string)
    for m in re.finditer(r"\b(add_test|rk_rdma_test)\s*\(", text):
        if re.search(r"function\s*\(\s*$", text[:m.start()]):
            continue  # the helper's definition, not a call
        line = text.count("\n", 0, m.start()) + 1
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        body = text[m.end():j - 1]
        body = re.sub(r"\$<[^<>]*>", "$GEN", body)
        body = re.sub(r"\$\{[^}]*\}", "$VAR", body)
        body = " ".join(body.split())
        if m.group(1) == "add_test":
            k = body.find("COMMAND ")
            if k < 0:
                continue
            body = body[k + len("COMMAND "):]
        else:
            body = " ".join(body.split(" ")[3:])
        yield body, line


# ------------------------------------------------------------------ python

PY_CALLS = {"run", "Popen", "call", "check_call", "check_output", "execvp", "execlp", "which"}


def python_programs(text, path):
    """Yield (program or None, line): None marks a call whose program is computed."""
    tree = ast.parse(text, path)
    assigned = {}  # name -> [value nodes]
    for node in ast.walk(tree):
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets, value = [node.target], node.value
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            if isinstance(base, ast.Name):
                assigned.setdefault(base.id, []).append(value)

    def first(node, depth=0):
        """The possible program names at the head of a command expression."""
        if depth > 8:
            return set()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value.split()[0]} if node.value.split() else set()
        if isinstance(node, ast.List):
            if not node.elts:
                return {""}  # empty: the next operand of a + is the head
            e = node.elts[0]
            if isinstance(e, ast.Starred):
                return first(e.value, depth + 1)
            if isinstance(e, ast.BinOp):
                return {None}
            return first(e, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = first(node.left, depth + 1)
            if "" in left:
                left.discard("")
                left |= first(node.right, depth + 1)
            return left
        if isinstance(node, ast.Dict):
            out = set()
            for v in node.values:
                out |= first(v, depth + 1)
            return out
        if isinstance(node, ast.Subscript):
            return first(node.value, depth + 1)
        if isinstance(node, ast.Name):
            out = set()
            for v in assigned.get(node.id, []):
                out |= first(v, depth + 1)
            return out
        return set()  # a call, sys.argv, a parameter: the tree's own program

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name not in PY_CALLS or owner not in ("subprocess", "os", "shutil"):
            continue
        for p in first(node.args[0]):
            if p is None:
                yield None, node.lineno
            elif p and NAME_RE.match(p):
                yield p, node.lineno


# ------------------------------------------------------------------ C

C_CALL_RE = re.compile(r'\b(popen|system|execlp|execvp)\s*\(\s*"([A-Za-z0-9_.+-]+)')


def c_programs(text):
    for m in C_CALL_RE.finditer(text):
        yield m.group(2), text.count("\n", 0, m.start()) + 1


# ------------------------------------------------------------------ the tree

def target_of(rel):
    if rel.startswith("bench/"):
        return "bench"
    if rel == "scripts/lint":
        return "lint"
    if rel.startswith("fuzz/") or rel == "scripts/fuzz":
        return "fuzz"
    if rel in DEMO_FILES:
        return "demo"
    return "check"


MAKE_TARGETS = {"lint": "lint", "format": "lint", "fuzz": "fuzz", "build": "demo", "demo": "demo"}
# What 'make demo' runs: it installs only scripts/deps --build (and the sandbox).
DEMO_FILES = {"scripts/demo", "tools/rk/copy/demo-copy.sh"}


def scan_tree(src):
    found = Found()
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")
                         and (not d.startswith(".") or d == ".ci"))
        for n in sorted(names):
            files.append(os.path.join(root, n))
    texts = {}
    for p in files:
        try:
            with open(p, encoding="utf-8") as f:
                texts[p] = f.read()
        except (UnicodeDecodeError, OSError):
            continue
    shells = [p for p, t in texts.items() if is_shell(p, t[:80])]
    functions = set()
    for p in shells:
        functions |= set(FUNC_RE.findall(texts[p]))
    for p, text in texts.items():
        rel = os.path.relpath(p, src)
        tgt = target_of(rel)
        if p in shells:
            for prog, line in shell_programs(text, 1, functions):
                found.add(prog, tgt, "%s:%d" % (rel, line))
        elif os.path.basename(p) == "Makefile":
            for mt, body, line in makefile_recipes(text):
                for prog, _ in shell_programs(body, line, functions):
                    found.add(prog, MAKE_TARGETS.get(mt, tgt), "%s:%d" % (rel, line))
        elif os.path.basename(p) == "CMakeLists.txt" or p.endswith(".cmake"):
            for body, line in cmake_commands(text):
                for prog, _ in shell_programs(body, line, functions):
                    found.add(prog, tgt, "%s:%d" % (rel, line))
        elif p.endswith(".py") or text.startswith("#!/usr/bin/env python3"):
            named = set()
            for m in re.finditer(r"^\s*#\s*programs:(.*)$", text, re.M):
                named |= set(m.group(1).split())
            for prog in named:
                found.add(prog, tgt, "%s ('programs:' comment)" % rel)
            for prog, line in python_programs(text, p):
                if prog is None:
                    if not named:
                        found.add("?", tgt, "%s:%d (computed program name: name it in a "
                                  "'# programs:' comment)" % (rel, line))
                else:
                    found.add(prog, tgt, "%s:%d" % (rel, line))
        elif p.endswith((".c", ".h")):
            for prog, line in c_programs(text):
                found.add(prog, tgt, "%s:%d" % (rel, line))
    return found


# ------------------------------------------------------------------ packages

def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def listed(src, target):
    """The packages the install step of @target installs (None: it has no such flag)."""
    base = run([os.path.join(src, "scripts/deps"), "--list"] + (["--build"] if target == "demo" else []))
    sand = run([os.path.join(src, "scripts/softroce"), "deps", "--list"])
    if base.returncode or sand.returncode:
        sys.exit("deps_guard: 'scripts/deps --list' or 'scripts/softroce deps --list' failed:\n"
                 + base.stderr + sand.stderr)
    pkgs = set(base.stdout.split()) | set(sand.stdout.split())
    if target not in ("check", "demo"):
        extra = run([os.path.join(src, "scripts/deps"), "--list", "--" + target])
        if extra.returncode:
            return None
        pkgs |= set(extra.stdout.split())
    return pkgs


def installed_db():
    """Installed packages: name -> (depends names, essential or required)."""
    out = run(["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\t${Essential}\t"
               "${Priority}\t${Pre-Depends}, ${Depends}\t${Provides}\n"]).stdout
    db, provides = {}, {}
    for ln in out.splitlines():
        name, status, ess, prio, deps, prov = (ln.split("\t") + [""] * 6)[:6]
        if not status.startswith("ii"):
            continue
        alts = []
        for d in deps.split(","):
            choice = [re.sub(r"[\s(:].*", "", a.strip()) for a in d.split("|") if a.strip()]
            if choice:
                alts.append(choice)
        db[name] = (alts, ess == "yes" or prio == "required")
        for p in prov.split(","):
            p = re.sub(r"[\s(].*", "", p.strip())
            if p:
                provides.setdefault(p, []).append(name)
    return db, provides


def closure(pkgs, db, provides):
    """@pkgs and what installing them pulls in (the first installed alternative of each dependency)."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for alts in db.get(p, ([], False))[0]:
            for a in alts:
                real = [a] if a in db else provides.get(a, [])
                if real:
                    todo.extend(real)
                    break
    return seen


def packages_of(progs):
    """prog -> (path, [packages]) for each of @progs on PATH ((None, []) when not
    installed).  Of several hits on PATH the first that a package owns is taken
    (a hand-installed interpreter ahead of Debian's must not hide it)."""
    hits = {}
    for prog in progs:
        paths = []
        for d in os.environ.get("PATH", "").split(os.pathsep):
            p = os.path.join(d or ".", prog)
            if os.path.isfile(p) and os.access(p, os.X_OK) and p not in paths:
                paths.append(p)
        hits[prog] = paths
    cands = set()
    for paths in hits.values():
        for p in paths:
            for c in (p, os.path.realpath(p)):
                cands |= {c, c[4:] if c.startswith("/usr/") else "/usr" + c}
    owner = {}
    if cands:
        out = run(["dpkg-query", "-S"] + sorted(cands)).stdout
        for ln in out.splitlines():
            if ln.startswith("diversion by") or ": " not in ln:
                continue
            pk, path = ln.split(": ", 1)
            owner.setdefault(path.strip(), set()).update(x.strip().split(":")[0] for x in pk.split(","))
    res = {}
    for prog, paths in hits.items():
        res[prog] = (paths[0], []) if paths else (None, [])
        for p in paths:
            pk = set()
            for c in (p, os.path.realpath(p)):
                for v in (c, c[4:] if c.startswith("/usr/") else "/usr" + c):
                    pk |= owner.get(v, set())
            if pk:
                res[prog] = (p, sorted(pk))
                break
    return res


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = os.path.abspath(sys.argv[1])
    verbose = "--verbose" in sys.argv
    found = scan_tree(src)
    db, provides = installed_db()
    lists, allowed = {}, {}
    for tgt in ("check", "demo", "bench", "lint", "fuzz"):
        lists[tgt] = listed(src, tgt)
        if lists[tgt] is not None:
            allowed[tgt] = closure(lists[tgt], db, provides)
    bad, unchecked, rows = [], [], []
    owners = packages_of(p for p in found.calls if p != "?")
    for prog in sorted(found.calls):
        where = found.calls[prog]
        if prog == "?":
            bad.extend("cannot tell which program %s runs" % w for _, w in where)
            continue
        tgts = sorted({t for t, _ in where})
        path, pkgs = owners[prog]
        for tgt in tgts:
            sites = ", ".join(w for t, w in where if t == tgt)
            if lists.get(tgt) is None:
                bad.append("%s (%s): scripts/deps has no --%s to install it" % (prog, sites, tgt))
                continue
            if path is None:
                missing = sorted(p for p in lists[tgt] if p not in db)
                if missing:
                    unchecked.append("%s (%s): not installed, and neither is %s of the %s list"
                                     % (prog, sites, " ".join(missing), tgt))
                else:
                    bad.append("%s (%s): not installed, and no package the %s list installs "
                               "provides it: add its package to scripts/deps" % (prog, sites, tgt))
                continue
            if not pkgs:
                bad.append("%s (%s): %s belongs to no Debian package" % (prog, sites, path))
                continue
            ok = [p for p in pkgs if p in allowed[tgt] or db.get(p, ([], False))[1]]
            if not ok:
                bad.append("%s (%s): package %s is not installed by the %s list: add it to "
                           "scripts/deps" % (prog, sites, "/".join(pkgs), tgt))
            rows.append("%-22s %-8s %-28s %s" % (prog, tgt, "/".join(pkgs), sites.split(", ")[0]))
    if verbose:
        print("\n".join(rows))
    for u in unchecked:
        print("not checked: " + u)
    for b in bad:
        print("FAIL: " + b)
    print("deps_guard: %d programs, %d call sites; %d not checked, %d failures"
          % (len(found.calls), sum(len(v) for v in found.calls.values()), len(unchecked), len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
