"""Child processes, each in a process group of its own and within a deadline: `run` (input
in, output out) for a hook, `Session` (JSON-RPC lines over stdio) for an MCP server or
`codex app-server`.

When time is up the whole group is killed, so that what a hook started cannot outlive the
check. It is killed only while the child still runs: once the child has been waited for, its
group id may belong to someone else.

Every child gets the environment without the relative entries of its search paths (PATH,
PYTHONPATH, the loader's library path): a hook runs in the project, where they are the
project's folders, and `#!/usr/bin/env node`, `import yaml` or the loader would find a
program, module or library the project ships there. `settled` takes them out, and
`search_path_findings` tells the person, whose harness keeps them.
"""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .findings import Finding, info, problem
from .places import SEARCH_PATHS, Places, relative, search_entries


@dataclass(frozen=True)
class Ran:
    """How one `run` ended: its exit code (None when it did not end or start), its output,
    whether time ran out, and why it could not be started."""

    code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    error: str = ""  # it could not be started


def loose(env: Mapping[str, str]) -> dict[str, list[str]]:
    """The relative entries of each search path in `env` (see the module docstring)."""
    found = {
        name: [e for e in search_entries(name, env[name]) if relative(e)]
        for name in SEARCH_PATHS
        if name in env
    }
    return {name: entries for name, entries in found.items() if entries}


def settled(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the relative entries of its search paths; a search path left with none
    is unset (an empty PATH would be the working directory again)."""
    kept = dict(env)
    for name in loose(env):
        entries = [e for e in search_entries(name, env[name]) if not relative(e)]
        if entries:
            kept[name] = SEARCH_PATHS[name][0][:1].join(entries)
        else:
            del kept[name]
    return kept


def search_path_findings(places: Places) -> list[Finding]:
    """One finding per search path with relative entries: doctor ran its checks without
    them, but a harness started from this shell has them, in every project it is started
    in. PATH's is information (doctor checks the programs that matter to it where it finds
    them); the others are problems: this sagemem's own hooks would load the project's files."""
    findings = []
    for name, entries in loose(places.env).items():
        separators, finds = SEARCH_PATHS[name]
        starts = "a harness started from this shell"
        if name == "PATH":
            effect = f"{starts}, and each command typed there, finds the project's programs first"
        else:
            effect = f"sagemem's hooks, run there by {starts}, would load the project's {finds}"
        text = (
            f"{_loose(name, entries)}: in a project it names the project's folders, so {effect}"
            " (doctor's checks ran without it)"
        )
        fix = f"name {name}'s folders by absolute paths"
        if separators:
            empty = f"`export {name}=${name}:...` while it was unset"
            fix += f" (an empty entry, often left by {empty}, names the current folder)"
        findings.append((info if name == "PATH" else problem)("environment", "search-path", text, fix))
    return findings


def _loose(name: str, entries: list[str]) -> str:
    """`name`'s relative entries, in words."""
    named = [f"`{e}`" for e in dict.fromkeys(entries) if e]
    if not SEARCH_PATHS[name][0]:
        return f"{name} is relative ({named[0]})"
    if not named:
        return f"{name} has an empty entry"
    plural = "entries" if len(named) > 1 else "entry"
    return f"{name} has the relative {plural} {', '.join(named)}" + " and an empty one" * ("" in entries)


def _spawn(
    argv: list[str], places: Places, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=places.cwd if cwd is None else cwd,
        # No search path names the working directory (a stranger's project), and a Python
        # child does not put it on its path either.
        env={**settled(places.env if env is None else env), "PYTHONSAFEPATH": "1"},
        start_new_session=os.name != "nt",  # a group of its own: a timeout ends all it started
    )


def _end(process: subprocess.Popen[bytes]) -> None:
    """Kill `process` and what it started, while it is still running (once it has been
    waited for, its group id may belong to someone else)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL) if os.name != "nt" else process.kill()
    except OSError:
        pass


def run(argv: list[str], data: bytes, places: Places, timeout: float) -> Ran:
    """Run `argv` in the project with `data` on stdin, for at most `timeout` seconds."""
    try:
        process = _spawn(argv, places)
    except OSError as exc:
        return Ran(None, error=exc.strerror or str(exc))
    try:
        out, err = process.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(process)
        try:
            out, err = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a process outside its group holds the pipes
            out, err = b"", b""
        return Ran(process.returncode, out, err, timed_out=True)
    return Ran(process.returncode, out, err)


def last_line(data: bytes) -> str:
    """The last line of output that is not blank, up to 300 characters: what a process said
    as it stopped."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


class Failed(Exception):
    """A `Session.request` that got no result; the message says why."""


class Session:
    """A child process spoken to in JSON-RPC lines over stdio, all within one deadline."""

    def __init__(
        self,
        argv: list[str],
        places: Places,
        timeout: float,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.process = _spawn(argv, places, env, cwd)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = b""
        self._id = 0
        self._readers = [
            threading.Thread(target=self._read_lines, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_lines(self) -> None:
        for line in self.process.stdout or []:
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        if not isinstance(stream, io.BufferedReader):  # a pipe, buffered: what Popen gives
            return
        for chunk in iter(lambda: stream.read1(4096), b""):
            self.stderr = (self.stderr + chunk)[-16384:]  # the end says why it stopped

    def send(self, message: dict[str, Any]) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError:
            pass  # it has exited: the answer that never comes says so

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """The result of one request; `Failed`, saying why, when there is none."""
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
            except queue.Empty:
                raise Failed(f"no answer to {method} within {self.timeout:g} s") from None
            if line is None:
                try:
                    code = self.process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    code = None
                self._readers[1].join(timeout=2)
                said = last_line(self.stderr)
                raise Failed(
                    f"exited{f' with {code}' if code else ''} before answering{f': {said}' * bool(said)}"
                )
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not protocol (a stray print): read on
            if isinstance(message, dict) and message.get("id") == self._id and "method" not in message:
                if "error" in message:
                    error = message["error"]
                    raise Failed(f"{method}: {error.get('message') if isinstance(error, dict) else error}")
                return message.get("result")

    def close(self) -> None:
        try:
            if self.process.stdin:
                self.process.stdin.close()
            self.process.wait(timeout=2)  # a stdio server ends when its input does
        except (OSError, subprocess.TimeoutExpired):
            pass
        _end(self.process)
        self.process.wait()
        for reader in self._readers:  # they end at the pipes' end, which killing the group brings
            reader.join(timeout=2)
        for stream in (self.process.stdout, self.process.stderr):
            if stream:
                stream.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
