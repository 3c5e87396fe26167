"""The resident process's loop (`daemon.serve` runs it): hooks handed over, children that run
them, the change journal kept current, a spare child kept ready.

A child forked when a hook arrives pays for its copy of the parent: every page the hook
touches is copied on first write (about 1,300 pages, several milliseconds, for a prompt). So
one child, the spare, is forked ahead of time, while nothing else runs, and runs a hook on a
throwaway directory first, touching what a hook touches; then it waits. A hook that arrives
goes to the spare when the journal has not changed since the spare was forked (its copy of
the journal answers as the parent's would), else to a child forked for it. A new spare is
forked once the journal has been quiet for `SPARE_QUIET_SECONDS` and no hook runs.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from ..store import journal
from . import relay

MAX_CHILDREN = 16  # hooks running at once; past it a hook runs in its own process
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # arguments and environment
REPLY_SECONDS = 1.0  # what a hook's process is given to send its request and its "go"
SPARE_QUIET_SECONDS = 0.5

Request = tuple[list[str], str, dict[str, str], int]  # arguments, working dir, environment, umask


def receive(conn: socket.socket, limit: int, fds: int) -> tuple[bytes, list[int]]:
    """One framed message (`relay.frame`) and the descriptors sent with it. OSError (a
    timeout among them) when it does not come whole; ValueError when it is over `limit`."""
    data, streams, flags, _ = socket.recv_fds(conn, 65536, fds)
    try:
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise ValueError("cut")
        while len(data) < 4:
            data += _more(conn, 4 - len(data))
        size = int.from_bytes(data[:4], "big")
        if size > limit:
            raise ValueError("too large")
        while len(data) < 4 + size:
            data += _more(conn, min(65536, 4 + size - len(data)))
        return data[4 : 4 + size], streams
    except BaseException:
        for fd in streams:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def _more(conn: socket.socket, size: int) -> bytes:
    chunk = conn.recv(size)
    if not chunk:
        raise ConnectionError("closed before the whole message")
    return chunk


def send(conn: socket.socket, payload: bytes, fds: list[int]) -> None:
    message = relay.frame(payload)
    sent = socket.send_fds(conn, [message], fds)
    if sent < len(message):
        conn.sendall(message[sent:])


class Server:
    """The loop. `trusted` says whether a connection's process may be served; `request`
    parses what it sends (a `Request`, "status", or None); `warm` runs a hook on a
    throwaway directory (a spare's first act)."""

    def __init__(
        self,
        listener: socket.socket,
        lock: int,
        idle: float,
        *,
        trusted: Any,
        request: Any,
        warm: Any,
        code: Any,
    ) -> None:
        self.listener, self.lock, self.idle = listener, lock, idle
        self.trusted, self.request, self.warm, self.code = trusted, request, warm, code
        try:
            self.journal: journal.Journal | None = journal.Journal()
        except (ImportError, OSError):  # no inotify here: hooks run warm, and list
            self.journal = None
        journal.install(self.journal)  # the children's, as they inherit it
        self.reports, self.reporter = os.pipe()
        os.set_blocking(self.reports, False)
        self.children: dict[int, socket.socket | None] = {}  # pid -> its hook's connection
        self.spare: _Spare | None = None
        self.loaded = code()
        self.last = self.changed = time.monotonic()
        self.ending = False
        self.served = self.spared = 0  # hooks run, and how many of them by a spare

    def end(self) -> None:
        self.ending = True

    def loop(self) -> None:
        while not self.ending:
            watched: list[Any] = [self.listener, self.reports, *(c for c in self.children.values() if c)]
            if self.journal is not None:
                watched.append(self.journal)
            if self.spare is not None:
                watched.append(self.spare.control)
            scanning = self.journal is not None and self.journal.scanning
            try:
                ready = select.select(watched, [], [], 0 if scanning else 0.25)[0]
            except InterruptedError:
                continue
            if self.journal is not None and self.journal in ready:
                self._drain()
            if self.reports in ready:
                self._take_reports()
            if self.spare is not None and self.spare.control in ready:
                self.spare.heard()
            for pid, conn in list(self.children.items()):
                if conn is not None and conn in ready:
                    self._client_gone(pid, conn)
            if self.listener in ready:
                self._accept()
            self._reap()
            if self.journal is not None and (self.journal.scanning or not ready):
                self.journal.scan_step()  # a slice at a time, between hooks
                self._spare_stale()
            self._make_spare()
            if not self.children and time.monotonic() - self.last > self.idle:
                return

    def close(self, path: str, bound: int) -> None:
        if self.spare is not None:
            self.spare.kill()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == bound:  # not one a newer process has bound since
                os.unlink(path)
        self.listener.close()
        if self.journal is not None:
            self.journal.close()
        os.close(self.lock)

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "journal": self.journal is not None,
            "watched": self.journal.folders if self.journal is not None else [],
            "hooks": self.served,
            "hooks_by_spare": self.spared,
            "hooks_running": sum(1 for c in self.children.values() if c is not None),
            "spare": self.spare is not None and self.spare.ready,
            "idle_seconds": round(time.monotonic() - self.last, 1),
        }

    # --- a hook arrives ------------------------------------------------------------------

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        streams: list[int] = []
        try:
            conn.settimeout(REPLY_SECONDS)
            if not self.trusted(conn):
                return conn.close()
            data, streams = receive(conn, MAX_REQUEST_BYTES, 0)
            request = self.request(data)
            if request == "status":
                with conn:
                    conn.sendall(marshal.dumps(self.status()))
                return
            if request is None or len(self.children) >= MAX_CHILDREN:
                return conn.close()
            if self.code() != self.loaded:  # upgraded: the package is not this process's code now
                self.ending = True
                return conn.close()
            conn.sendall(relay.READY)
            go, streams, flags, _ = socket.recv_fds(conn, 1, 3)
            if go != relay.GO or len(streams) != 3 or flags & socket.MSG_CTRUNC:
                return conn.close()
            self.last = time.monotonic()
            self._drain()  # every change made before the hook was asked for
            self._spare_stale()
            self.served += 1
            spare, self.spare = self.spare, None
            if spare is not None and spare.ready and spare.take(request, streams, conn):
                self.children[spare.pid] = conn
                self.spared += 1
                return
            if spare is not None:
                spare.kill()
                self.children[spare.pid] = None  # reaped with the others
            pid = os.fork()
            if pid == 0:
                gc.disable()  # a short life: a collection would touch (and copy) every page
                self._forget_parent(conn)
                run(conn, streams, request, self.reporter)
            self.children[pid] = conn
        except (OSError, ValueError):
            conn.close()
        finally:
            for fd in streams:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _forget_parent(self, keep: socket.socket | None) -> None:
        """In a child: close what is the parent's (its listener, lock, other hooks'
        connections, the journal's watch; the journal's state stays, for the hook)."""
        for name in ("SIGTERM", "SIGCHLD", "SIGHUP"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.listener.close()
        os.close(self.reports)
        os.close(self.lock)
        for other in self.children.values():
            if other is not None and other is not keep:
                other.close()
        if self.spare is not None:
            self.spare.control.close()
        if self.journal is not None:
            os.close(self.journal.fileno())

    # --- the journal ---------------------------------------------------------------------

    def _drain(self) -> None:
        if self.journal is not None:
            before = self.journal.version
            self.journal.drain()
            if self.journal.version != before:
                self.changed = time.monotonic()

    def _take_reports(self) -> None:
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self.reports, 65536):
                data += chunk
        for line in set(data.splitlines()):
            folder = line.decode("utf-8", "surrogateescape")
            if self.journal is not None and os.path.isabs(folder):
                self.journal.watch(folder)
                self.changed = time.monotonic()

    # --- the spare -----------------------------------------------------------------------

    def _spare_stale(self) -> None:
        """A spare forked before the journal last changed would answer from an old copy."""
        version = self.journal.version if self.journal is not None else 0
        if self.spare is not None and self.spare.version != version:
            self.spare.kill()
            self.children[self.spare.pid] = None
            self.spare = None
            self.changed = time.monotonic()

    def _make_spare(self) -> None:
        quiet = time.monotonic() - self.changed >= SPARE_QUIET_SECONDS
        if self.spare is not None or self.children or not quiet or self.ending:
            return
        if self.journal is not None and self.journal.scanning:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        version = self.journal.version if self.journal is not None else 0
        pid = os.fork()
        if pid == 0:
            gc.disable()
            ours.close()
            self._forget_parent(None)
            _spare(theirs, self.warm, self.reporter)
        theirs.close()
        self.spare = _Spare(pid, ours, version)

    # --- children ------------------------------------------------------------------------

    def _client_gone(self, pid: int, conn: socket.socket) -> None:
        """The hook's process closed its end: it has its status, or it was killed (a harness's
        timeout), and then its hook is ended too, as the harness would have ended it."""
        self.children[pid] = None
        conn.close()
        with contextlib.suppress(ChildProcessError, OSError):
            if os.waitpid(pid, os.WNOHANG) == (0, 0):  # still running, not reaped: its pid is its own
                os.kill(pid, signal.SIGTERM)
                return
            self.children.pop(pid, None)

    def _reap(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError, OSError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    conn = self.children.pop(pid)
                    if conn is not None:
                        conn.close()
        if self.spare is not None:
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(self.spare.pid, os.WNOHANG)[0]:  # it died: make another
                    self.spare.control.close()
                    self.spare = None


class _Spare:
    """The parent's side of a spare child."""

    def __init__(self, pid: int, control: socket.socket, version: int) -> None:
        self.pid, self.control, self.version = pid, control, version
        self.ready = False

    def heard(self) -> None:
        try:
            said = self.control.recv(1)
        except OSError:
            said = b""
        self.ready = said == b"+"

    def take(self, request: Request, streams: list[int], conn: socket.socket) -> bool:
        try:
            send(self.control, marshal.dumps(request), [*streams, conn.fileno()])
        except OSError:
            return False
        self.control.close()
        return True

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.control.close()


def _spare(control: socket.socket, warm: Any, reporter: int) -> None:
    """A spare child: touch what a hook touches, say so, wait for a hook, run it. Never
    returns."""
    try:
        warm()
        control.sendall(b"+")
        payload, fds = receive(control, MAX_REQUEST_BYTES, 4)
        if len(fds) != 4:
            os._exit(0)
        request = marshal.loads(payload)
        conn = socket.socket(fileno=fds[3])
        control.close()
    except BaseException:  # noqa: BLE001 - the parent died, or killed this spare: nothing to run
        os._exit(0)
    run(conn, fds[:3], tuple(request), reporter)


def run(conn: socket.socket, streams: list[int], request: Request, reporter: int) -> None:
    """In a child: run the hook as the asking process would have (its streams, arguments,
    working directory, environment, umask), then tell it the status. Never returns."""
    status = 0
    try:
        argv, cwd, env, mask = request
        for number, fd in enumerate(streams):
            os.dup2(fd, number)
        for fd in streams:
            if fd > 2:
                os.close(fd)
        os.umask(mask)
        with contextlib.suppress(OSError):
            os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(argv)
        journal.wanted.clear()
        from .hooks import main

        status = main(argv[2:])
    except BaseException:  # noqa: BLE001, S110 - the hook fails open, as in its own process
        pass
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        for folder in sorted(journal.wanted):  # for the resident process to watch
            line = folder.encode("utf-8", "surrogateescape") + b"\n"
            if len(line) <= select.PIPE_BUF:  # written whole, never mixed with another's
                with contextlib.suppress(OSError):
                    os.write(reporter, line)
        with contextlib.suppress(OSError):
            conn.sendall(bytes([status & 0xFF]))
        os._exit(0)
