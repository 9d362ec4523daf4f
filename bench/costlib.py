"""costlib - read callgrind profiles and turn runs into work per operation.

bench/cost (the command) runs the programs; this module holds what can be
tested without an RDMA device: the callgrind.out reader, the figures taken
from one profile (instructions, system calls, doorbells, poll passes), and
the fit that turns runs at two iteration counts into a cost per operation.

The method (bench/README.md, "Instructions per operation"):

  * A run at n operations costs I(n) = a + b*n + c*E: a is start-up and
    tear-down, b the work per operation, c the cost of one extra pass of the
    wait loop and E the number of such passes, which depends on timing (a
    busy poller that finds its CQ empty goes round again). E = W - k*n,
    where W is the number of calls of the provider's poll function and k
    the poll passes a cell needs per operation (1 for a ping-pong: one
    successful poll per message); b therefore keeps k passes per operation.
  * Runs at n1 and n2 (two or more of each) give the least-squares fit of
    a, b, c. When E does not vary apart from n (its residual after a line
    in n is below half a pass, as in event mode, where every wait is one
    event), c cannot be told from b and the plain slope is used: the mean
    of I at n2 minus the mean at n1, over n2 - n1.
  * Work that is not per operation but grows with n or with the guest's
    speed is taken out of every profile before the fit, for every program
    alike: the inclusive cost of qsort (perftest sorts its samples at the
    end) and of every function that calls gettimeofday (perftest's CPU
    clock calibration spins on it for a fixed time; under valgrind, which
    hides the vDSO, glibc's gettimeofday is __gettimeofday_syscall).
  * rk bench's fold of its raw latency samples into the histogram, after
    the timed loop, is taken out the same way (bench_samples_fold): it is
    rk's counterpart of perftest's sort, done once per run.
  * System calls come from callgrind's --collect-systime (the sysCount
    event: one per system call, deterministic), without the clock reads:
    valgrind hides the vDSO, so under it every clock_gettime and
    gettimeofday is a system call, while natively it is a few dozen
    instructions in user space. They are counted apart ("clock"); doorbells are the calls of
    write() made from inside the provider library (Soft-RoCE's post_send
    rings the kernel with a write on the command fd; its post_recv makes no
    system call). Kernel work itself is invisible to callgrind: that is why
    system calls and doorbells are reported beside the instructions.
"""

import math
import os
import re

# Names (in the callgrind file) of functions whose inclusive cost is not
# per-operation work: taken out of every profile (see the module comment).
EXCLUDE_CALLEES = ("qsort", "qsort_r", "bench_samples_fold",
                   # rk bench's watchdog: a look at the clock and the control
                   # channel every 10 ms of wall time and every 64th empty
                   # poll of a wait (with a yield once the wait is long),
                   # work that follows the run's time, not n. Every name
                   # here but qsort's is rk's own, and a unit test holds it
                   # to a function defined in the tree: a renamed one would
                   # quietly put waiting back into the figures.
                   "bench_lat_tick", "bench_lat_wait_tick", "bench_watch_tick_slow",
                   "bench_watch_check",
                   # the one-sided WRITE wait's look every 256th pass (the
                   # clock, the watchdog, after 4,096 passes the CQ)
                   "bench_lat_wait_long",
                   # --pace: the pause before each message a paced side
                   # sends (the event cells), a sleep the cell asks for
                   "bench_pace")
# Functions of the C library among the names above.
EXCLUDE_EXTERNAL = ("qsort", "qsort_r")
EXCLUDE_CALLERS_OF = ("__gettimeofday_syscall",)
DOORBELL_CALLEES = ("write", "__write", "__libc_write")
# The library's waits (the wait set's, the RPC server's for one connection,
# a listener's for its next connect request): their inclusive cost is the
# figure "outside the wait" leaves out (bench/cost). rk serve's main thread
# waits on its listener 500 ms at a time while the sessions copy, and each
# timeout formats its error (about 5,500 instructions): work that follows
# the run's wall time, up to 0.5 % of the server's figure per MiB.
WAIT_FUNCTIONS = ("rk_wait", "solo_wait", "rk_listener_get_request")
# Functions that are vDSO calls natively (system calls only under valgrind).
CLOCK_FUNCTIONS = ("clock_gettime", "__clock_gettime", "gettimeofday", "__gettimeofday",
                   "__gettimeofday_syscall", "time")

_POS_RE = re.compile(r"^[0-9+\-*]")
_NAME_RE = re.compile(r"^\((\d+)\)(?:\s(.*))?$")


class Profile:
    """One callgrind.out file, reduced to per-function figures.

    Functions are keyed (object basename, function name); stripped objects
    give names like 0x0000000000003cc0 (the offset in the object), which is
    stable from run to run of the same binary.

      events          event names, in file order ("Ir", "sysCount", ...)
      totals          event -> whole-program total
      self_cost       fn -> [event values] spent in fn itself
      edges           (caller, callee) -> [calls, event values...] inclusive
                      cost of those calls
    """

    def __init__(self):
        self.events = []
        self.totals = {}
        self.cmd = ""
        self.self_cost = {}
        self.edges = {}

    # --- figures ---------------------------------------------------------
    def ev(self, name):
        return self.events.index(name) if name in self.events else None

    def total(self, event="Ir"):
        return self.totals.get(event, 0)

    def inclusive(self, fn, event="Ir"):
        """fn's own cost plus that of its calls to other functions (direct
        recursion is counted once)."""
        i = self.ev(event)
        if i is None:
            return 0
        v = self.self_cost.get(fn, [0] * len(self.events))[i]
        for (caller, callee), c in self.edges.items():
            if caller == fn and callee != fn:
                v += c[1 + i]
        return v

    def calls_to(self, pred_callee, pred_caller=lambda f: True):
        """Number of calls into functions matching pred_callee from callers
        matching pred_caller (calls from a matching function to itself are
        not counted)."""
        n = 0
        for (caller, callee), c in self.edges.items():
            if caller != callee and pred_callee(callee) and pred_caller(caller):
                n += c[0]
        return n

    def self_of(self, pred, event="Ir"):
        """The self cost, summed, of the functions matching pred (names
        compared without a symbol version, "@@GLIBC_2.17")."""
        i = self.ev(event)
        if i is None:
            return 0
        return sum(c[i] for fn, c in self.self_cost.items() if pred(fn[1].split("@")[0]))

    def functions(self):
        return set(self.self_cost) | {e[0] for e in self.edges} | {e[1] for e in self.edges}

    def excluded(self, event="Ir", clock_callers=True):
        """The cost of the non-per-operation work named in EXCLUDE_* (see
        the module comment): qsort's inclusive cost at each call from
        outside it, and (clock_callers) the inclusive cost of every caller
        of gettimeofday."""
        i = self.ev(event)
        if i is None:
            return 0
        v = 0
        callers = {caller for (caller, callee) in self.edges
                   if clock_callers and callee[1] in EXCLUDE_CALLERS_OF
                   and caller[1] not in EXCLUDE_CALLERS_OF}
        for caller in callers:
            v += self.inclusive(caller, event)
        # By plain name: a clone (bench_lat_tick.part.0, .isra.0) is the
        # same work, and a call from one excluded function into another (or
        # into its own clone) is counted once, at the outer call.
        for (caller, callee), c in self.edges.items():
            if plain_name(callee[1]) in EXCLUDE_CALLEES \
                    and plain_name(caller[1]) not in EXCLUDE_CALLEES and caller not in callers:
                v += c[1 + i]
        return v

    def excluded_clock(self, clock_callers=True):
        """The clock reads (sysCount) made from the excluded work: those of
        the callers of gettimeofday that excluded() takes out."""
        i = self.ev("sysCount")
        if i is None or not clock_callers:
            return 0
        callers = {caller for (caller, callee) in self.edges
                   if callee[1] in EXCLUDE_CALLERS_OF and caller[1] not in EXCLUDE_CALLERS_OF}
        return sum(c[1 + i] for (caller, callee), c in self.edges.items()
                   if caller in callers and callee[1].split("@")[0] in CLOCK_FUNCTIONS)

    def inclusive_table(self, event="Ir"):
        """fn -> inclusive cost, for every function (used to name the
        functions that grew)."""
        i = self.ev(event)
        out = {}
        for fn, c in self.self_cost.items():
            out[fn] = out.get(fn, 0) + c[i]
        for (caller, callee), c in self.edges.items():
            if caller != callee:
                out[caller] = out.get(caller, 0) + c[1 + i]
        return out

    def self_table(self, event="Ir"):
        i = self.ev(event)
        return {fn: c[i] for fn, c in self.self_cost.items()}


def _base(obj):
    return os.path.basename(obj) if obj else "???"


def parse(path_or_lines):
    """Read a callgrind.out file (a path, or an iterable of its lines)."""
    if isinstance(path_or_lines, (str, bytes, os.PathLike)):
        with open(path_or_lines, encoding="utf-8", errors="replace") as f:
            return _parse(f)
    return _parse(path_or_lines)


def _parse(lines):
    p = Profile()
    names = {"ob": {}, "fl": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
               "cfl": "fl", "fn": "fn", "cfn": "fn"}
    npos = 1
    ob = fn = None
    cob = cfn = None
    pending_calls = None  # call count of a "calls=" line awaiting its cost line
    summary = None
    totals = None

    def name(kind, value):
        m = _NAME_RE.match(value)
        if not m:
            return value
        ident, text = m.group(1), m.group(2)
        table = names[kind_of[kind]]
        if text is not None:
            table[ident] = text
            return text
        return table.get(ident, "(%s)" % ident)

    def values(tokens):
        v = [0] * len(p.events)
        for j, t in enumerate(tokens[:len(v)]):
            v[j] = int(t, 0) if t.startswith("0x") else int(t)
        return v

    for raw in lines:
        line = raw.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        if _POS_RE.match(line):
            tokens = line.split()
            v = values(tokens[npos:])
            if pending_calls is not None:
                key = ((ob, fn), (cob if cob is not None else ob, cfn))
                e = p.edges.setdefault(key, [0] + [0] * len(p.events))
                e[0] += pending_calls
                for j, x in enumerate(v):
                    e[1 + j] += x
                pending_calls = None
                cob = None  # cfn stays: callgrind omits a repeated one
            else:
                s = p.self_cost.setdefault((ob, fn), [0] * len(p.events))
                for j, x in enumerate(v):
                    s[j] += x
            continue
        key, sep, val = line.partition("=")
        if sep:
            if key in ("ob", "fn", "cob", "cfn"):
                n = name(key, val)
                if key == "ob":
                    ob = _base(n)
                elif key == "fn":
                    fn = n
                    cob = None
                elif key == "cob":
                    cob = _base(n)
                else:
                    cfn = n
            elif key in ("fl", "fi", "fe", "cfi", "cfl"):
                name(key, val)
            elif key == "calls":
                pending_calls = int(val.split()[0])
            continue
        key, sep, val = line.partition(":")
        if not sep:
            continue
        val = val.strip()
        if key == "events":
            p.events = val.split()
        elif key == "positions":
            npos = len(val.split())
        elif key == "summary":
            summary = val.split()
        elif key == "totals":
            totals = val.split()
        elif key == "cmd":
            p.cmd = val
    t = totals or summary
    if t is None:  # neither line: add up the self costs
        t = [sum(c[j] for c in p.self_cost.values()) for j in range(len(p.events))]
    p.totals = {e: int(t[j]) if j < len(t) else 0 for j, e in enumerate(p.events)}
    return p


# --- figures of one run ----------------------------------------------------

def loop_functions(prof, loop):
    """The functions a run's measured loop is: loop {"name": N} (the
    function N, any object, or each of a list of names; a clone's suffix
    such as ".lto_priv.0" is ignored) or {"caller_of": F} (every function that calls F: a stripped
    program's loop, found by the library call it makes)."""
    if "name" in loop:
        names = loop["name"] if isinstance(loop["name"], list) else [loop["name"]]
        return sorted(f for f in prof.functions() if f[1] in names or plain_name(f[1]) in names)
    return sorted({caller for (caller, callee) in prof.edges
                   if callee[1] == loop["caller_of"] and caller[1] != loop["caller_of"]})


def callee_map(prof):
    """{function: the functions it calls} (a call of itself aside)."""
    callees = {}
    for (a, b) in prof.edges:
        if a != b:
            callees.setdefault(a, set()).add(b)
    return callees


def reached(callees, start, stop=None):
    """The functions start holds and every function they call, at any depth
    (callee_map()), not going into a function stop(f) refuses."""
    seen, todo = set(start), list(start)
    while todo:
        for c in callees.get(todo.pop(), ()):
            if c not in seen and not (stop and stop(c)):
                seen.add(c)
                todo.append(c)
    return seen


def loop_excluded_callees(prof, fns):
    """The inclusive cost of the calls into EXCLUDE_CALLEES (by plain name)
    made by the loop functions fns or by any function they reach, an
    excluded one's own calls aside (counted at the outer call, as in
    Profile.excluded). A function the loop reaches and that is called from
    outside it too would have its outside calls counted here: the loops
    measured (rk bench's run_once) call the watchdog only from within."""
    i = prof.ev("Ir")
    seen = reached(callee_map(prof), fns, lambda f: plain_name(f[1]) in EXCLUDE_CALLEES)
    return sum(c[1 + i] for (a, b), c in prof.edges.items()
               if a in seen and a != b and plain_name(b[1]) in EXCLUDE_CALLEES)


def loop_excluded(prof, fns, loop):
    """The inclusive cost of the loop's calls that reach loop["minus_callers_of"]
    (a name or a list; at any depth), and of its calls of loop["minus_calls_to"]:
    ucx_perftest's loop prints a line of results every second of wall time,
    work that grows with the run's length (with the passes), not with n;
    it meets its peer at a barrier over the control socket twice a run
    (the function that calls GOMP_barrier: 15,000 to 88,000 instructions
    of waiting in runs of the same n, 4.6 % of the sender's figure from
    boot to boot); and it ends with ucp_worker_flush, a wait for the last message's send
    completion, once a run (from 2 to 226 passes of ucp_worker_progress in
    runs of the same n). And, whatever the spec names, the work
    EXCLUDE_CALLEES names (rk bench's watchdog: every 10 ms of wall time)
    at its calls from inside the loop (loop_excluded_callees): a loop's
    inclusive cost holds it as a whole program's total does."""
    i = prof.ev("Ir")
    v = loop_excluded_callees(prof, fns)
    stop = loop.get("minus_calls_to")
    if stop and plain_name(stop) not in EXCLUDE_CALLEES:  # those are out already
        v += sum(c[1 + i] for (a, b), c in prof.edges.items()
                 if a in fns and b not in fns and plain_name(b[1]) == stop)
    target = loop.get("minus_callers_of")
    if not target:
        return v
    targets = {target} if isinstance(target, str) else set(target)
    callees = {}
    for (a, b) in prof.edges:
        if a != b:
            callees.setdefault(a, set()).add(b)
    reaches = {}

    def reach(f, seen):
        if f in reaches:
            return reaches[f]
        if f in seen:
            return False
        seen.add(f)
        r = any(c[1].split("@")[0] in targets or reach(c, seen) for c in callees.get(f, ()))
        reaches[f] = r
        return r

    return v + sum(c[1 + i] for (a, b), c in prof.edges.items()
                   if a in fns and a != b and b not in fns
                   and (b[1].split("@")[0] in targets or reach(b, set())))


def run_figures(prof, provider, poll_fns, exclude_clock_callers=True, loop=None, passes=None):
    """The figures of one run that the fit needs.

    provider   basename of the verbs provider library (librxe-rdmav34.so)
    poll_fns   names (in that object) of its poll function(s)
    exclude_clock_callers
               False for a program whose timed loop itself reads the
               clock with gettimeofday (ucx_perftest): only its sort is
               taken out then, and its few calibration reads stay in the
               constant term, which the slope drops.
    loop       None, or the run's measured loop (loop_functions()): then
               ir is that loop's inclusive cost alone, and what the process
               does around it (start-up, wire-up, tear-down, other threads:
               UCX's asynchronous thread) is left out; ir_total keeps the
               whole. For the two-host cells, whose start-up varied by a
               million instructions between runs of the same n.
    passes     None, or the pass kinds of the run's wait loops (see
               pass_figures): then "passes" holds their counts and costs.
    Returns dict: ir (instructions without the excluded work), sys (system
    calls without the excluded ones and without clock reads), clock (the
    clock reads outside the excluded work), doorbells, polls (W),
    excluded_ir.
    """
    exc_ir = prof.excluded("Ir", exclude_clock_callers)
    exc_sys = prof.excluded("sysCount", exclude_clock_callers)
    clock = prof.self_of(lambda f: f in CLOCK_FUNCTIONS, "sysCount")
    # The excluded work's clock reads (perftest's calibration) are already out.
    clock = max(0, clock - prof.excluded_clock(exclude_clock_callers))
    in_provider = lambda f: f[0] == provider  # noqa: E731
    doorbells = prof.calls_to(lambda f: f[1] in DOORBELL_CALLEES, in_provider)
    polls = prof.calls_to(lambda f: f[0] == provider and f[1] in poll_fns,
                          lambda f: f[0] != provider)
    calls = {}
    for (caller, callee), c in prof.edges.items():
        if caller != callee and not (callee[0] == provider and callee[1] in poll_fns):
            name = "%s [%s]" % (callee[1], callee[0])
            calls[name] = calls.get(name, 0) + c[0]
    ir = prof.total("Ir") - exc_ir
    ir_total = ir
    if loop:
        fns = loop_functions(prof, loop)
        if not fns:
            raise ValueError("no loop function %r in the profile" % (loop,))
        ir = sum(prof.inclusive(f) for f in fns) - loop_excluded(prof, fns, loop)
    # The library's waits, inclusive: what waiting costs a library program.
    # At each call from outside them, by plain name: a wait's clone
    # (rk_wait.part.0) or a wait called from another is not counted twice.
    i_ir = prof.ev("Ir")
    wait_ir = sum(c[1 + i_ir] for (a, b), c in prof.edges.items()
                  if plain_name(b[1]) in WAIT_FUNCTIONS and plain_name(a[1]) not in WAIT_FUNCTIONS)
    out = {"ir": ir, "ir_total": ir_total, "sys": prof.total("sysCount") - exc_sys - clock,
           "clock": clock, "doorbells": doorbells, "polls": polls, "excluded_ir": exc_ir, "calls": calls,
           "wait_ir": wait_ir}
    if passes:
        out["passes"] = pass_figures(prof, passes, provider, poll_fns)
    out["sleeps"] = sleep_figures(prof)
    return out


# --- the fit -----------------------------------------------------------------

def _solve(m, y):
    """Solve the small linear system m x = y (Gauss-Jordan, partial pivot)."""
    n = len(y)
    a = [list(map(float, row)) + [float(v)] for row, v in zip(m, y)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < 1e-12:
            raise ZeroDivisionError("singular system")
        a[col], a[piv] = a[piv], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                for j in range(col, n + 1):
                    a[r][j] -= f * a[col][j]
    return [a[r][n] / a[r][r] for r in range(n)]


def lstsq(xs, y):
    """Least squares y ~ xs (rows of regressors) via the normal equations,
    each column scaled to a largest value of 1 first (the columns here
    differ by orders of magnitude: 1, n, pass counts)."""
    k = len(xs[0])
    scale = [max(abs(r[j]) for r in xs) or 1.0 for j in range(k)]
    zs = [[r[j] / scale[j] for j in range(k)] for r in xs]
    m = [[sum(r[i] * r[j] for r in zs) for j in range(k)] for i in range(k)]
    v = [sum(r[i] * yy for r, yy in zip(zs, y)) for i in range(k)]
    return [c / s for c, s in zip(_solve(m, v), scale)]


def residual(cols, x):
    """The largest |residual| of x after its least-squares fit on cols
    (a list of columns); 0 when the system is singular."""
    rows = [list(r) for r in zip(*cols)]
    try:
        coef = lstsq(rows, x)
    except ZeroDivisionError:
        return 0.0
    return max(abs(xi - sum(c * ri for c, ri in zip(coef, r))) for xi, r in zip(x, rows))


def slope(points, key):
    """Plain slope of the key over n: (mean at the largest n - mean at the
    smallest n) / (difference of the n)."""
    ns = sorted({p["n"] for p in points})
    if len(ns) < 2:
        raise ValueError("runs at two iteration counts are needed")
    lo = [p[key] for p in points if p["n"] == ns[0]]
    hi = [p[key] for p in points if p["n"] == ns[-1]]
    return (sum(hi) / len(hi) - sum(lo) / len(lo)) / (ns[-1] - ns[0])


# A pass count enters the fit only when it varies apart from what is
# already in it by at least this many calls.
MIN_RESIDUAL = 0.5
# A second pass count is looked for only when the fit leaves a residual
# above this fraction of the whole work of the runs' difference in n.
SECOND_TOLERANCE = 0.002


def fit(points, k=1.0, key="ir", allow_fit=True):
    """Work per operation from runs [{n, ir, polls, calls}, ...].

    Fits  key = a + b*n + c*(polls - k*n) [+ d*X]  by least squares, where
    polls are the calls of the provider's poll function and X the call
    count of another function, taken only when the fit without it leaves a
    residual above SECOND_TOLERANCE (0.2 %) of the work between the two n:
    a second wait loop that polls no CQ (a server that spins before its
    first connection). X is the function whose count, added, leaves the
    smallest residual (at most half the one before). A regressor enters
    only when it varies apart from those already in by at least half a
    call (MIN_RESIDUAL) and the runs leave at least one degree of freedom
    for it; a term whose price comes out negative is dropped again (the
    runs cannot tell it apart); with none, or allow_fit False, the plain
    slope. Returns a dict: per_op (b), raw
    (the plain slope), poll_cost (c or None), second (X's name and d, or
    None), method ("slope", "fit" or "fit2"), extra_polls_per_op (mean of
    (polls - k*n) / n).
    """
    raw = slope(points, key)
    n = [float(p["n"]) for p in points]
    e = [p["polls"] - k * p["n"] for p in points]
    y = [float(p[key]) for p in points]
    out = {"raw": raw, "per_op": raw, "poll_cost": None, "second": None, "method": "slope",
           "extra_polls_per_op": sum(ei / ni for ei, ni in zip(e, n)) / len(n)}
    if len(set(n)) < 2 or not allow_fit:
        return out
    cols, names = [[1.0] * len(n), n], ["a", "b"]
    if len(points) >= len(cols) + 2 and residual(cols, e) >= MIN_RESIDUAL:
        cols.append(e)
        names.append("polls")
    calls = [p.get("calls") or {} for p in points]
    tol = SECOND_TOLERANCE * abs(raw) * (max(n) - min(n))
    if len(points) >= len(cols) + 2 and calls[0] and residual(cols, y) > tol:
        best, best_r = None, residual(cols, y) / 2
        for f in sorted(set().union(*calls)):
            x = [float(c.get(f, 0)) for c in calls]
            if residual(cols, x) < MIN_RESIDUAL:
                continue
            r = residual(cols + [x], y)
            if r < best_r:
                best, best_r = f, r
        if best is not None:
            cols.append([float(c.get(best, 0)) for c in calls])
            names.append(best)
    if len(cols) == 2:
        return out
    # Waiting costs something: a negative price for a pass means the runs
    # cannot tell it from the rest (too few passes, or too few operations
    # for them): drop that term, the second first.
    while len(cols) > 2:
        try:
            coef = lstsq([list(r) for r in zip(*cols)], y)
        except ZeroDivisionError:
            coef = None
        if coef is not None and min(coef[2:]) >= 0:
            break
        cols.pop()
        names.pop()
    if len(cols) == 2:
        out["method"] = "slope"
        return out
    out["per_op"] = coef[1]
    if "polls" in names:
        out["poll_cost"] = coef[names.index("polls")]
    if len(names) > 2 and names[-1] != "polls":
        out["second"] = [names[-1], coef[-1]]
    out["method"] = "fit" if len(names) == 3 else "fit2"
    return out


def spread(values):
    """(max - min) / mean, in percent."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    m = sum(vals) / len(vals)
    return 100.0 * (max(vals) - min(vals)) / abs(m) if m else 0.0


def per_op_functions(prof_lo, prof_hi, n_lo, n_hi, event="Ir", top=None):
    """Per function: (inclusive at n_hi - inclusive at n_lo) / (n_hi - n_lo)
    and the same for the self cost; {name: [incl, self]} (names as
    "fn [object]"), the largest first when top is given."""
    il, ih = prof_lo.inclusive_table(event), prof_hi.inclusive_table(event)
    sl, sh = prof_lo.self_table(event), prof_hi.self_table(event)
    d = float(n_hi - n_lo)
    out = {}
    for fn in set(il) | set(ih):
        inc = (ih.get(fn, 0) - il.get(fn, 0)) / d
        slf = (sh.get(fn, 0) - sl.get(fn, 0)) / d
        if abs(inc) >= 0.5 or abs(slf) >= 0.5:
            out["%s [%s]" % (fn[1], fn[0])] = [round(inc, 1), round(slf, 1)]
    if top:
        keep = sorted(out, key=lambda f: -out[f][1])[:top]
        out = {f: out[f] for f in keep}
    return out


def grown(base_fns, new_fns, top=5):
    """The functions whose self cost per operation grew most from the
    baseline to now: [(name, before, after)]."""
    names = set(base_fns) | set(new_fns)
    d = []
    for f in names:
        before = base_fns.get(f, [0, 0])[1]
        after = new_fns.get(f, [0, 0])[1]
        d.append((after - before, f, before, after))
    d.sort(reverse=True)
    return [(f, b, a) for g, f, b, a in d[:top] if g > 0]


def fmt_num(v, digits=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return ("%%.%df" % digits) % v


# --- waiting counted apart: the price of an empty pass --------------------------
#
# Where a client goes round its poll loop tens of times per operation (two
# hosts, one CPU each: the answer takes a millisecond), the fit above prices
# a pass from the whole run's instructions, and an error of one instruction
# in that price moves the figure by the tens of passes per operation; where
# a client waits in several loops whose passes differ in price, one price
# for all of them is wrong by tens of instructions. Here the waiting is
# counted apart instead (count_fit). Each pass kind names the function its
# loop lives in ("in") and the function it calls once per pass ("call": the
# provider's poll, ucp_worker_progress, ...). A loop's own cost (the self
# cost of "in" plus the inclusive cost of its calls of "call") depends on
# nothing but its counts (passes, calls, fallbacks) and n, so its least-
# squares fit on them over the runs is all but exact: an empty pass is a
# fixed path, a whole number of instructions, and the fit lands within a
# tenth of it (then the integer is the price, "exact"), or on a fraction
# where a pass reads the clock every so many passes. The work per
# operation is the plain slope of each run's instructions less
# price * (count - kept * n) for every kind: no price is fitted on the
# whole run, whose other parts (a wire-up finished inside the loop, a
# report) do not follow the passes.

INTEGER_TOLERANCE = 0.1  # a fit this close to a whole number is taken as it


_SUFFIX_RE = re.compile(r"(\.(lto_priv|constprop|isra|part|cold)\.\d+)+$")


def plain_name(name):
    """A function's name without its symbol version ("@@GLIBC_2.17") and
    the suffixes of gcc's clones (".lto_priv.0", ".constprop.0"): the same
    function under the names different builds give it."""
    return _SUFFIX_RE.sub("", name.split("@")[0])


def _match(fn, name, provider=None, poll_fns=()):
    """fn (object, name) against a pass spec's name: "@poll" is the
    provider's poll function; other names match as plain_name()s."""
    if name == "@poll":
        return fn[0] == provider and fn[1] in poll_fns
    return plain_name(fn[1]) == name


def pass_edges(prof, ins, call, provider=None, poll_fns=()):
    """The call edges (in -> X) through which the functions ins call `call`
    once per pass: X is `call` itself, or a stub whose every callee is
    `call` (a PLT entry: stripped programs call libraries through them)."""
    out = []
    callees = {}
    for (a, b) in prof.edges:
        if a != b:
            callees.setdefault(a, set()).add(b)
    for (a, b) in prof.edges:
        if a not in ins or a == b:
            continue
        if _match(b, call, provider, poll_fns):
            out.append((a, b))
        elif b in callees and b not in ins and all(_match(c, call, provider, poll_fns)
                                                   for c in callees[b]):
            out.append((a, b))
    return out


def pass_figures(prof, passes, provider=None, poll_fns=()):
    """Per pass kind (a spec's "passes": [{"name", "in", "call", "kept"}]):
    its count (the calls through pass_edges) and, per loop function, the
    loop's cost: the self cost of the "in" functions plus the inclusive cost
    of every pass edge out of them. A kind with "via" (a loop spec) counts
    the calls of "call" made from those functions instead and adds no cost:
    a path through the loop function that the fit must know of (its calls,
    how often it falls back to a slower wait), not a pass. A kind with
    "cost_only" adds its calls' cost to the loop's and is no count of the
    fit (rk_cq_take in the spin: its count is the spin's finds). A
    "measured" kind (measured_waiting) is counted and adds no cost. Returns
    {"count": {kind: calls}, "cost": {in-name: Ir}}."""
    count, cost = {}, {}
    i = prof.ev("Ir")
    for p in passes:
        ins = set(loop_functions(prof, p["in"]))
        if not ins:
            raise ValueError("no loop function %r in the profile" % (p["in"],))
        key = loop_key(p["in"])
        if key not in cost:
            cost[key] = sum(prof.self_cost.get(f, [0] * len(prof.events))[i] for f in ins)
        if p.get("measured") is not None:
            # Its waiting is measured whole (measured_waiting): no loop cost.
            count[p["name"]] = sum(prof.edges[e][0]
                                   for e in pass_edges(prof, ins, p["call"], provider, poll_fns))
            continue
        if "via" in p:
            edges = pass_edges(prof, set(loop_functions(prof, p["via"])), p["call"], provider,
                               poll_fns)
            count[p["name"]] = sum(prof.edges[e][0] for e in edges)
            continue
        edges = pass_edges(prof, ins, p["call"], provider, poll_fns)
        count[p["name"]] = sum(prof.edges[e][0] for e in edges)
        cost[key] += sum(prof.edges[e][1 + i] for e in edges)
    return {"count": count, "cost": cost}


def exact_pass_prices(path_or_lines, prof, passes, provider=None, poll_fns=()):
    """{kind: price} for the kinds of passes priced from the instruction
    counts of a --dump-instr=yes profile ("exact": see pass_price), the
    loop being the one function of the kind's "in" that makes its calls;
    {} when there are none."""
    kinds = [p for p in passes if p.get("exact")]
    if not kinds:
        return {}
    counts = instr_counts(path_or_lines, lambda f: True)
    out = {}
    for p in kinds:
        # The loop is the function that makes the pass's calls: one of the
        # kind's "in" functions (the others hold its other passes).
        edges = pass_edges(prof, set(loop_functions(prof, p["in"])), p["call"], provider, poll_fns)
        loop = sorted({a for (a, b) in edges})
        callee = [b for (a, b) in edges]
        if len(loop) != 1 or len(set(callee)) != 1:
            raise ValueError("%s: no single loop and callee (%r, %r)" % (p["name"], loop, callee))
        out[p["name"]] = pass_price(counts, prof, loop[0], callee[0])
    return out


def measured_waiting(path_or_lines, prof, passes, provider=None, poll_fns=()):
    """{kind: instructions} for the kinds of pass whose waiting is measured
    whole in each run ("measured": {"work": [names], "found": [names]}):
    the inclusive cost of the loop's calls of "call" (the RPC client's
    fallback to its wait set: wait_round), less the work done inside them:
    the inclusive cost of the calls of a "work" function made there (the
    answers found in the wait, on_wc_waited), and what each call of a
    "found" function made there (rk_cq_poll, poll_cqs) cost beyond an empty
    one (empty_call_price, from the instruction counts): a completion found
    in the wait costs what finding it costs, and that stays in the work,
    as it does when the spin finds it. Nothing is fitted: the rounds, the
    wait set's spins, its looks at the fds and its clock readings are
    priced by what they ran. {} when there are none."""
    kinds = [p for p in passes if p.get("measured") is not None]
    if not kinds:
        return {}
    counts = None
    i = prof.ev("Ir")
    callees = callee_map(prof)
    out = {}
    for p in kinds:
        loop = set(loop_functions(prof, p["in"]))
        edges = pass_edges(prof, loop, p["call"], provider, poll_fns)
        total = sum(prof.edges[e][1 + i] for e in edges)
        inside = reached(callees, {b for (a, b) in edges}, lambda f: f in loop)
        m = p["measured"]
        work = sum(c[1 + i] for (a, b), c in prof.edges.items()
                   if a in inside and a != b and plain_name(b[1]) in m.get("work", ()))
        # A found function's calls of another (poll_cqs's of rk_cq_poll) are
        # in its own cost: counted at the outer call only.
        under = reached(callees, {f for f in inside if plain_name(f[1]) in m.get("found", ())})
        found = 0
        for (a, b), c in prof.edges.items():
            if a in inside and a not in under and a != b and plain_name(b[1]) in m.get("found", ()):
                if counts is None:
                    counts = instr_counts(path_or_lines, lambda f: True)
                found += c[1 + i] - c[0] * empty_call_price(counts, prof, b)
        out[p["name"]] = total - work - found
    return out


def empty_call_price(counts, prof, fn, memo=None):
    """The instructions one call of fn runs when it finds nothing, from the
    instruction counts (instr_counts) of a run in which most of its calls
    find nothing (an empty poll): fn's instructions executed in more than
    half of its C calls, each round(count / C) times a call, and the same
    of its callees called in more than half of them (their price per call
    from their own counts, or their inclusive cost per call)."""
    memo = {} if memo is None else memo
    if fn in memo:
        return memo[fn]
    c_fn = sum(c[0] for (a, b), c in prof.edges.items() if b == fn and a != b)
    if not c_fn or fn not in counts:
        raise ValueError("no calls of %r to price" % (fn,))
    e = sum(round(c / c_fn) for c in counts[fn].values() if 2 * c > c_fn)
    i = prof.ev("Ir")
    for (a, b), c in prof.edges.items():
        if a == fn and b != fn and 2 * c[0] > c_fn:
            per = round(c[0] / c_fn)
            e += per * (empty_call_price(counts, prof, b, memo) if b in counts and b[1] != "???"
                        else c[1 + i] / c[0])
    memo[fn] = e
    return e


def pass_price(counts, prof, loop_fn, callee):
    """An empty pass of the busy loop in loop_fn that calls callee once a
    pass: the instructions of the loop an idle pass runs (spin_loop's
    length) and an empty call of callee (empty_call_price). The RPC
    client's spins: rk__rpc_cl_handle 10 + rxe's empty poll 41; rk_wait's
    one-CQ spin 19 + rk_cq_poll's empty 61; spin()'s 50 + poll_cqs's 123."""
    return spin_loop(counts[loop_fn])["length"] + empty_call_price(counts, prof, callee)


def loop_key(spec):
    name = spec.get("name")
    if isinstance(name, list):
        return "+".join(name)
    return name or "caller of " + spec["caller_of"]


def pass_prices(points, passes):
    """The price of an empty pass of each kind, from the runs' pass_figures
    (points[i]["passes"]): per loop function, least squares of its cost on
    its kinds' counts, n and 1. Returns {kind: {"price", "fitted",
    "exact", "residual", "unpriced"}}: price is the nearest integer when the
    fit lands within INTEGER_TOLERANCE of one (exact), else the fitted value;
    0 for a count that follows another kind's (priced with it) or that does
    not vary apart from n (unpriced: its waiting stays in the work)."""
    groups = {}
    for p in passes:
        if p.get("measured") is None:
            groups.setdefault(loop_key(p["in"]), []).append(p["name"])
    priced = {p["name"] for p in passes if p.get("kept") is not None}
    cost_only = {p["name"] for p in passes if p.get("cost_only")}
    out = {}
    # Kinds priced from the instruction counts: the same price in every run
    # (else the path is not what the spec says), taken out of their loop's
    # cost before the rest of it is fitted.
    counted = {p["name"] for p in passes if p.get("exact")}
    for k in counted:
        seen = {pt["passes"]["price"][k] for pt in points}
        if len(seen) != 1:
            raise ValueError("the price of a %s pass differs between runs: %r" % (k, sorted(seen)))
        out[k] = {"price": float(seen.pop()), "fitted": None, "exact": True, "residual": None,
                  "counted": True}
    for key, kinds in groups.items():
        y = [float(pt["passes"]["cost"][key])
             - sum(out[k]["price"] * pt["passes"]["count"][k] for k in kinds if k in counted)
             for pt in points]
        cols = [[float(pt["n"]) for pt in points], [1.0] * len(points)]
        names = []
        # A path count that does not vary apart from n and the kinds already
        # in (every call fell back to the slower wait, or none did) is left
        # out; a pass kind that does not cannot be priced.
        for k in sorted(kinds, key=lambda k: k not in priced):
            if k in counted:
                continue
            if k in cost_only or (k not in priced
                                  and any(k not in pt["passes"]["count"] for pt in points)):
                continue  # a path count the runs were not taken with: none
            x = [float(pt["passes"]["count"][k]) for pt in points]
            if residual(cols, x) < MIN_RESIDUAL:
                # A count that follows a kind already in (a call of spin()
                # per look at the fds) is priced with that kind; waiting
                # whose count follows n (or is the same in every run) cannot
                # be told from the work and stays in it ("unpriced").
                alone = k in priced and any(x) and residual(cols[:2], x) < MIN_RESIDUAL
                out[k] = {"price": 0.0, "fitted": None, "exact": k in priced and not alone,
                          "residual": None, "unpriced": alone}
                continue
            if len(points) < len(cols) + 2:  # no degree of freedom left for it
                if k in priced:
                    raise ValueError("%d runs cannot price the passes of %s" % (len(points), key))
                out[k] = {"price": 0.0, "fitted": None, "exact": False, "residual": None}
                continue
            cols.append(x)
            names.append(k)
        rows = [list(r) for r in zip(*cols)]
        coef = lstsq(rows, y)
        res = max(abs(yy - sum(c * r for c, r in zip(coef, row))) for yy, row in zip(y, rows))
        nonneg = {p["name"] for p in passes if p.get("nonneg")}
        for k, c in zip(names, coef[2:]):
            exact = abs(c - round(c)) <= INTEGER_TOLERANCE
            out[k] = {"price": float(round(c)) if exact else c, "fitted": c, "exact": exact,
                      "residual": res}
            if c < 0 and k in nonneg:
                # Waiting costs something: a function whose polls price out
                # negative is no loop the runs can tell (a CQ look that
                # translates what it finds): its cost stays in the work.
                out[k].update(price=0.0, exact=False, unpriced=True)
    return out


def count_fit(points, passes, key="ir"):
    """Work per operation with the waiting counted apart (see above):
    the plain slope of key - sum(price * (count - kept * n)) over the kinds,
    less each run's measured waiting of the "measured" kinds
    (measured_waiting). Returns a dict like fit()'s: per_op, raw, method
    "count", prices (per kind), waiting_per_op (the mean of the waiting
    taken out, per op), extra passes per op (per priced kind) and the
    measured waiting per op (per measured kind)."""
    if len(points) < 4:
        raise ValueError("%d runs cannot price a pass" % len(points))
    # A client whose passes follow n (ucx_perftest's sender, 8 in flight:
    # a progress call every 150 messages or so) does not wait: nothing is
    # priced, and the figure is the plain slope.
    prices = pass_prices(points, passes)
    adj = []
    waits = [p for p in passes if p.get("kept") is not None and p.get("measured") is None]
    measured = [p["name"] for p in passes if p.get("measured") is not None]
    for pt in points:
        w = sum(prices[p["name"]]["price"] * (pt["passes"]["count"][p["name"]] - p["kept"] * pt["n"])
                for p in waits)
        w += sum(pt["passes"]["measured"][k] for k in measured)
        adj.append(dict(pt, _work=pt[key] - w, _wait=w))
    return {"raw": slope(points, key), "per_op": slope(adj, "_work"), "method": "count",
            "poll_cost": None, "second": None, "prices": prices,
            "unpriced": sorted(k for k, v in prices.items() if v.get("unpriced")),
            "waiting_per_op": sum(a["_wait"] / a["n"] for a in adj) / len(adj),
            "extra_passes_per_op": {p["name"]: sum((pt["passes"]["count"][p["name"]] - p["kept"] * pt["n"])
                                                   / pt["n"] for pt in points) / len(points)
                                    for p in waits},
            "measured_per_op": {k: sum(pt["passes"]["measured"][k] / pt["n"] for pt in points)
                                / len(points) for k in measured}}


# --- event mode: one arming and one sleep per operation -----------------------
#
# An event-mode waiter arms its CQ, finds it empty, sleeps on the channel
# and reads the one event; whether it gets that far on a given operation
# follows the peer's timing (the answer may already be there when the CQ
# is polled after the arming). Under TCG the share of operations that
# sleep moved from 0.53 to 0.77 between runs of one program, and each
# sleep costs about 300 user-space instructions (the arming's ioctl path
# alone is 238), so plain slopes moved by +-25 with it and fits on the
# whole run's instructions were not sound (bench/README.md, round seven).
# The pieces of a sleep are library calls whose cost per call does not
# depend on timing: the arming (ibv_cmd_req_notify_cq, libibverbs' ioctl
# path under the provider's req_notify), the sleep itself (poll(2)), and the
# event's read and its acknowledgement (ibv_get_cq_event,
# ibv_ack_cq_events). Each is priced by its own inclusive cost per call,
# over all runs of a side, and every operation is counted as paying one
# arming and one sleep at those prices: the figure of an event-mode round
# trip that sleeps once, as the mode is meant to. Sleeps are counted by the
# event reads (a poll(2) that times out reads none; perftest's blocking
# ibv_get_cq_event is a sleep by itself). The rest of a sleep (the CQ poll
# after the arming, a clock reading, the wait's own branches) is the
# waiter's code: fitted on the sleeps' count where the runs tell it apart
# from n (one_sleep).

SLEEP_KINDS = (
    # kind, the calls that count it, the calls whose inclusive cost it is
    ("arm", ("ibv_cmd_req_notify_cq",), ("ibv_cmd_req_notify_cq",)),
    ("sleep", ("ibv_get_cq_event",), ("poll", "ibv_get_cq_event", "ibv_ack_cq_events")),
)
# A poll(2) is a sleep's when the function that makes it reads the channel's
# event itself or through one of these (rk's, for one CQ): not a look at a
# control channel or at the CM channel.
EVENT_READERS = ("ibv_get_cq_event", "consume_one", "rk__cq_consume_one")
# The sleeps' count enters a fit (one_sleep) when it varies apart from n by
# at least this share of the operations: the RPC client sleeps on 95 to
# 99 % of its calls (a residual of 0.3 to 3.4 % of them), rk's SEND round
# trip on 42 to 101 % (8 to 17 %).
SLEEP_VARIES = 0.05


def sleep_figures(prof, event="Ir"):
    """{kind: [calls, inclusive cost]} of the pieces of the event waits
    (SLEEP_KINDS), at each call from outside the kind's own functions; the
    calls of poll(2) only from a function that reads a CQ's event
    (EVENT_READERS)."""
    i = prof.ev(event)
    sleepers = {a for (a, b) in prof.edges if a != b and plain_name(b[1]) in EVENT_READERS}
    out = {}
    for kind, counted, priced in SLEEP_KINDS:
        calls = cost = 0
        for (a, b), c in prof.edges.items():
            if a == b or plain_name(a[1]) in priced:
                continue
            name = plain_name(b[1])
            if name == "poll" and a not in sleepers:
                continue
            if name in counted:
                calls += c[0]
            if name in priced:
                cost += c[1 + i]
        out[kind] = [calls, cost]
    return out


def one_sleep(points, key="ir"):
    """Work per operation of an event-mode side counted as if every
    operation armed its CQ once and slept once (see above). The library
    pieces of a sleep (SLEEP_KINDS) come out of each run at their own cost
    and go back in at their price (their inclusive cost per call over all
    the runs) once per operation. What else a sleep costs (the CQ poll
    after the arming, a clock reading, the wait's own branches: a few
    hundred instructions) is fitted on the sleeps' count, key - pieces =
    a + b*n + c*S, when that count varies apart from n by at least
    SLEEP_VARIES of the operations (else the side sleeps on nearly every
    operation or on a fixed share of them, c cannot be told from b and the
    rest stays as it ran); the figure is then b + c + the prices. A
    negative c is no price (the runs cannot tell it): not fitted. A kind
    no run made cannot be priced: the side never sleeps, and the figure is
    the plain slope (method "slope"). Returns a dict like fit()'s, with
    the prices, the rest's price (rest_price, or None), and the kinds'
    calls per operation (the mean over the runs)."""
    raw = slope(points, key)
    prices, per_op = {}, {}
    for kind, _, _ in SLEEP_KINDS:
        calls = sum(p["sleeps"][kind][0] for p in points)
        per_op[kind] = sum(p["sleeps"][kind][0] / p["n"] for p in points) / len(points)
        if calls:
            prices[kind] = sum(p["sleeps"][kind][1] for p in points) / calls
    out = {"raw": raw, "per_op": raw, "method": "slope", "poll_cost": None, "second": None,
           "sleep_prices": prices, "rest_price": None, "sleeps_per_op": per_op}
    if len(prices) < len(SLEEP_KINDS):
        return out
    y = [float(p[key] - sum(p["sleeps"][k][1] for k in prices)) for p in points]
    n = [float(p["n"]) for p in points]
    sleeps = [float(p["sleeps"]["sleep"][0]) for p in points]
    cols = [[1.0] * len(n), n]
    adj = [dict(p, _one=yy) for p, yy in zip(points, y)]
    out.update(per_op=slope(adj, "_one") + sum(prices.values()), method="sleep")
    if len(points) >= 4 and residual(cols, sleeps) >= SLEEP_VARIES * sum(n) / len(n):
        coef = lstsq([list(r) for r in zip(*(cols + [sleeps]))], y)
        if coef[2] >= 0:
            out.update(per_op=coef[1] + coef[2] + sum(prices.values()), rest_price=coef[2],
                       method="sleep_fit")
    return out


# --- a wait that polls nothing (WRITE latency) --------------------------------
#
# Both WRITE latency programs wait for the peer's WRITE by reading a byte of
# their buffer in a loop that calls nothing, so the poll function's calls do
# not count its passes and the fit cannot price them. The profile can: run
# with callgrind's --dump-instr=yes, it gives every instruction's execution
# count (its Ir). In the function that holds the loop, the loop's load is the
# most executed instruction (P: the passes); the loop is the function's
# instructions executed at least P/2 times (the code around it runs once a
# wait, the loop dozens of times). Its head (the load and the exit test)
# runs P times, once a pass; the rest N times, once an idle pass (a pass
# that found nothing and goes round again), N the most of them (an idle
# pass may leave by a rare path). Taken out: every instruction of the loop
# but one head per wait, (P - N) heads: the pass that found the WRITE
# stays, one per wait, as the fit keeps k passes of a CQ poller. Work the
# loop does now and then (rk's watchdog every 256 idle passes) is not in
# the loop and stays in the figure.


def _position(tok, last):
    """One position of a cost line: absolute (0x.. or decimal), relative
    (+N, -N) to the last, or * (the same)."""
    if tok == "*":
        return last
    if tok[0] in "+-":
        return last + int(tok, 0)
    return int(tok, 0)


def instr_counts(path_or_lines, pick):
    """Per-instruction Ir of the functions pick((object basename, fn))
    accepts, from a callgrind file written with --dump-instr=yes (positions
    "instr ..."): {(obj, fn): {address: Ir}}. The cost lines of calls (the
    callee's inclusive cost at the call instruction) are not counted."""
    if isinstance(path_or_lines, (str, bytes, os.PathLike)):
        with open(path_or_lines, encoding="utf-8", errors="replace") as f:
            return instr_counts(f, pick)
    names = {"ob": {}, "fn": {}}
    out = {}
    ob = fn = None
    instr_pos = False
    npos = 1
    last = 0
    after_calls = False

    def name(kind, value):
        m = _NAME_RE.match(value)
        if not m:
            return value
        table = names[kind]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "(%s)" % m.group(1))

    for raw in path_or_lines:
        line = raw.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        if _POS_RE.match(line):
            tokens = line.split()
            if instr_pos:
                last = _position(tokens[0], last)
            if not after_calls and instr_pos and (ob, fn) in out and len(tokens) > npos:
                cnt = out[(ob, fn)]
                cnt[last] = cnt.get(last, 0) + int(tokens[npos], 0)
            after_calls = False
            continue
        key, sep, val = line.partition("=")
        if sep:
            if key in ("ob", "cob"):
                n = _base(name("ob", val))
                if key == "ob":
                    ob = n
            elif key in ("fn", "cfn"):
                n = name("fn", val)
                if key == "fn":
                    fn = n
                    if pick((ob, fn)):
                        out.setdefault((ob, fn), {})
            elif key == "calls":
                after_calls = True
            continue
        key, sep, val = line.partition(":")
        if sep and key == "positions":
            instr_pos = val.split()[0] == "instr"
            npos = len(val.split())
    if not instr_pos:
        raise ValueError("no instruction positions: run callgrind with --dump-instr=yes")
    return out


# An instruction runs "once an operation" in a run when its count is within
# this share of n (the receiver of ucp_am_bw: 3,984 of 4,000 messages reach
# its handler from the progress function, 16 from the flow control's).
ONCE_SHARE = 0.01


def counts_under(path_or_lines, prof, root):
    """The instruction counts of root's calls (root, any object, and every
    function it reaches), from a --dump-instr=yes profile, as
    {"object:function:address": count}."""
    roots = {f for f in prof.functions() if plain_name(f[1]) == root}
    if not roots:
        raise ValueError("no function %r in the profile" % root)
    seen = reached(callee_map(prof), roots)
    counts = instr_counts(path_or_lines, lambda f: f in seen)
    return {"%s:%s:%x" % (fn[0], fn[1], a): c for fn, cnt in counts.items() for a, c in cnt.items()}


def once_floor(points, key="under"):
    """The instructions that ran once an operation (within ONCE_SHARE of n)
    in every run (points: {"n", key: counts_under()}): work each operation
    does, counted exactly, whatever the waiting around it; a floor under
    the side's work. Returns {"floor": how many, "functions": {function:
    how many}}."""
    sets = [{k for k, c in p[key].items() if abs(c - p["n"]) <= ONCE_SHARE * p["n"]}
            for p in points]
    both = set.intersection(*sets) if sets else set()
    fns = {}
    for k in both:
        fn = k.rsplit(":", 1)[0]
        fns[fn] = fns.get(fn, 0) + 1
    return {"floor": len(both), "functions": fns}


def spin_loop(counts):
    """The busy loop of one function's instruction counts ({address: Ir},
    instr_counts()): dict load (the most executed instruction's address),
    passes (P, its count), idle (N: the passes that found nothing), length
    (instructions an idle pass runs), head (those every pass runs, the
    exit test), ir (what is taken out: the loop's instructions less one
    head per wait). Raises ValueError when no instruction of the loop ran
    fewer than P times (too few idle passes to tell the loop apart)."""
    if not counts:
        raise ValueError("no instructions")
    p = max(counts.values())
    load = min(a for a, c in counts.items() if c == p)
    loop = [c for c in counts.values() if 2 * c >= p]
    tail = [c for c in loop if c < p]
    if not tail:
        raise ValueError("no idle pass of the loop at %#x to count (%d passes)" % (load, p))
    idle = max(tail)
    head = len(loop) - len(tail)
    return {"load": load, "passes": p, "idle": idle, "length": len(loop), "head": head,
            "ir": sum(loop) - (p - idle) * head}


SPIN_CANDIDATES = 3  # a stripped program's loop functions looked at in each run


def spin_function(prof_counts, where, skip=(), top=1):
    """The function that holds the loop: where {"fn": NAME} (by name, any
    object) or {"hottest_in": OBJ} (a stripped program: the function of
    object OBJ that holds its most executed instruction, of those not in
    skip: perftest's clock calibration spins more than its WRITE wait, and
    its cost is left out of the figures already)."""
    if "fn" in where:
        fns = [f for f in prof_counts if f[1] == where["fn"]]
    else:
        fns = [f for f in prof_counts
               if f[0] == where["hottest_in"] and prof_counts[f] and f not in skip]
        fns = sorted(fns, key=lambda f: -max(prof_counts[f].values()))[:top]
        if top > 1 and fns:
            return fns
    if len(fns) != 1:
        raise ValueError("no single loop function for %r: %r" % (where, fns))
    return fns[0]


def spin_figures(path_or_lines, where, prof=None):
    """The WRITE wait's idle passes in one profile (see above): spin_loop()
    of the function where names, plus fn (its name). prof: the same file
    parse()d (read again when not given); the callers of
    EXCLUDE_CALLERS_OF in it, left out already, are not looked at."""
    lines = path_or_lines
    if not isinstance(lines, (str, bytes, os.PathLike)):
        lines = list(lines)
    if prof is None:
        prof = parse(lines)
    skip = {caller for (caller, callee) in prof.edges if callee[1] in EXCLUDE_CALLERS_OF}
    if "fn" in where:
        pick = lambda f: f[1] == where["fn"]  # noqa: E731
    else:
        pick = lambda f: f[0] == where["hottest_in"]  # noqa: E731
    counts = instr_counts(lines, pick)
    if "fn" in where:
        fn = spin_function(counts, where, skip)
        out = spin_loop(counts[fn])
        out["fn"] = "%s [%s]" % (fn[1], fn[0])
        return out
    # A stripped program: the hottest of its functions holds the wait in
    # most runs, not in all (ib_write_lat's loop of CQ polls outran it in
    # one run of four): each run keeps its SPIN_CANDIDATES hottest loops,
    # and agree_spins() picks the one loop of every run.
    cands = []
    for i, fn in enumerate(spin_function(counts, where, skip, top=SPIN_CANDIDATES)):
        try:
            c = spin_loop(counts[fn])
        except ValueError:
            if i == 0:  # the hottest function holds no loop to count: as before
                raise
            continue
        c["fn"] = "%s [%s]" % (fn[1], fn[0])
        cands.append(c)
    out = dict(cands[0])
    out["candidates"] = cands
    return out


def agree_spins(spins):
    """One loop for every run of a side: of the loops (function, load)
    that are among every run's candidates, the hottest in the most runs
    (then the one with the most passes), which must be the hottest in
    more than half of them (else ValueError); each run's figures are that
    loop's. spins: the runs' spin
    figures (spin_figures); returns them, chosen (unchanged when no run
    has candidates or every run's first is the same loop)."""
    if not all(sp.get("candidates") for sp in spins):
        return spins
    keys = [{(c["fn"], c["load"]) for c in sp["candidates"]} for sp in spins]
    common = set.intersection(*keys)
    if not common:
        raise ValueError("no busy loop common to the runs: %r" % [sorted(k) for k in keys])

    def score(key):  # the runs whose hottest loop it is, then its passes
        return (sum((sp["candidates"][0]["fn"], sp["candidates"][0]["load"]) == key
                    for sp in spins),
                sum(c["passes"] for sp in spins for c in sp["candidates"]
                    if (c["fn"], c["load"]) == key))

    best = max(sorted(common), key=score)
    if 2 * score(best)[0] <= len(spins):
        # No loop is the hottest in most runs: which one is the wait cannot
        # be told, and taking out another (the CQ's polls) is the error
        # this guards against.
        raise ValueError("no busy loop is the hottest in most runs: %r"
                         % [(c["fn"], c["load"]) for c in (sp["candidates"][0] for sp in spins)])
    out = []
    for sp in spins:
        c = next(c for c in sp["candidates"] if (c["fn"], c["load"]) == best)
        out.append(dict(c, candidates=sp["candidates"]))
    return out


# --- every poller counted apart (the one-host busy cells) ---------------------
#
# On one host a busy side waits in every loop that polls its CQ: the measured
# loop (rk bench's, perftest's run_iter function), and the few short waits
# around it (perftest's connection and teardown polls). Each such function
# is a loop of its own whose cost, its self cost plus the inclusive cost of
# its poll calls, follows its own pass count, n and 1 exactly (an empty pass
# is a fixed path), so count_fit prices each one's empty pass on that cost
# alone, instead of the fit's single price for all passes on the whole run's
# instructions (bench/README.md "The counting method, round four"). The
# measured loop is the poller with the most polls and keeps k passes per
# operation; the others keep none.

def poller_figures(prof, provider, poll_fns, found=None):
    """Per function outside the provider that calls its poll function:
    {"obj:fn": [calls of poll, self cost + the polls' inclusive cost,
    calls of `found`]}: found names the function a poll that found
    completions hands them to (rk_cq_take), whose calls count the passes
    that found something (a pass that asks for several may find one or
    two: a path of the loop whose count the timing sets)."""
    i = prof.ev("Ir")
    out = {}
    for (a, b), c in prof.edges.items():
        if a[0] == provider or not (b[0] == provider and b[1] in poll_fns):
            continue
        key = "%s:%s" % a
        if key not in out:
            out[key] = [0, prof.self_cost.get(a, [0] * len(prof.events))[i], 0]
            if found:
                out[key][2] = sum(e[0] for (x, y), e in prof.edges.items()
                                  if x == a and plain_name(y[1]) == found)
        out[key][0] += c[0]
        out[key][1] += c[1 + i]
    return out


def minus_calls(fig, prof, calls):
    """Takes out of one run's figures (run_figures' ir and wait_ir,
    poller_figures' pollers) every call `calls` names ([{"in": caller,
    "call": callee}], by plain name): their inclusive cost out of ir, and
    out of each poller's figures the calls of it made under them (calls for
    polls, their inclusive cost for the polls' cost: one poll a call, as
    rk_cq_poll's). The RPC server's calls of rk_wait: its wait for its first
    request before it goes on alone (0 to 1,029 polls a run, waiting that
    follows the start's timing), and the rare later ones (its look at the
    fds every SOLO_LOOK_EVERY calls, a retry; 0 to 27 a run), what they find
    with them. Returns the cost taken out of ir."""
    i = prof.ev("Ir")
    edges = [(a, b) for (a, b) in prof.edges for c in calls
             if a != b and plain_name(a[1]) == c["in"] and plain_name(b[1]) == c["call"]]
    out = sum(prof.edges[e][1 + i] for e in edges)
    fig["ir"] -= out
    if "wait_ir" in fig:  # the library's waits: these calls' are out of ir already
        fig["wait_ir"] -= sum(prof.edges[(a, b)][1 + i] for (a, b) in edges
                              if plain_name(b[1]) in WAIT_FUNCTIONS
                              and plain_name(a[1]) not in WAIT_FUNCTIONS)
    under = reached(callee_map(prof), {b for (a, b) in edges})
    for key, f in fig.get("pollers", {}).items():
        for (a, b), c in prof.edges.items():
            if a in under and a != b and "%s:%s" % b == key:
                f[0] -= c[0]
                f[1] -= c[1 + i]
    return out


def poller_passes(points, kept):
    """From runs with "pollers" (poller_figures), the pass kinds of
    count_fit (one per poller, its loop its own: the measured loop, the one
    whose cost, less its passes, grows most with n, keeps
    `kept` passes per op, the others none) and each run's "passes" counts and costs (0 in a run where
    that poller did not poll). Returns the kinds; sets points[i]["passes"]."""
    total = {}
    for pt in points:
        for key, fig in pt["pollers"].items():
            total[key] = total.get(key, 0) + fig[0]
    if not total:
        raise ValueError("no poller in the runs")
    # The measured loop does the work per operation: of each poller's cost,
    # fitted on its passes, n and 1, the part that follows n is largest for
    # it, and about 0 for a wait around it (perftest's at the start and the
    # end), whose passes may outnumber the loop's in a run (a slow start).
    def work_per_op(key):
        ns = [float(pt["n"]) for pt in points]
        cnt = [float(pt["pollers"].get(key, [0])[0]) for pt in points]
        cols = [ns, [1.0] * len(points)]
        if len(points) > 3 and residual(cols, cnt) >= MIN_RESIDUAL:
            cols.append(cnt)
        try:
            return lstsq([list(r) for r in zip(*cols)],
                         [float(pt["pollers"].get(key, [0, 0])[1]) for pt in points])[0]
        except ZeroDivisionError:
            return 0.0
    main = max(sorted(total), key=work_per_op)
    kinds = [{"name": key, "in": {"name": key}, "call": "@poll", "nonneg": True,
              "kept": kept if key == main else 0} for key in sorted(total)]
    found = [key for key in sorted(total) if any(len(pt["pollers"].get(key, ())) > 2
                                                  and pt["pollers"][key][2] for pt in points)]
    kinds += [{"name": key + " found", "in": {"name": key}, "call": "@poll", "kept": None}
              for key in found]
    for pt in points:
        pt["passes"] = {"count": {key: pt["pollers"].get(key, [0, 0])[0] for key in total},
                        "cost": {key: pt["pollers"].get(key, [0, 0])[1] for key in total}}
        for key in found:
            pt["passes"]["count"][key + " found"] = pt["pollers"].get(key, [0, 0, 0])[2]
    return kinds
