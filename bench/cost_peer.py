"""cost_peer - bench/cost's cells whose server runs on the second host.

UCX's rc_verbs transport needs ud_verbs for its wire-up, and on one
sandbox host that wire-up never completes (bench/README.md, "### UCX");
across the two hosts of `scripts/softroce run --hosts 2` it does. So the
UCX cells put the server on host B (`scripts/softroce peer`, native, not
measured) and profile the client on host A; rk's side of the same cell is
run the same way, so both clients see the same wire and the same peer.
A cell whose spec says "peer_server" also profiles the server on host B
(under callgrind there, its output in the directory both hosts share,
RK_PEER_DIR): both ends of a one-way message stream are then counted, which
is what a call (a request out and its answer in) is held against. Else
only client figures come out.

UCX is told which device, transport and GID to use (UCX_ENV); GID index 0
is the link-local address, the one whose wire-up works between the
guests. ucx_perftest prints nothing when it listens, so its client starts
after a pause and is retried, as perftest's is.

A client's figure is its measured loop's inclusive cost (the spec's
"loop", costlib.run_figures): the work around the loop (UCX's start-up
and wire-up, its asynchronous thread) is not per operation, and it varied
between runs by more than the loop's work between the two n.
"""
import os
import subprocess
import time


def ucx_env(dev):
    return {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_NET_DEVICES": dev + ":1",
            "UCX_IB_GID_INDEX": "0", "UCX_WARN_UNUSED_ENV_VARS": "n"}


def have_peer():
    """Whether this runs on host A of a two-host sandbox."""
    return bool(os.environ.get("RK_PEER_DIR") and os.environ.get("RK_PEER_ADDR")
                and os.environ.get("RK_SOFTROCE"))


def on_peer(argv, **kw):
    """Start argv on host B; the returned process's stderr carries B's."""
    return subprocess.Popen([os.environ["RK_SOFTROCE"], "peer", "--", *argv], **kw)


def stop(p, timeout):
    """Wait for a peer process, killing it (and so its job on B) at the end."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def server_cg(ctx, spec, tag):
    """The valgrind prefix and output file of a server on B (nothing when
    the spec does not profile it)."""
    if not spec.get("peer_server"):
        return [], None
    return ctx.cg(tag + "-srv", spec.get("server_cg", ()), where=os.environ["RK_PEER_DIR"])


def sides(ctx, spec, cli_out, srv_out):
    """Both sides' figures of one run of a peer cell (rk_peer or ucx):
    the client's measured loop on A, the server's (when profiled) on B
    (Ctx.side_figures). ucx_perftest's loop reads the clock itself: its
    clock callers stay in."""
    kw = {"exclude_clock_callers": False} if spec["kind"] == "ucx" else {}
    return ctx.side_figures(spec, cli_out, srv_out, **kw)


def drop(*files):
    for f in files:
        for g in (f, f and f + ".log"):
            if g and os.path.exists(g):
                os.unlink(g)


def run_ucx(ctx, spec, n, tag, timeout):
    """ucx_perftest -t TEST: server on B (under callgrind when the spec
    profiles it), client on A under callgrind."""
    peer = os.environ["RK_PEER_ADDR"]
    env = ucx_env(ctx.dev)
    envv = ["env", *("%s=%s" % kv for kv in env.items())]
    last = ""
    for attempt in range(3):
        port = ctx.next_port()
        vs, srv_out = server_cg(ctx, spec, tag)
        srv = on_peer(envv + ["timeout", str(timeout), *vs, "ucx_perftest", "-p", str(port)],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        vc, out = ctx.cg(tag + "-cli", spec.get("callgrind", ()))
        try:
            # A server under valgrind takes longer to listen.
            time.sleep((15.0 if srv_out else 6.0) + 3 * attempt)
            cli = subprocess.run(vc + ["ucx_perftest", peer, "-p", str(port), "-w", "0",
                                       "-n", str(n), *spec["args"]],
                                 env=dict(os.environ, **env), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=timeout)
        finally:
            stop(srv, timeout)
        if cli.returncode == 0 and (not srv_out or srv.returncode == 0):
            return sides(ctx, spec, out, srv_out)
        last = cli.stdout[-400:]
        drop(out, srv_out)
    raise RuntimeError("ucx_perftest %s failed: %s" % (" ".join(spec["args"]), last))


def run_rk_peer(ctx, spec, n, tag, timeout):
    """rk bench: server on B (native, or under callgrind when the spec
    profiles it), client on A under callgrind."""
    peer = os.environ["RK_PEER_ADDR"]
    port = ctx.next_port()
    vs, srv_out = server_cg(ctx, spec, tag)
    srv = on_peer([*vs, ctx.rk, "bench", "--dev", ctx.dev, "--addr", peer, "-p", str(port),
                   "--wait", "120", "--watchdog", "60", *spec.get("server", [])],
                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    vc, out = ctx.cg(tag + "-cli", spec.get("callgrind", ()))
    try:
        ctx.wait_line(srv, srv.stderr, "waiting", 90)
        cli = subprocess.run(vc + [ctx.rk, "bench", *spec["args"], "-n", str(n), "--watchdog", "60",
                                   "%s:%d" % (peer, port)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=timeout)
    finally:
        stop(srv, timeout)
    if cli.returncode != 0 or (srv_out and srv.returncode != 0):
        drop(out, srv_out)  # not to be read again by --from
        raise RuntimeError("rk bench %s (server on the peer) failed: %s"
                           % (" ".join(spec["args"]), cli.stdout[-400:]))
    return sides(ctx, spec, out, srv_out)
