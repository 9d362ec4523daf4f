#!/usr/bin/env python3
"""rk-completion.py RK OUT - write rk's bash completion, generated from the
--help of rk and of every subcommand 'rk --help' lists, so that the options
completed are always those the built rk takes.

An option line of --help ("  -r, --recursive   text", "      --dev NAME  text")
gives the option, and its metavar what its value completes to: FILE, PATH, DIR and
FILE.png to paths, DEV (or NAME of --dev) to the RDMA devices of
/sys/class/infiniband, a value listed as "a | b | c" at the start of the text to
those words; any other metavar to nothing (a number or a size).
"""
import re
import subprocess
import sys

# "--json[=FILE]": an optional value, only ever after '=' (not completed after a blank).
OPT_RE = re.compile(r"^\s+(?:(-[A-Za-z0-9]),?\s+)?(--[a-z][a-z0-9-]*)(?:\[=[A-Z][A-Z0-9_]*\])?(?:[ =]([A-Z][A-Z0-9_]*(?:\.[a-z]+)?(?:\[[^\]]*\])?))?(\s+(.*))?$")
SHORT_RE = re.compile(r"^\s+(-[A-Za-z0-9])\s+([A-Z][A-Z0-9_]*)?")


def help_text(rk, *args):
    out = subprocess.run([rk, *args, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, check=False)
    return out.stdout


def subcommands(text):
    """The NAMEs of the 'subcommands:' section of rk --help."""
    cmds, inside = [], False
    for line in text.splitlines():
        if line.strip() == "subcommands:":
            inside = True
            continue
        if inside:
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s", line)
            if not m:
                break
            cmds.append(m.group(1))
    return cmds


def kind_of(opt, meta, desc):
    """What the value of @opt completes to: 'file', 'dir', 'dev', 'words:a b', 'none', or '' (no value)."""
    if not meta:
        return ""
    head = re.split(r"[:;]", desc or "", maxsplit=1)[0]
    if "|" in head:
        words = [w.strip().split()[0] for w in head.split("|") if w.strip()]
        if all(re.match(r"^[a-z][a-z0-9-]*$", w) for w in words):
            return "words:" + " ".join(words)
    if meta.startswith("FILE") or meta == "PATH":
        return "file"
    if meta == "DIR":
        return "dir"
    if meta == "DEV" or opt == "--dev":
        return "dev"
    return "none"


def options(text):
    """[(option, kind)] of every option line of a --help text, in order."""
    out = []
    for line in text.splitlines():
        m = OPT_RE.match(line)
        if m:
            short, opt, meta, desc = m.group(1), m.group(2), m.group(3), m.group(5)
            kind = kind_of(opt, meta, desc)
            out.append((opt, kind))
            if short:
                out.append((short, kind))
    return out


def case_values(opts):
    """The 'case $prev' arms that complete an option's value."""
    arms = {}
    for opt, kind in opts:
        if kind:
            arms.setdefault(kind, []).append(opt)
    lines = []
    for kind, names in arms.items():
        pat = "|".join(names)
        if kind == "file":
            act = "compopt -o filenames; COMPREPLY=($(compgen -f -- \"$cur\"))"
        elif kind == "dir":
            act = "compopt -o filenames; COMPREPLY=($(compgen -d -- \"$cur\"))"
        elif kind == "dev":
            act = "_rk_devices"
        elif kind.startswith("words:"):
            act = "COMPREPLY=($(compgen -W '%s' -- \"$cur\"))" % kind[6:]
        else:
            act = ":"  # a number or a size: nothing to offer
        lines.append("\t\t%s) %s; return ;;" % (pat, act))
    return lines


def main():
    rk, out = sys.argv[1], sys.argv[2]
    top = help_text(rk)
    cmds = subcommands(top)
    if not cmds:
        sys.exit("rk-completion: no subcommands in '%s --help'" % rk)
    top_opts = sorted(set(re.findall(r"\[(--[a-z][a-z0-9-]*)\]", top.splitlines()[0])))
    body = []
    for cmd in cmds:
        opts = options(help_text(rk, cmd))
        body.append("\t%s)" % cmd)
        if cmd == "help":
            body.append("\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;" % " ".join(cmds))
            continue
        arms = case_values(opts)
        if arms:
            body.append("\t\tcase $prev in")
            body.extend(arms)
            body.append("\t\tesac")
        body.append("\t\topts='%s' ;;" % " ".join(o for o, _ in opts if o.startswith("--")))
    text = """# bash completion for rk - generated from rk --help by doc/rk-completion.py; do not edit.
_rk_devices() {
	local d devs=()
	for d in /sys/class/infiniband/*; do [ -e "$d" ] && devs+=("${d##*/}"); done
	COMPREPLY=($(compgen -W "${devs[*]}" -- "$cur"))
}

_rk() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} cmd= opts= i
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W '%s %s' -- "$cur"))
		return
	fi
	case $cmd in
%s
	*) return ;;
	esac
	case $cur in
	-*) COMPREPLY=($(compgen -W "$opts" -- "$cur")) ;;
	*) compopt -o filenames; COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}
complete -F _rk rk
""" % (" ".join(top_opts), " ".join(cmds), "\n".join(body))
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
