#!/usr/bin/env python3
"""options_vocab.py RK README - every rk command speaks one option vocabulary.

Reads the vocabulary from 'rk help options --check' (tools/rk/cli_options.c)
and every command's option lines from 'rk CMD --help', and fails when
  - a long option has two meanings: it is in two commands' help but not in the
    vocabulary, or a command lists a shared option the vocabulary does not
    give it (or the other way round);
  - a long option has two units: its argument (DURATION, SIZE, FILE, [=FILE]...)
    differs from the vocabulary's, or a duration is still written SEC / MS;
  - a short letter has two meanings: -x stands for another option than the
    vocabulary's letter table says;
  - README.md does not carry 'rk help options' verbatim;
  - the shared parsers do not read the documented forms (a duration with a
    unit, a bare number as seconds, --json[=FILE], the spellings kept for
    one release with their warning).
There are no exceptions: every command, rk bench too, speaks the vocabulary.
"""
import re
import subprocess
import sys

COMMANDS = ["copy", "serve", "doctor", "matrix", "explain", "bench"]

# An option line: up to 6 blanks, "-x, " maybe, "--name", then "[=ARG]" or " ARG".
OPTION_LINE = re.compile(r"^ {1,6}(?:-([A-Za-z0-9]),\s+)?--([a-z][a-z0-9-]*)"
                         r"(\[=[A-Z][A-Z0-9_]*\]|[ =][A-Z][A-Za-z0-9_.:\[\]]*)?(?:\s|$)")
OLD_DURATION_UNITS = {"SEC", "SECS", "SECONDS", "MS", "MSEC"}


def run(rk, *args):
    p = subprocess.run([rk, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       check=False)
    return p.returncode, p.stdout, p.stderr


def options_of(text):
    """{--name: (short or '', arg or '')} from a --help text."""
    found = {}
    for line in text.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            arg = (m.group(3) or "").strip()
            arg = arg[1:] if arg.startswith("=") else arg
            found["--" + m.group(2)] = ("-" + m.group(1) if m.group(1) else "", arg)
    return found


def vocabulary(rk):
    rc, out, err = run(rk, "help", "options", "--check")
    if rc != 0:
        sys.exit("FAIL: rk help options --check: exit %d: %s" % (rc, err))
    opts, letters, retired = {}, {}, {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "option":
            opts[f[1]] = {"short": f[2], "arg": f[3], "commands": f[4].split()}
        elif f[0] == "letter":
            letters[f[1]] = f[2]
        elif f[0] == "retired":
            old, now = f[1].split()[0], f[2].split()[0].split("=")[0]
            if old.startswith("--") and old != now:  # a name that goes, not a value's form
                for cmd in f[3].split():
                    retired.setdefault(cmd, []).append(old)
    if len(opts) < 5 or len(letters) < 5:
        sys.exit("FAIL: rk help options --check: too few lines (the format changed?)")
    return opts, letters, retired


def check_tables(rk):
    vocab, letters, retired = vocabulary(rk)
    problems = []  # (cmd, kind, name, text)
    per_cmd = {}
    for cmd in COMMANDS:
        rc, out, _ = run(rk, cmd, "--help")
        per_cmd[cmd] = options_of(out)
        if rc != 0 or len(per_cmd[cmd]) < 2:
            problems.append((cmd, "help", "", "rk %s --help: no option lines found" % cmd))
    for cmd, opts in per_cmd.items():
        for name, (short, arg) in opts.items():
            if short and letters.get(short) != name:
                problems.append((cmd, "short", short, "%s is %s here, %s in the vocabulary" %
                                 (short, name, letters.get(short, "nothing"))))
            if arg.upper() in OLD_DURATION_UNITS:
                problems.append((cmd, "unit", name, "%s %s: a duration is DURATION" % (name, arg)))
            if name in retired.get(cmd, []):
                problems.append((cmd, "retired", name, "%s is a retired spelling" % name))
            v = vocab.get(name)
            if not v:
                continue
            if arg != v["arg"]:
                problems.append((cmd, "arg", name, "%s takes %r here, %r in the vocabulary" %
                                 (name, arg, v["arg"])))
            if short and short != v["short"]:
                problems.append((cmd, "short", short, "%s is %s here, %s in the vocabulary" %
                                 (name, short, v["short"] or "no letter")))
            if "all" not in v["commands"] and cmd not in v["commands"]:
                problems.append((cmd, "table", name, "%s: the vocabulary does not list %s for it"
                                 % (name, cmd)))
    for name, v in vocab.items():
        for cmd in v["commands"]:
            if cmd in per_cmd and name not in per_cmd[cmd]:
                problems.append((cmd, "missing", name, "the vocabulary gives it %s" % name))
    users = {}
    for cmd, opts in per_cmd.items():
        for name in opts:
            users.setdefault(name, []).append(cmd)
    for name, cmds in users.items():
        if len(cmds) > 1 and name not in vocab:
            for cmd in cmds:
                problems.append((cmd, "shared", name, "%s is in %s but not in the vocabulary" %
                                 (name, " and ".join(cmds))))
    return problems


def check_readme(rk, readme):
    _, table, _ = run(rk, "help", "options")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    if "### Options every rk command shares" not in text:
        return ["README.md: no section 'Options every rk command shares'"]
    if table.strip() not in text:
        return ["README.md: the table differs from 'rk help options' (paste its output)"]
    return []


def check_parsers(rk):
    bad = []

    def expect(args, rc_want, err_has=""):
        rc, _, err = run(rk, *args)
        if rc != rc_want or err_has not in err:
            bad.append("rk %s: exit %d (want %d)%s: %s" % (" ".join(args), rc, rc_want,
                       ", no '%s'" % err_has if err_has not in err else "", err.strip()[:200]))

    for good in ["30", "30s", "1500ms", "2m", "1.5s", "1h"]:
        expect(["copy", "--timeout", good, "--help"], 0)
    for junk in ["5x", "-1", "", "1.5ms", "0", "2h", "s", "1e3"]:
        expect(["copy", "--timeout", junk, "--help"], 2, "expected a duration")
    expect(["copy", "--retry-window", "1500ms", "--help"], 2, "whole seconds")
    expect(["matrix", "--duration", "3s", "--watchdog", "1m", "--wait", "90", "--help"], 0)
    expect(["matrix", "--duration", "500ms", "--help"], 2, "whole seconds")
    expect(["doctor", "--timeout", "2s", "--help"], 0)
    expect(["doctor", "--timeout", "5000", "--help"], 0, "write 5000ms or 5s")
    expect(["doctor", "--timeout", "5s", "--json", "--listen"], 2, "--listen takes neither")
    expect(["matrix", "--json", "out.json", "--help"], 0, "write --json=FILE")
    expect(["matrix", "--json=out.json", "--help"], 0)
    expect(["copy", "--json", "--help"], 0)
    expect(["copy", "--json=x.json", "--help"], 0)
    # rk bench: whole-second durations; its old spellings work with their warning. --help
    # ends the parse before '--json FILE' is judged (a HOST may follow): --max-size without
    # -a, a usage error found after it, stands in.
    expect(["bench", "-D", "5s", "--watchdog", "1m", "--wait", "90", "--help"], 0)
    expect(["bench", "--duration", "500ms", "--help"], 2, "whole seconds")
    expect(["bench", "--wait", "5x", "--help"], 2, "expected a duration")
    expect(["bench", "--bind", "127.0.0.1", "--help"], 0, "write --addr ADDR")
    expect(["bench", "-q", "2", "--help"], 0, "write --num-qp N")
    expect(["bench", "-l", "2", "--help"], 0, "write --batch N")
    expect(["bench", "--json", "out.json", "--max-size", "64"], 2, "write --json=FILE")
    expect(["bench", "--json=out.json", "--addr", "127.0.0.1", "--help"], 0)
    return bad


def main():
    rk, readme = sys.argv[1:3]
    bad = ["rk %s: %s" % (cmd, text) for cmd, _, _, text in check_tables(rk)]
    bad += check_readme(rk, readme)
    bad += check_parsers(rk)
    for b in bad:
        print("FAIL: " + b)
    print("options_vocab: %s" % ("%d problems" % len(bad) if bad else
                                 "one meaning and one unit per option, one meaning per letter"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
