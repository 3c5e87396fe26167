"""The hook's way to the resident process (`daemon.py`): hand it this process's standard
streams, arguments, working directory, environment and umask, and let it run the hook.

A hook is a new Python process on every message, and most of its time went on imports and on
listing the memory directory. The resident process has imported everything already and keeps
the change journal, so the hook it starts (forked, with this process's streams and
environment) does only the work. This module is all a hook loads before it knows whether
the resident process answers: the standard library's `_socket`, `array` and `marshal`, and
nothing else. Whenever the answer is not "done" (no resident process, a refusal, a
timeout), the caller runs the hook itself, as before: the only cost of a missing or wedged
resident process is the wait, at most `READY_SECONDS`.

Only on Linux (fork, passing descriptors over a Unix socket, inotify). The socket is in a
folder only this user may enter (`<TMPDIR or /tmp>/sagemem-<uid>/`), named after this
installation (its Python and its package folder), so a hook never reaches a
resident process running other code. `SAGEMEM_DAEMON=off` runs every hook in its own process
and starts no resident process.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as in store/records.py, without its `collections`: the relay's path

if TYPE_CHECKING:
    import _socket

PROTOCOL = 2
READY_SECONDS = 1.0  # a healthy resident process says "ready" within a millisecond or two
OFF = ("off", "0", "no", "false")
READY, GO = b"r", b"g"


def enabled() -> bool:
    """Whether hooks may go through a resident process here."""
    return (
        sys.platform == "linux"
        and os.environ.get("SAGEMEM_DAEMON", "").strip().lower() not in OFF
        and hasattr(os, "fork")
    )


def folder() -> str:
    """The folder of this user's sockets and locks; `private` says whether it may be used."""
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"sagemem-{os.getuid()}")


def private(path: str) -> bool:
    """Whether `path` is a folder of this user's that no one else may enter (not a link)."""
    import stat

    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def key() -> str:
    """This installation: its interpreter and its package folder. (An upgrade in place is
    seen by the resident process itself, which then ends: `daemon.serve`.)"""
    from ..store.digests import sha256_hex

    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    # The interpreter as named (`python`, `python3`, a venv's link): its folder says which
    # environment, its real path which interpreter.
    where = os.path.dirname(os.path.abspath(sys.executable))
    text = f"{PROTOCOL}\0{where}\0{os.path.realpath(sys.executable)}\0{package}"
    return sha256_hex(text.encode("utf-8", "surrogateescape"))[:16]


def socket_path() -> str:
    return os.path.join(folder(), f"daemon-{key()}.sock")


def frame(payload: bytes) -> bytes:
    """A message as it crosses a socket: its length (4 bytes, big-endian), then itself."""
    return len(payload).to_bytes(4, "big") + payload


# Why the last `run` did not hand the hook over: "absent" (no resident process: start one),
# "refused" or "timeout" (one that would not take it), "" when it did, or when none is used.
outcome = ""


def run(argv: list[str]) -> int | None:
    """The hook's exit status once the resident process has run it; None: run it here."""
    global outcome
    outcome = ""
    if not enabled() or not private(folder()):
        outcome = "absent" if enabled() else ""
        return None
    import _socket

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(READY_SECONDS)
        try:
            conn.connect(socket_path())
        except OSError:
            outcome = "absent"
            return None
        return _hand_over(conn, argv)
    except TimeoutError:
        outcome = "timeout"
        return None
    except OSError:  # the connection broke, or this process's folder is gone
        outcome = "refused"
        return None
    finally:
        conn.close()


def _hand_over(conn: _socket.socket, argv: list[str]) -> int | None:
    """Send the request; once the resident process says it is ready, say go, with the
    streams, and wait for the hook's status. Nothing has been read from stdin or written to
    stdout before "go", so until then this process can still run the hook itself. The
    streams go only with "go": sent earlier, to a resident process that never reads them,
    they would wait in its socket, and the harness would wait for the end of a stdout that
    is still open there."""
    global outcome
    import _socket
    import marshal
    from array import array

    mask = os.umask(0o022)
    os.umask(mask)
    request = marshal.dumps((PROTOCOL, ["sagemem", "hook", *argv], os.getcwd(), dict(os.environ), mask))
    conn.sendall(frame(request))
    if conn.recv(1) != READY:
        outcome = "refused"
        return None
    streams = array("i", [0, 1, 2])
    conn.sendmsg([GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, streams.tobytes())])
    conn.settimeout(None)  # the hook's own deadline bounds it from here
    status = conn.recv(1)
    return status[0] if status else 0  # no status: it ended without one; the hook fails open
