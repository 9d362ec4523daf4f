"""rk's control-channel frame (tools/rk/common/frame.h) for the tests that speak
it byte by byte: rk bench's control channel, rk matrix's rendezvous, rk doctor's
control connection.

A frame: the channel's 4-byte magic, u32 big-endian payload length, u8 type,
then the payload. hostile() gives the bytes every listener must refuse, and
knock() sends them and says how long the listener took to let go.
"""
import socket
import struct
import time

HDR = 9
BENCH, MATRIX, DOCTOR = b"RKBC", b"RKMX", b"RKDR"


def header(magic, mtype, length):
    return magic + struct.pack(">IB", length, mtype)


def frame(magic, mtype, payload=b""):
    return header(magic, mtype, len(payload)) + payload


def _recv_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        got = sock.recv(n - len(buf))
        if not got:
            return None
        buf += got
    return buf


def read_frame(sock, magic):
    """One frame as (type, payload); None when the socket closed before it was whole.
    Raises ValueError for bytes of another magic."""
    head = _recv_exactly(sock, HDR)
    if head is None:
        return None
    if head[:4] != magic:
        raise ValueError("bad magic %r" % head[:4])
    n, mtype = struct.unpack(">IB", head[4:])
    body = _recv_exactly(sock, n)
    return None if body is None else (mtype, body)


def hostile(magic, mtype):
    """What every listener of the channel must refuse and let go of, by kind: bytes
    to send (a frame of type @mtype where it is one). "truncated" is sent and then
    our side closed (knock's close)."""
    return {
        "truncated": header(magic, mtype, 64) + b"x" * 10,  # 10 of 64 bytes, then EOF
        "oversized": header(magic, mtype, 0x7FFFFFFF),
        "garbage": b"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
        "silent": b"",
    }


def knock(host, port, data, close=False, wait=15.0):
    """Connect to @port, send @data (then shut our sending side when @close) and wait
    up to @wait s for the listener to close the connection. Returns (seconds it took,
    None if still open after @wait; the bytes the listener sent)."""
    t0 = time.monotonic()
    got = b""
    with socket.create_connection((host, port), timeout=10) as s:
        try:
            if data:
                s.sendall(data)
            if close:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # the listener let go already
            return time.monotonic() - t0, got
        end = t0 + wait
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None, got
            s.settimeout(left)
            try:
                b = s.recv(65536)
            except socket.timeout:
                return None, got
            except OSError:  # reset: let go too
                b = b""
            if not b:
                return time.monotonic() - t0, got
            got += b
