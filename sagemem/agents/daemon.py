"""The resident process, `sagemem daemon serve`: hooks run warm, and the memory directories
are watched instead of listed.

A hook runs on every message. As a new process it paid the interpreter's start, the imports
of everything it uses (more than the interpreter's start itself) and, in a large directory, a
look at every file. The resident process pays the imports once and keeps the change journal
(`store/journal.py`). A hook's process (`relay.py`) hands it its standard streams, arguments,
working directory, environment and umask over a Unix socket; it takes in every file event
queued so far, and a child of its own (forked, `resident.py`) runs the hook as that process
would have run it, with its streams and environment, answering straight into the harness's
pipe. What a hook writes (the index, the session's ledger) is written by the child, as by
any hook.

It is started detached by the first hook that finds none (`start`), at most once every
`START_SECONDS`, and ends itself after `IDLE_SECONDS` without a hook, or when the code it
runs changed on disk (an upgrade). One per user and installation: the socket and a lock in a
folder only this user may enter. It serves only processes of the same user, in the same
namespaces, under no sandbox (no `no_new_privs`, no seccomp): a hook asked for by a
sandboxed process runs in that process, inside its sandbox. It refuses to run at all under
one itself.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import struct
import sys
import time
from typing import Any

from ..store.errors import SagememError
from . import relay

IDLE_SECONDS = 30 * 60.0
START_SECONDS = 30.0  # a start is not tried again sooner (a machine where it cannot run)
REPLY_SECONDS = 1.0
_NAMESPACES = ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup")


def paths() -> dict[str, str]:
    """The resident process's files for this installation: socket, lock, start marker."""
    base = os.path.join(relay.folder(), f"daemon-{relay.key()}")
    return {"socket": f"{base}.sock", "lock": f"{base}.lock", "started": f"{base}.started"}


def start(*, asked: bool = False) -> bool:
    """Start a resident process, detached, unless hooks may not use one here or (unless a
    person `asked`) a start was tried in the last `START_SECONDS`. True when one was started.
    Never waits for it."""
    if not relay.enabled() or not _own_folder():
        return False
    files = paths()
    try:
        if not asked and time.time() - os.lstat(files["started"]).st_mtime < START_SECONDS:
            return False
    except OSError:
        pass
    try:
        with open(files["started"], "w", encoding="utf-8"):
            pass
    except OSError:
        return False
    from ..store.command import MODULE

    null = os.devnull
    try:
        # Spawned, not a `subprocess.Popen`: nothing to wait for, in a new session (no
        # harness's signal or terminal reaches it), and with /dev/null for its streams:
        # above all not the hook's stdout, which the harness reads to its end.
        os.posix_spawn(
            sys.executable,
            [sys.executable, *MODULE, "daemon", "serve", "--key", relay.key()],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except OSError:
        return False
    return True


def status() -> dict[str, Any]:
    """Whether a resident process serves this installation, and what it watches."""
    files = paths()
    found: dict[str, Any] = {"enabled": relay.enabled(), "running": False, "socket": files["socket"]}
    if not relay.enabled() or not relay.private(relay.folder()):
        return found
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(REPLY_SECONDS)
            conn.connect(files["socket"])
            import marshal

            conn.sendall(relay.frame(marshal.dumps((relay.PROTOCOL, "status"))))
            conn.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
            answer = marshal.loads(reply)
    except (OSError, EOFError, ValueError, TypeError):
        return found
    if isinstance(answer, dict):
        found.update(answer, running=True)
    return found


def stop(wait: float = 5.0) -> bool:
    """End the resident process (SIGTERM to the process holding the lock), waiting up to
    `wait` seconds for it to let the lock go; True when there was one."""
    import fcntl

    files = paths()
    try:
        lock = os.open(files["lock"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False  # no one holds it: none is running
        except BlockingIOError:
            pass
        try:
            pid = int(os.read(lock, 32).strip() or 0)
        except ValueError:
            return False
        if pid <= 1:
            return False
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        ends = time.monotonic() + wait
        while time.monotonic() < ends:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.02)
        return True
    finally:
        os.close(lock)


def serve(expected_key: str | None = None, idle: float = IDLE_SECONDS) -> None:
    """Run the resident process until it has been idle for `idle` seconds. Returns at once
    when another one already serves this installation, or when `expected_key` (what the
    starting hook computed) is not this installation's: it would serve a socket no hook of
    that installation asks."""
    if not relay.enabled():
        raise SagememError("a resident process runs only on Linux, and not with SAGEMEM_DAEMON=off")
    if expected_key is not None and expected_key != relay.key():
        return
    if not _own_folder():
        raise SagememError(f"{relay.folder()}: not a folder of this user's that only this user may enter")
    if _restricted("self"):
        raise SagememError("a resident process does not run under a sandbox (no_new_privs or seccomp)")
    import fcntl

    files = paths()
    lock = os.open(files["lock"], os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return  # one is serving already
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    os.chdir("/")  # no folder of a project's kept busy
    with contextlib.suppress(FileNotFoundError):
        os.unlink(files["socket"])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(files["socket"])
    os.chmod(files["socket"], 0o600)
    bound = os.stat(files["socket"]).st_ino
    listener.listen(64)
    _warm()
    from .resident import Server

    server = Server(listener, lock, idle, trusted=_trusted, request=_request, warm=_warm, code=_code)
    gc.freeze()  # what is loaded now stays out of every collection, the children's too
    signal.signal(signal.SIGTERM, lambda *_: server.end())
    try:
        server.loop()
    finally:
        server.close(files["socket"], bound)


def _own_folder() -> bool:
    place = relay.folder()
    with contextlib.suppress(OSError):
        os.mkdir(place, 0o700)
    return relay.private(place)


def _warm() -> None:
    """Run a session's first hooks once, on a throwaway directory, so that every child finds
    imported, compiled and cached whatever a hook imports, compiles and caches whatever its
    environment (modules, patterns, the stemmer, the index's schema). The one cache that
    depends on the environment (the command line, from PATH) is emptied again."""
    import json
    import shutil
    import subprocess  # noqa: F401 - a hook that starts the full scan later
    import tempfile

    from ..store import secrets
    from ..store.command import sagemem_command
    from . import hooks, install  # noqa: F401 - the saving rules look at the MCP entries

    saved = dict(os.environ)
    place = tempfile.mkdtemp(prefix="sagemem-warm-")
    try:
        memory = os.path.join(place, "memory")
        os.mkdir(memory)
        for name, text in _WARM.items():
            with open(os.path.join(memory, name), "w", encoding="utf-8") as file:
                file.write(text)
        # No lexicon and no model: a hook would build a missing lexicon, and this process
        # would keep wordfreq's hundred megabytes for good.
        os.environ.update(
            HOME=place,
            SAGEMEM_DIR=memory,
            XDG_CACHE_HOME=os.path.join(place, "cache"),
            SAGEMEM_LEXICON="off",
            SAGEMEM_MODEL="off",
        )
        for event, prompt in (
            ("SessionStart", ""),
            ("UserPromptSubmit", "how do we roll back a release? 回滚"),
        ):
            raw = json.dumps({"hook_event_name": event, "session_id": "warm", "prompt": prompt, "cwd": place})
            hooks.handle("claude-code", None, raw)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(place, ignore_errors=True)
        sagemem_command.cache_clear()
    secrets.prepare()


# English only: Chinese memory text would load the segmenter's dictionary into every child.
_WARM = {
    "project_release.md": "---\nname: release\ndescription: How we roll back a bad release\ntype: project\n"
    "---\n\n## Rollback\n\nSteps:\n\n- stop the deploy\n- run `make rollback` from the last tag\n",
    "user_me.md": "---\ndescription: who I am\nbaseline: true\n---\n\nI review releases on Fridays.\n",
}


def _restricted(pid: int | str) -> bool:
    """Whether a process runs under `no_new_privs` or seccomp (a sandbox's marks), or cannot
    be looked at."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as found:
            fields = dict(line.split(":", 1) for line in found if ":" in line)
    except OSError:
        return True
    return fields.get("NoNewPrivs", "1").strip() != "0" or fields.get("Seccomp", "1").strip() != "0"


def _trusted(conn: socket.socket) -> bool:
    """Whether the process at the other end is this user's, in this process's namespaces,
    under no sandbox."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _ = struct.unpack("3i", raw)
        if uid != os.getuid() or pid <= 0 or _restricted(pid):
            return False
        ours = [os.readlink(f"/proc/self/ns/{n}") for n in _NAMESPACES]
        return [os.readlink(f"/proc/{pid}/ns/{n}") for n in _NAMESPACES] == ours
    except (OSError, struct.error):
        return False


def _request(data: bytes) -> tuple[list[str], str, dict[str, str], int] | str | None:
    """A hook's request (arguments, working directory, environment, umask), "status", or None
    for anything else."""
    import marshal

    try:
        found = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if found == (relay.PROTOCOL, "status"):
        return "status"
    if not (isinstance(found, tuple) and len(found) == 5 and found[0] == relay.PROTOCOL):
        return None
    _, argv, cwd, env, mask = found
    strings = isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(cwd, str)
    pairs = isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    if not (strings and pairs and isinstance(mask, int) and 0 <= mask <= 0o777 and argv[1:2] == ["hook"]):
        return None
    return argv, cwd, env, mask


def _code() -> dict[str, int]:
    """The modification times of this package's modules loaded here: a change means an
    upgrade (or an edit), and the children would run the old code."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.startswith(package):
            with contextlib.suppress(OSError):
                found[path] = os.stat(path).st_mtime_ns
    return found
