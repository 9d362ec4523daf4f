#!/usr/bin/env python3
"""help_options.py man|completion RK FILE... - rk's documentation lists every
option its --help lists.

man DIR: every long option on an option line of 'rk CMD --help' (and the
  subcommands of 'rk --help') appears in DIR/rk-CMD.1, the page help2man made;
completion FILE: the bash completion FILE, sourced into bash, offers every
  subcommand after 'rk ', and every long option of 'rk CMD --help' after
  'rk CMD --'.
The option lines are read here with a pattern of this test's own, not the
generator's, so that a generator that drops options fails it.
"""
import os
import re
import subprocess
import sys

OPTION_LINE = re.compile(r"^\s+(?:-[A-Za-z0-9],?\s+)?(--[a-z][a-z0-9-]*)")
PAGES = ["copy", "serve", "bench", "doctor", "explain", "matrix"]


def helptext(rk, *cmd):
    return subprocess.run([rk, *cmd, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False).stdout


def long_options(text):
    return sorted({m.group(1) for m in map(OPTION_LINE.match, text.splitlines()) if m})


def subcommands(text):
    block = text.split("subcommands:\n", 1)[1].split("\n\n", 1)[0]
    return [ln.split()[0] for ln in block.splitlines() if ln.strip()]


def check_man(rk, mandir):
    bad = []
    for cmd in [""] + PAGES:
        page = os.path.join(mandir, ("rk-" + cmd if cmd else "rk") + ".1")
        with open(page, encoding="utf-8") as f:
            # roff: '\-' is a '-', fonts are \fB \fI \fR \f(..
            text = re.sub(r"\\f(\(..|[A-Z])|\\/|\\,", "", f.read()).replace("\\-", "-")
        help_ = helptext(rk, *([cmd] if cmd else []))
        want = long_options(help_) + (subcommands(help_) if not cmd else [])
        if len(want) < 2:
            bad.append("rk %s --help: no options found (the test's pattern is stale?)" % cmd)
        for opt in want:
            if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), text):
                bad.append("%s does not mention %s" % (os.path.basename(page), opt))
    return bad


def complete(comp, words):
    script = 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _rk; ' \
             'printf "%s\\n" "${COMPREPLY[@]}"'
    out = subprocess.run(["bash", "-c", script, "bash", comp, *words], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, check=False)
    return set(out.stdout.split())


def check_completion(rk, comp):
    bad = []
    cmds = subcommands(helptext(rk))
    got = complete(comp, ["rk", ""])
    bad += ["'rk <TAB>' does not offer %s" % c for c in cmds if c not in got]
    for cmd in PAGES:
        want = long_options(helptext(rk, cmd))
        got = complete(comp, ["rk", cmd, "--"])
        bad += ["'rk %s --<TAB>' does not offer %s" % (cmd, o) for o in want if o not in got]
    return bad


def main():
    mode, rk, path = sys.argv[1:4]
    bad = check_man(rk, path) if mode == "man" else check_completion(rk, path)
    for b in bad:
        print("FAIL: " + b)
    print("help_options %s: %s" % (mode, "%d missing" % len(bad) if bad else "every option listed"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
