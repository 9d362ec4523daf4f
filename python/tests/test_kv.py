"""test_kv.py - examples/python/kv_client.py against example 10's C block
server (ex10_kv_cache --server) on a real device: the two sides share only
kv_wire.h. Checks the client's lines (every block verified, the READ after
bye refused), the server's count of calls, and Xfer.connect_lane's refusal
by a server of another app_id. Ports 7730-7731. Needs RK_DEV, RK_ADDR
(scripts/softroce) and RK_BUILD (the build tree with the example)."""
import os
import re
import subprocess
import sys
import time

import pytest

import rdmakit

DEV = os.environ.get("RK_DEV")
ADDR = os.environ.get("RK_ADDR")
PORT = 7730
SERVER = os.path.join(os.environ.get("RK_BUILD", ""), "examples", "10-kv-cache", "ex10_kv_cache")
CLIENT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "kv_client.py")

pytestmark = pytest.mark.skipif(not DEV or not ADDR, reason="needs RK_DEV and RK_ADDR (sandbox)")


def start_server(tmp_path, *args):
    out = open(tmp_path / "server.out", "w+")
    proc = subprocess.Popen([SERVER, "--server", "--port", str(PORT)] + list(args) + [ADDR],
                            stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60  # a loaded TCG guest starts slowly
    while "listening" not in (tmp_path / "server.out").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("server not listening: " + (tmp_path / "server.out").read_text())
        time.sleep(0.1)
    return proc, out


def test_python_client_of_the_c_server(tmp_path):
    assert os.access(SERVER, os.X_OK), "build ex10_kv_cache first: " + SERVER
    proc, out = start_server(tmp_path, "--clients", "1", "--blocks", "256")
    try:
        # A lane whose hello names another application is refused, and costs no client.
        with rdmakit.Device(DEV) as dev, rdmakit.Xfer(dev) as x:
            with pytest.raises(rdmakit.RefusedError):
                x.connect_lane(ADDR, PORT + 1, 0x4B564332, timeout=20)
        r = subprocess.run([sys.executable, "-X", "dev", CLIENT, ADDR, "--port", str(PORT),
                            "--keys", "300", "--batch", "16"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
    srv = (tmp_path / "server.out").read_text()
    for line in (r"hello: a ticket the server did not give out is refused",
                 r"hello: a descriptor of \d+ bytes, READ only, 256 blocks of 4096 bytes",
                 r"lookup: 300 keys in 2 calls: 256 present, 44 absent",
                 r"read: 256 blocks in 16 batches of up to 16, \d+ doorbells, all verified",
                 r"after bye: the server's NIC refused the READ \(.+\)",
                 r"client: 5 calls, every block checked: OK"):
        assert re.search("^" + line + "$", r.stdout, re.M), line + "\n" + r.stdout
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert re.search(r"^server: answered 5 calls for 1 client;", srv, re.M), srv
