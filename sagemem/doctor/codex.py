"""`sagemem doctor`: is sagemem really running in the harnesses it was installed in?

A hook that cannot start leaves no trace: the harness drops the failure, the agent works on
without memory, and only the harness's debug log knows. So for each harness whose settings
hold a sagemem hook, doctor checks what the harness would do: that the command resolves (as
the harness's shell would, and not only because a virtual environment is active in this
shell), that it answers a test prompt event, that each MCP entry for sagemem starts and
answers `initialize`, that the harness's own switches let the hooks run (Codex's hook trust,
`hooks` feature and project trust; Claude Code's `disableAllHooks`; Gemini's folder trust and
`hooksConfig`), and that the memory directory a hook would use here exists and is healthy.

Each check returns findings (ok; a problem, with its fix; information; or "could not
check", with why); the CLI prints them. Doctor changes nothing: no setting is written and no
trust is granted. Every external step (a hook, an MCP server, `codex app-server`) runs in
its own process group with a timeout, and the group is killed when time is up.

A command is run only when it has the form sagemem's own entries have (`<sagemem> hook
<harness> <event>` or `<python> -m sagemem ...`, with nothing else on the line but
sagemem's `--dir`/`--state-dir` options): a cloned project's settings are not a script for
doctor to run. The test event has no `session_id`, so the hook runs stateless (no session
ledger is written), with a prompt that asks for nothing.

The rules for Codex's trust, Claude Code's settings and auto memory, and Gemini's folder
trust are those of Codex 0.171, Claude Code 2.1 and Gemini CLI 0.61, checked against those
programs. For Codex, the listing of `codex app-server` (Codex's own answer) is used when
`codex` is on PATH; otherwise trust is worked out from `config.toml` with the hash Codex
computes.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..install import TARGETS, claude_dir, claude_json, codex_home, read_toml

OK, PROBLEM, INFO, UNKNOWN = "ok", "problem", "info", "unknown"
TEST_PROMPT = "sagemem doctor: a test event; nothing to look up"
PROMPT_EVENTS = {
    "claude-code": "UserPromptSubmit",
    "codex": "UserPromptSubmit",
    "gemini": "BeforeAgent",
    "dsh": "UserPromptSubmit",
}
MAX_SETTINGS_BYTES = 64 * 1024 * 1024  # ~/.claude.json keeps every project's history
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "sagemem-doctor", "version": "1"},
}
MCP_MISSING = ("needs the mcp package", "No module named 'mcp'")
# Codex leaves the matcher of these events out of a hook's identity (it ignores it there).
CODEX_NO_MATCHER = ("UserPromptSubmit", "Stop")
_PYTHON = re.compile(r"python[0-9.]*(?:\.exe)?|pythonw(?:\.exe)?", re.I)
_SAGEMEM = re.compile(r"sagemem(?:\.exe)?", re.I)
_HOOK = re.compile(r"\bhook (?:claude-code|codex|gemini|dsh)\b")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Finding:
    """One result. `status` is ok, problem (`fix` then says what to run or edit), info, or
    unknown (could not check; `message` says why)."""

    area: str  # the harness, or "memory"
    check: str
    status: str
    message: str
    fix: str = ""
    where: str = ""  # the file it is about, if one

    def to_dict(self) -> dict[str, str]:
        return {
            "area": self.area,
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
            "where": self.where,
        }


def _ok(area: str, check: str, message: str, where: object = "") -> Finding:
    return Finding(area, check, OK, message, where=str(where))


def _problem(area: str, check: str, message: str, fix: str, where: object = "") -> Finding:
    return Finding(area, check, PROBLEM, message, fix, str(where))


def _info(area: str, check: str, message: str, fix: str = "") -> Finding:
    return Finding(area, check, INFO, message, fix)


def _unknown(area: str, check: str, message: str, where: object = "") -> Finding:
    return Finding(area, check, UNKNOWN, message, where=str(where))


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    @property
    def problems(self) -> int:
        return sum(f.status == PROBLEM for f in self.findings)

    @property
    def unknown(self) -> int:
        return sum(f.status == UNKNOWN for f in self.findings)

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_dict(self) -> dict[str, Any]:
        findings = [f.to_dict() for f in self.findings]
        return {"ok": self.ok, "problems": self.problems, "unknown": self.unknown, "findings": findings}


def _system_file(mac: str, linux: str, name: str) -> Path:
    if sys.platform == "darwin":
        return Path("/Library/Application Support", mac, name)
    if os.name == "nt":
        return Path(os.environ.get("ProgramFiles", r"C:\Program Files"), mac, name)
    return Path("/etc", linux, name)


@dataclass(frozen=True)
class Places:
    """Where doctor looks (the project is `cwd`) and how long each external step may take."""

    cwd: Path
    home: Path
    env: Mapping[str, str]
    claude_policy: Path = field(
        default_factory=lambda: _system_file("ClaudeCode", "claude-code", "managed-settings.json")
    )
    gemini_system: Path = field(
        default_factory=lambda: _system_file("GeminiCli", "gemini-cli", "settings.json")
    )
    timeout: float = 15.0  # seconds for one MCP start, or one conversation with codex app-server
    hook_timeout: float = 30.0  # at most, for one hook run (else the hook's own timeout)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cwd", self.cwd.resolve())  # what a harness's getcwd() says

    @classmethod
    def here(cls, **given: Any) -> Places:
        return cls(cwd=Path.cwd(), home=Path.home(), env=dict(os.environ), **given)


def diagnose(places: Places | None = None) -> Report:
    """Every check, for each harness sagemem is set up in here, then the memory directory."""
    places = places or Places.here()
    runs = _Runs(places)
    findings: list[Finding] = []
    found_any = False
    for check in (_claude_code, _codex, _gemini, _dsh):
        found, results = check(places, runs)
        found_any = found_any or found
        findings += results
    if not found_any:
        findings.append(
            _info(
                "sagemem",
                "installed",
                "no harness runs sagemem here: no sagemem hook or MCP entry in the project or user settings"
                " of Claude Code, Codex, Gemini CLI or dsh (`sagemem install <harness>` adds them)",
            )
        )
    return Report(tuple(findings + memory_findings(places)))


# -- hooks in a settings file -------------------------------------------------------------------


@dataclass(frozen=True)
class Hook:
    """One sagemem handler in a harness's hooks settings, with its place (Codex keys its
    trust on it)."""

    harness: str
    scope: str  # project or user (Claude Code: also local)
    path: Path
    event: str
    group: int
    index: int
    matcher: Any
    handler: Mapping[str, Any]

    @property
    def command(self) -> str:
        return str(self.handler.get("command", ""))

    @property
    def ours(self) -> bool:
        """Written by `install`, so that `install` rewrites it."""
        from ..install import own_handler

        if self.harness == "dsh":  # its hooks file is sagemem's alone
            return True
        group = {} if self.matcher is None else {"matcher": self.matcher}
        return self.event in TARGETS[self.harness][2] and own_handler(
            group, self.handler, self.harness, self.event
        )


def read_settings(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in `path`: (data, None); (None, None) when there is no file; (None,
    why) when it cannot be read or is not an object."""
    try:
        if not path.is_file():
            return None, None
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            return None, f"larger than {MAX_SETTINGS_BYTES >> 20} MiB"
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"not readable as JSON ({exc})"
    return (data, None) if isinstance(data, dict) else (None, "not a JSON object")


def _quiet(path: Path) -> dict[str, Any]:
    return read_settings(path)[0] or {}


def _get(data: Any, *keys: str) -> Any:
    """`data[k1][k2]...`, None where a level is missing or not an object."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def hooks_in(harness: str, scope: str, path: Path, data: Mapping[str, Any]) -> list[Hook]:
    """The command handlers in `data["hooks"]` that run `sagemem ... hook <harness> ...`."""
    found = []
    events = data.get("hooks")
    for event, groups in events.items() if isinstance(events, dict) else []:
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str) and "sagemem" in command and _HOOK.search(command):
                    found.append(Hook(harness, scope, path, event, g, h, group.get("matcher"), handler))
    return found


def _collect(harness: str, files: Iterable[tuple[str, Path]]) -> tuple[list[Finding], list[Hook]]:
    findings, hooks, seen = [], [], set()
    for scope, path in files:
        if path in seen:
            continue
        seen.add(path)
        data, why = read_settings(path)
        if why:
            findings.append(_problem(harness, "settings", f"{path}: {why}", f"edit {path}", path))
        hooks += hooks_in(harness, scope, path, data or {})
    return findings, hooks


def _reinstall(harness: str, scope: str) -> str:
    from ..command import command_line

    if harness == "dsh":
        return command_line("install", "dsh")
    return command_line("install", harness, *(["--scope", "user"] if scope == "user" else []))


def _sagemem_rest(words: list[str]) -> list[str] | None:
    """What follows sagemem's global options when `words` run sagemem the way its own
    entries do (`<sagemem> ...`, `<python> -m sagemem ...`, the program by absolute path or
    bare name); None for anything else."""
    if not words or ("/" in words[0] or os.sep in words[0]) and not Path(words[0]).is_absolute():
        return None
    name = Path(words[0]).name
    if _SAGEMEM.fullmatch(name):
        rest = words[1:]
    elif _PYTHON.fullmatch(name) and words[1:3] == ["-m", "sagemem"]:
        rest = words[3:]
    else:
        return None
    while len(rest) > 1 and rest[0] in ("--dir", "--state-dir"):
        rest = rest[2:]
    return rest


def hook_words(hook: Hook) -> list[str] | None:
    """The hook's command as words, if it is one doctor runs (see the module docstring)."""
    try:
        words = shlex.split(hook.command)
    except ValueError:
        return None
    rest = _sagemem_rest(words)
    if rest is None or shlex.join(words) != hook.command.strip():
        return None  # quoting, pipes, `&&`, variables: not a line sagemem writes
    return words if rest[:2] == ["hook", hook.harness] and len(rest) <= 3 else None


@dataclass(frozen=True)
class Resolved:
    """Where a command's program is; `problem` says why it would not start; `venv` names
    the virtual environment it is found in only because that is active in this shell."""

    program: str
    path: Path | None
    problem: str = ""
    venv: str = ""


def resolve(program: str, places: Places) -> Resolved:
    """`program` as a harness's shell finds it: a path as it is, a bare name on PATH."""
    if "/" in program or os.sep in program:
        path = Path(program)
        if not path.exists():
            return Resolved(program, None, "does not exist")
        if not path.is_file() or not os.access(path, os.X_OK):
            return Resolved(program, None, "is not an executable file")
        return Resolved(program, path)
    search = places.env.get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is None:
        return Resolved(program, None, "is not on PATH")
    venv = places.env.get("VIRTUAL_ENV", "")
    if venv:
        scripts = Path(venv) / ("Scripts" if os.name == "nt" else "bin")
        rest = os.pathsep.join(p for p in search.split(os.pathsep) if p and Path(p) != scripts)
        if shutil.which(program, path=rest) is None:
            return Resolved(program, Path(found), venv=venv)
    return Resolved(program, Path(found))


def hook_findings(hooks: list[Hook], places: Places, runs: _Runs) -> list[Finding]:
    """Does each hook's program resolve (one line per file and program when it does), and
    does the prompt hook answer a test event."""
    findings: list[Finding] = []
    resolved: dict[tuple[str, Path, str], list[str]] = {}
    for hook in hooks:
        where = f"{hook.path}: the {hook.event} hook"
        mine = hook.ours and hook.scope in ("project", "user")
        fix = _reinstall(hook.harness, hook.scope) if mine else f"edit {hook.path}: hooks.{hook.event}"
        words = hook_words(hook)
        if words is None:
            text = (
                f"{where} was not run: `{hook.command}` is not a line sagemem writes (doctor runs only those)"
            )
            findings.append(_unknown(hook.harness, "hook", text, hook.path))
            continue
        found = resolve(words[0], places)
        if found.path is None:
            text = f"{where} runs {found.program}, which {found.problem}: the harness gets no memory"
            findings.append(_problem(hook.harness, "hook", text, fix, hook.path))
            continue
        if found.venv:
            text = (
                f"{where} runs `{found.program}`, found only because the virtual environment {found.venv}"
                " is active in this shell: a harness started from another shell gets no memory"
            )
            how = f"{fix} (run in this environment, it writes the absolute path)" if mine else fix
            findings.append(_problem(hook.harness, "hook", text, how, hook.path))
        else:
            resolved.setdefault((hook.harness, hook.path, str(found.path)), []).append(hook.event)
        if hook.event == PROMPT_EVENTS[hook.harness]:
            findings.append(runs.hook(hook))
    fine = [
        _ok(
            harness,
            "hook",
            f"{path}: the {', '.join(events)} hook{'s run' if len(events) > 1 else ' runs'} {program}",
            path,
        )
        for (harness, path, program), events in resolved.items()
    ]
    return fine + findings


# -- running things -----------------------------------------------------------------------------


class _Runs:
    """Hook runs and MCP starts, each done once per command line."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self._done: dict[tuple[str, ...], Finding] = {}

    def hook(self, hook: Hook) -> Finding:
        key = ("hook", hook.command, hook.event)
        if key not in self._done:
            self._done[key] = _test_hook(hook, self.places)
        done = self._done[key]
        where = f"{hook.path}: the {hook.event} hook"
        return Finding(
            hook.harness, done.check, done.status, f"{where} {done.message}", done.fix, str(hook.path)
        )

    def mcp(self, entry: McpEntry) -> Finding:
        key = ("mcp", entry.command, *entry.args)
        if key not in self._done:
            self._done[key] = _test_mcp(entry, self.places)
        done = self._done[key]
        message = f"{entry.label}: the sagemem MCP server {done.message}"
        fix = done.fix or (entry.fix if done.status == PROBLEM else "")
        return Finding(entry.harness, done.check, done.status, message, fix, entry.where)


@dataclass(frozen=True)
class Ran:
    code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    error: str = ""  # it could not be started


def _shell(line: str) -> list[str]:
    """How harnesses run a hook's command line."""
    if os.name == "nt":
        return [os.environ.get("COMSPEC", "cmd.exe"), "/d", "/s", "/c", line]
    return ["/bin/sh", "-c", line]


def _spawn(argv: list[str], places: Places, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=places.cwd,
        env=dict(places.env if env is None else env),
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


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _hook_seconds(hook: Hook) -> float | None:
    timeout = hook.handler.get("timeout", hook.handler.get("timeoutSec"))
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return None
    return timeout / 1000 if hook.harness == "gemini" else float(timeout)


def _test_hook(hook: Hook, places: Places) -> Finding:
    """Run the hook's exact command line through the shell with a test prompt event: it
    passes when it exits 0 and prints nothing or one JSON object. The message follows the
    hook's name."""
    data = json.dumps({"hook_event_name": hook.event, "cwd": str(places.cwd), "prompt": TEST_PROMPT})
    own = _hook_seconds(hook)
    limit = min(own or places.hook_timeout, places.hook_timeout)
    ran = run(_shell(hook.command), data.encode("utf-8"), places, limit)
    by_hand = f"run it by hand to see why: printf '%s' {shlex.quote(data)} | {hook.command}"
    if ran.error:
        return _unknown(hook.harness, "hook-run", f"could not be run: {ran.error}")
    if ran.timed_out:
        waits = f" (the harness waits {own:g} s)" if own is not None and own <= limit else ""
        return _problem(
            hook.harness, "hook-run", f"did not answer a test event within {limit:g} s{waits}", by_hand
        )
    if ran.code != 0:
        said = _last_line(ran.stderr) or _last_line(ran.stdout)
        text = f"exited with {ran.code} on a test event" + (f": {said}" if said else "")
        return _problem(hook.harness, "hook-run", text, by_hand)
    text = ran.stdout.decode("utf-8", "replace").strip()
    try:
        valid = not text or isinstance(json.loads(text), dict)
    except ValueError:
        valid = False
    if not valid:
        said = f"printed what is not one JSON object on a test event (the harness drops it): {text[:80]!r}"
        return _problem(hook.harness, "hook-run", said, by_hand)
    return _ok(hook.harness, "hook-run", "answers a test event")


class _Failed(Exception):
    pass


class Session:
    """A child process spoken to in JSON-RPC lines over stdio, all within one deadline."""

    def __init__(
        self, argv: list[str], places: Places, timeout: float, env: Mapping[str, str] | None = None
    ) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.process = _spawn(argv, places, env)
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
        for chunk in iter(lambda: stream.read1(4096) if stream else b"", b""):
            self.stderr = (self.stderr + chunk)[-16384:]  # the end says why it stopped

    def send(self, message: dict[str, Any]) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError:
            pass  # it has exited: the answer that never comes says so

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """The result of one request; `_Failed`, saying why, when there is none."""
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
            except queue.Empty:
                raise _Failed(f"no answer to {method} within {self.timeout:g} s") from None
            if line is None:
                try:
                    code = self.process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    code = None
                self._readers[1].join(timeout=2)
                said = _last_line(self.stderr)
                raise _Failed(
                    f"exited{f' with {code}' if code else ''} before answering{f': {said}' * bool(said)}"
                )
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not protocol (a stray print): read on
            if isinstance(message, dict) and message.get("id") == self._id and "method" not in message:
                if "error" in message:
                    error = message["error"]
                    raise _Failed(f"{method}: {error.get('message') if isinstance(error, dict) else error}")
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


# -- MCP entries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpEntry:
    harness: str
    label: str  # where it is: a file, or a file and a table
    where: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    fix: str  # what puts it right when its program is gone


def mcp_entry(harness: str, path: Path, entry: Any, fix: str, label: str = "") -> McpEntry | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return None
    args = entry.get("args") if isinstance(entry.get("args"), list) else []
    env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
    variables = {str(k): str(v) for k, v in env.items()}
    return McpEntry(
        harness, label or str(path), str(path), entry["command"], tuple(map(str, args)), variables, fix
    )


def _mcp_entries(harness: str, files: list[tuple[Path, str]]) -> list[McpEntry]:
    """The `mcpServers.sagemem` entries of JSON settings files, with each one's fix."""
    found = []
    for path, fix in files:
        entry = mcp_entry(harness, path, _get(_quiet(path), "mcpServers", "sagemem"), fix)
        found += [entry] if entry else []
    return found


def _test_mcp(entry: McpEntry, places: Places) -> Finding:
    """Start the server as the harness would (no shell) and do an MCP `initialize`. The
    message follows the server's name."""
    argv = [entry.command, *entry.args]
    if _sagemem_rest(argv) != ["mcp"]:
        text = (
            f"was not started: `{shlex.join(argv)}` is not an entry sagemem writes (doctor starts only those)"
        )
        return _unknown(entry.harness, "mcp", text)
    found = resolve(entry.command, places)
    if found.path is None:
        return _problem(entry.harness, "mcp", f"runs {entry.command}, which {found.problem}", "")
    # Only sagemem's own variables from the entry: a cloned project's entry could set others
    # (PYTHONPATH, LD_PRELOAD) that run code of its own.
    env = {**places.env, **{k: v for k, v in entry.env.items() if k.startswith("SAGEMEM_")}}
    by_hand = f"run it by hand to see why: {shlex.join(argv)}"
    try:
        with Session([str(found.path), *entry.args], places, places.timeout, env) as session:
            try:
                result = session.request("initialize", INITIALIZE)
            except _Failed as failed:
                said = f"{failed} {session.stderr.decode('utf-8', 'replace')}"
                if any(marker in said for marker in MCP_MISSING):
                    python = interpreter(found.path)
                    text = f"does not start: the mcp package is missing from {python}"
                    return _problem(
                        entry.harness, "mcp", text, f"{shlex.quote(python)} -m pip install 'sagemem[mcp]'"
                    )
                if "memory directory does not exist" in said:  # the memory finding says which
                    fix = "sagemem init --project (this project's memory) or sagemem init (yours)"
                    return _problem(entry.harness, "mcp", f"does not start: {failed}", fix)
                return _problem(entry.harness, "mcp", f"does not answer: {failed}", by_hand)
    except OSError as exc:
        return _unknown(entry.harness, "mcp", f"could not be started: {exc.strerror or exc}")
    server = " ".join(str(_get(result, "serverInfo", k) or "") for k in ("name", "version")).strip()
    name = f" ({server})" if server else ""
    return _ok(entry.harness, "mcp", f"starts and answers initialize{name}")


def interpreter(program: Path) -> str:
    """The Python a sagemem script runs with: the program itself, or its `#!` line's."""
    if _PYTHON.fullmatch(program.name):
        return str(program)
    try:
        with open(program, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        first = b""
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) > 1 and Path(words[0]).name == "env":
        return shutil.which(words[-1]) or words[-1]
    return words[0] if words else f"the Python of {program}"


def _mcp_fix(harness: str, scope: str) -> str:
    from ..command import command_line

    if harness == "codex":
        return f"codex mcp add sagemem -- {command_line('mcp')}"
    if harness == "claude-code" and scope == "user":
        adding = f"claude mcp add --scope user sagemem -- {command_line('mcp')}"
        return f"claude mcp remove --scope user sagemem && {adding}"
    return _reinstall(harness, scope)


# -- Claude Code --------------------------------------------------------------------------------


def _claude_code(places: Places, runs: _Runs) -> tuple[bool, list[Finding]]:
    user = claude_dir(places.home, places.env) / "settings.json"
    project, local = places.cwd / ".claude" / "settings.json", places.cwd / ".claude" / "settings.local.json"
    findings, hooks = _collect("claude-code", [("project", project), ("local", local), ("user", user)])
    state = claude_json(places.home, places.env)
    mcp = _mcp_entries(
        "claude-code",
        [
            (places.cwd / ".mcp.json", _mcp_fix("claude-code", "project")),
            (state, _mcp_fix("claude-code", "user")),
        ],
    )
    if not hooks and not mcp:
        return bool(findings), findings
    findings += hook_findings(hooks, places, runs)
    if hooks:
        findings += _claude_switches(places)
        findings.append(_claude_trust(places, state))
    findings += [runs.mcp(entry) for entry in mcp]
    if not mcp:
        text = f"Claude Code has no sagemem MCP server (the memory_* tools) in .mcp.json or {state}"
        fix = _mcp_fix("claude-code", "user").split(" && ")[-1]  # nothing to remove first
        findings.append(_info("claude-code", "mcp", text, fix))
    findings.append(claude_auto_memory(places))
    return True, findings


def _claude_layers(places: Places, *, project: bool = True) -> list[Path]:
    """Claude Code's settings files, the later winning: user, project, local, managed."""
    user = claude_dir(places.home, places.env) / "settings.json"
    own = [places.cwd / ".claude" / "settings.json"] if project else []
    return [user, *own, places.cwd / ".claude" / "settings.local.json", places.claude_policy]


def _claude_switches(places: Places) -> list[Finding]:
    """`disableAllHooks` in the merged settings, and the managed policy's
    `allowManagedHooksOnly`: either keeps sagemem's hooks from running."""
    policy = places.claude_policy
    if _quiet(policy).get("allowManagedHooksOnly") is True:
        text = (
            f"Claude Code runs only managed hooks, not sagemem's: allowManagedHooksOnly is true in {policy}"
        )
        return [_problem("claude-code", "hooks-disabled", text, f"ask whoever manages {policy}", policy)]
    disabled, source = False, None
    for path in _claude_layers(places):
        value = _quiet(path).get("disableAllHooks")
        if isinstance(value, bool):
            disabled, source = value, path
    if not disabled:
        return []
    text = f"Claude Code runs no hooks here: disableAllHooks is true in {source}"
    fix = (
        f"ask whoever manages {policy}"
        if source == policy
        else f"edit {source}: set disableAllHooks to false"
    )
    return [_problem("claude-code", "hooks-disabled", text, fix, source)]


def _claude_trust(places: Places, state: Path) -> Finding:
    projects = _get(_quiet(state), "projects") or {}
    for folder in (places.cwd, *places.cwd.parents):
        if _get(projects, str(folder), "hasTrustDialogAccepted") is True:
            return _info(
                "claude-code", "workspace-trust", f"Claude Code's trust dialog was accepted for {folder}"
            )
    return _info(
        "claude-code",
        "workspace-trust",
        f"Claude Code's trust dialog has not been accepted for {places.cwd} (per {state}): an interactive"
        " session holds back settings hooks until you accept it; `claude -p` counts as trusted",
    )


def claude_auto_memory(places: Places) -> Finding:
    """Whether Claude Code's own auto memory is on here, and its folder: two memories side
    by side are worth knowing about."""
    on, why = _auto_memory_on(places)
    state = "on" if on else "off"
    text = f"Claude Code's auto memory is {state} here ({why}); its folder: {claude_memory_dir(places)}"
    if on:
        text += " (a switch on Anthropic's side can turn it off, which cannot be checked here)"
    return _info("claude-code", "auto-memory", text)


def _auto_memory_on(places: Places) -> tuple[bool, str]:
    given = places.env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY")
    if given is not None and given.strip().lower() in _TRUE:
        return False, f"CLAUDE_CODE_DISABLE_AUTO_MEMORY={given.strip()}"
    if given is not None and given.strip().lower() in _FALSE:
        return True, f"CLAUDE_CODE_DISABLE_AUTO_MEMORY={given.strip()} turns it on"
    if places.env.get("CLAUDE_CODE_SIMPLE"):
        return False, "CLAUDE_CODE_SIMPLE is set"
    value, source = True, None
    for path in _claude_layers(places):
        setting = _quiet(path).get("autoMemoryEnabled")
        if isinstance(setting, bool):
            value, source = setting, path
    return value, f"autoMemoryEnabled is {str(value).lower()} in {source}" if source else "the default"


def claude_memory_dir(places: Places) -> Path:
    """`autoMemoryDirectory` (Claude Code ignores it in the project's own settings), else
    `<Claude's folder>/projects/<slug of the project root>/memory`."""
    chosen = None
    for path in _claude_layers(places, project=False):
        value = _quiet(path).get("autoMemoryDirectory")
        if isinstance(value, str) and (value.startswith(("~/", "~\\")) or Path(value).is_absolute()):
            chosen = value
    if chosen is not None:
        return places.home / chosen[2:] if chosen.startswith("~") else Path(chosen)
    root = git_main_root(places.cwd) or places.cwd
    return claude_dir(places.home, places.env) / "projects" / claude_slug(str(root)) / "memory"


def claude_slug(path: str) -> str:
    """Claude Code's folder name for a project path: every UTF-16 code unit that is not an
    ASCII letter or digit becomes `-`; past 200, the first 200 and a hash of the whole."""
    data = path.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    slug = "".join(chr(u) if chr(u).isascii() and chr(u).isalnum() else "-" for u in units)
    if len(slug) <= 200:
        return slug
    value = 0
    for unit in units:  # Java's String.hashCode, 32 bits, signed
        value = (value * 31 + unit) & 0xFFFFFFFF
    value = abs(value - (1 << 32) if value >= 1 << 31 else value)
    digits = ""
    while value:
        value, digit = divmod(value, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return f"{slug[:200]}-{digits or '0'}"


def git_root(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` that holds `.git`."""
    return next((f for f in (folder, *folder.parents) if (f / ".git").exists()), None)


def git_main_root(folder: Path) -> Path | None:
    """The git root, or for a linked worktree its main checkout's."""
    root = git_root(folder)
    if root is None or not (root / ".git").is_file():
        return root
    try:
        gitdir = root / (root / ".git").read_text("utf-8").strip().removeprefix("gitdir:").strip()
        common = (gitdir / (gitdir / "commondir").read_text("utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return root
    return common.parent if common.name == ".git" else root


# -- Codex --------------------------------------------------------------------------------------


def _codex(places: Places, runs: _Runs) -> tuple[bool, list[Finding]]:
    home = codex_home(places.home, places.env)
    config_path = home / "config.toml"
    config = read_toml(config_path)
    root = git_root(places.cwd) or places.cwd
    chain = [places.cwd, *places.cwd.parents]
    folders = reversed(chain[: chain.index(root) + 1])  # Codex reads .codex/ from the root down
    files = [("user", home / "hooks.json"), *[("project", f / ".codex" / "hooks.json") for f in folders]]
    findings, hooks = _collect("codex", files)
    label = f"{config_path} [mcp_servers.sagemem]"
    mcp = mcp_entry(
        "codex", config_path, _get(config, "mcp_servers", "sagemem"), _mcp_fix("codex", "user"), label
    )
    if not hooks and mcp is None:
        return bool(findings), findings
    findings += hook_findings(hooks, places, runs)
    if hooks:
        findings += codex_trust(hooks, places, config, config_path, root)
    if mcp is not None:
        findings.append(runs.mcp(mcp))
    elif config is not None:
        text = f"Codex has no sagemem MCP server (the memory_* tools) in {config_path}"
        findings.append(_info("codex", "mcp", text, _mcp_fix("codex", "user")))
    return True, findings


def codex_hash(hook: Hook) -> str:
    """The hash Codex keys a hook's trust on: SHA-256 of the canonical JSON of the event,
    the matcher (where the event keeps one) and the handler."""
    handler = hook.handler
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    seconds = timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else 600
    identity: dict[str, Any] = {"type": "command", "command": hook.command, "timeout": max(1, seconds)}
    identity["async"] = bool(handler.get("async", False))
    for key in ("statusMessage", "additionalContextLimit"):
        if handler.get(key) is not None:
            identity[key] = handler[key]
    whole: dict[str, Any] = {"event_name": _snake(hook.event), "hooks": [identity]}
    if hook.event not in CODEX_NO_MATCHER and hook.matcher is not None:
        whole["matcher"] = hook.matcher
    text = json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def codex_key(hook: Hook) -> str:
    """Where Codex keeps a hook's trust: `[hooks.state."<file>:<event>:<group>:<handler>"]`."""
    return f"{hook.path}:{_snake(hook.event)}:{hook.group}:{hook.index}"


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def codex_trust(
    hooks: list[Hook], places: Places, config: dict[str, Any] | None, config_path: Path, root: Path
) -> list[Finding]:
    """Is the `hooks` feature on, is the project trusted (for its own hooks), is each hook
    trusted and enabled: Codex skips, without a word, a hook that fails any of these."""
    listing, why_not = codex_listing(places)
    if config is None and listing is None:
        text = (
            f"Codex's hook trust: {why_not}, and {config_path} cannot be read here"
            " (it takes Python 3.11's tomllib)"
        )
        return [_unknown("codex", "trust", text, config_path)]
    feature = (
        listing["feature"]
        if listing and listing["feature"] is not None
        else _get(config, "features", "hooks")
    )
    if feature is False:
        text = f"Codex's hooks feature is off (see {config_path}): Codex runs no hooks"
        return [_problem("codex", "feature", text, "codex features enable hooks", config_path)]
    findings = []
    project_hooks = [h for h in hooks if h.scope == "project"]
    trust = _get(config, "projects", str(root), "trust_level")
    if config is None and listing:  # Codex lists a project's hooks only when it trusts the project
        listed = {str(h.get("sourcePath")) for h in listing["hooks"].values()}
        trust = "trusted" if any(str(h.path) in listed for h in project_hooks) else None
    if project_hooks and trust != "trusted":
        level = f" (trust_level = {trust!r})" if trust else ""
        text = f"Codex does not trust the project {root}{level}, so it does not load .codex/hooks.json there"
        fix = (
            f"start `codex` in {root} and trust it, or add [projects.{json.dumps(str(root))}]"
            f' trust_level = "trusted" to {config_path}'
        )
        findings.append(_problem("codex", "project-trust", text, fix, config_path))
    how = "" if listing else f" (worked out from {config_path} by Codex 0.171's rules: {why_not})"
    state = _get(config, "hooks", "state") or {}
    for hook in hooks:
        if hook.scope == "project" and trust != "trusted":
            continue
        key = codex_key(hook)
        if listing:
            found = listing["hooks"].get(key) or _listed(listing["hooks"].values(), hook)
            status, enabled = (found.get("trustStatus"), found.get("enabled")) if found else (None, None)
        else:
            stored = _get(state, key, "trusted_hash")
            status = "untrusted" if not stored else "trusted" if stored == codex_hash(hook) else "modified"
            enabled = _get(state, key, "enabled")
        findings.append(_codex_hook(hook, status, enabled, key, config_path, how, places))
    return findings


def _listed(listed: Iterable[Any], hook: Hook) -> Any:
    """The listed hook that is this one, where its key spells the path another way."""
    for entry in listed:
        source = entry.get("sourcePath")
        if (
            source
            and entry.get("command") == hook.command
            and _snake(str(entry.get("eventName"))) == _snake(hook.event)
        ):
            try:
                if os.path.samefile(source, hook.path):
                    return entry
            except OSError:
                continue
    return None


def _codex_hook(
    hook: Hook, status: Any, enabled: Any, key: str, config_path: Path, how: str, places: Places
) -> Finding:
    where = f"{hook.path}: the {hook.event} hook"
    review = f"start `codex` in {places.cwd}, type /hooks and trust sagemem's hooks"
    if status in ("trusted", "managed") and enabled is not False:
        return _ok("codex", "trust", f"{where} is trusted by Codex{how}", hook.path)
    if status in ("trusted", "managed"):
        table = f"[hooks.state.{json.dumps(key)}]"
        fix = f"turn it on in /hooks (or drop `enabled = false` from {table} in {config_path})"
        return _problem("codex", "trust", f"{where} is turned off in Codex's /hooks{how}", fix, hook.path)
    if status == "modified":
        text = f"{where} changed since you trusted it (its command, timeout or place), so Codex skips it{how}"
        return _problem("codex", "trust", text, review, hook.path)
    if status == "untrusted":
        text = f"{where} is not trusted yet, so Codex skips it without a word{how}"
        return _problem("codex", "trust", text, review, hook.path)
    return _unknown("codex", "trust", f"{where}: codex app-server does not list it", hook.path)


def codex_listing(places: Places) -> tuple[dict[str, Any] | None, str]:
    """Codex's own answer, from `codex app-server`: {"hooks": {key: hook}, "feature": the
    `hooks` feature's state or None}; (None, why) when there is none."""
    codex = shutil.which("codex", path=places.env.get("PATH", os.defpath))
    if codex is None:
        return None, "`codex` is not on PATH"
    try:
        with Session([codex, "app-server"], places, places.timeout) as session:
            session.request("initialize", {"clientInfo": {"name": "sagemem-doctor", "version": "1"}})
            session.send({"jsonrpc": "2.0", "method": "initialized"})
            listed = session.request("hooks/list", {"cwds": [str(places.cwd)]})
            try:
                features = session.request("experimentalFeature/list", {})
            except _Failed:
                features = None
    except _Failed as failed:
        return None, f"codex app-server: {failed}"
    except OSError as exc:
        return None, f"codex app-server could not be started: {exc.strerror or exc}"
    hooks = {
        str(h.get("key")): h
        for entry in _get(listed, "data") or []
        if isinstance(entry, dict)
        for h in entry.get("hooks", [])
        if isinstance(h, dict)
    }
    flags = [f for f in _get(features, "data") or [] if isinstance(f, dict) and f.get("name") == "hooks"]
    return {"hooks": hooks, "feature": flags[0].get("enabled") if flags else None}, ""


# -- Gemini CLI ---------------------------------------------------------------------------------


def _gemini(places: Places, runs: _Runs) -> tuple[bool, list[Finding]]:
    project = places.cwd / ".gemini" / "settings.json"
    user = places.home / ".gemini" / "settings.json"
    findings, hooks = _collect("gemini", [("project", project), ("user", user)])
    mcp = _mcp_entries(
        "gemini", [(project, _mcp_fix("gemini", "project")), (user, _mcp_fix("gemini", "user"))]
    )
    if not hooks and not mcp:
        return bool(findings), findings
    trusted, why = gemini_trust(places)
    if project in {h.path for h in hooks} | {Path(e.where) for e in mcp}:
        findings.append(_gemini_trust(places, trusted, why))
    elif trusted is not True:
        text = f"Gemini does not trust {places.cwd} ({why}): a headless run there stops until it does"
        findings.append(_info("gemini", "folder-trust", text))
    # The project's hooks are checked even where Gemini does not read them yet: they are
    # what runs once the folder is trusted.
    findings += hook_findings(hooks, places, runs)
    findings += _gemini_switches(places, hooks)
    findings += [runs.mcp(entry) for entry in mcp]
    return True, findings


def gemini_trust(places: Places) -> tuple[bool | None, str]:
    """Whether Gemini trusts the project folder: True, False, or None (no rule: Gemini asks
    in an interactive session and stops a headless one); and why."""
    enabled = True
    for path in (places.home / ".gemini" / "settings.json", places.gemini_system):
        value = _get(_quiet(path), "security", "folderTrust", "enabled")
        enabled = value if isinstance(value, bool) else enabled
    if not enabled:
        return True, "folder trust is off"
    given = places.env.get("GEMINI_CLI_TRUST_WORKSPACE", "").strip().lower()
    if given in ("true", "false"):
        return given == "true", f"GEMINI_CLI_TRUST_WORKSPACE={given}"
    rules_path = places.home / ".gemini" / "trustedFolders.json"
    best: tuple[int, bool, str] | None = None  # the longest rule that covers the folder wins
    for raw, rule in _quiet(rules_path).items():
        if rule not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"):
            continue
        folder = Path(raw).expanduser().resolve()
        folder = folder.parent if rule == "TRUST_PARENT" else folder
        if (folder == places.cwd or folder in places.cwd.parents) and (
            best is None or len(str(folder)) > best[0]
        ):
            best = (len(str(folder)), rule != "DO_NOT_TRUST", f"{raw}: {rule} in {rules_path}")
    return (best[1], best[2]) if best else (None, f"no rule for it in {rules_path}")


def _gemini_trust(places: Places, trusted: bool | None, why: str) -> Finding:
    rules = places.home / ".gemini" / "trustedFolders.json"
    if trusted:
        text = (
            f"Gemini trusts {places.cwd} ({why}) and reads its .gemini/settings.json (not with --skip-trust)"
        )
        return _ok("gemini", "folder-trust", text)
    text = f"Gemini does not trust {places.cwd} ({why}): it ignores its .gemini/settings.json, hooks and all"
    if trusted is None:
        rule = f'{json.dumps(str(places.cwd))}: "TRUST_FOLDER"'
        fix = f"start `gemini` there and trust the folder, or add {rule} to {rules}"
    elif why.startswith("GEMINI_CLI_TRUST_WORKSPACE"):
        fix = "unset GEMINI_CLI_TRUST_WORKSPACE (or set it to true)"
    else:
        fix = f"edit {rules}: the rule that says DO_NOT_TRUST"
    return _problem("gemini", "folder-trust", text, fix, rules)


def _gemini_switches(places: Places, hooks: list[Hook]) -> list[Finding]:
    """`hooksConfig.enabled: false` turns every hook off; `hooksConfig.disabled` lists the
    ones turned off, by name (else by command). User, project, then system settings."""
    enabled, source, disabled = True, None, {}
    layers = [places.home / ".gemini" / "settings.json", places.cwd / ".gemini" / "settings.json"]
    for path in [*layers, places.gemini_system]:
        config = _quiet(path).get("hooksConfig")
        if not isinstance(config, dict):
            continue
        if isinstance(config.get("enabled"), bool):
            enabled, source = config["enabled"], path
        names = config.get("disabled") if isinstance(config.get("disabled"), list) else []
        disabled.update({str(name): path for name in names if str(name) not in disabled})
    if hooks and not enabled:
        text = f"Gemini runs no hooks: hooksConfig.enabled is false in {source}"
        return [
            _problem(
                "gemini", "hooks-config", text, f"edit {source}: set hooksConfig.enabled to true", source
            )
        ]
    findings = []
    for hook in hooks:
        name = str(hook.handler.get("name") or hook.command)
        if name in disabled:
            text = f"{hook.path}: the {hook.event} hook is off: hooksConfig.disabled lists {name!r}"
            text += f" (in {disabled[name]})"
            fix = f"edit {disabled[name]}: take {name!r} out of hooksConfig.disabled"
            findings.append(_problem("gemini", "hooks-config", text, fix, disabled[name]))
    return findings


# -- DeepSeek Harness ---------------------------------------------------------------------------


def _dsh(places: Places, runs: _Runs) -> tuple[bool, list[Finding]]:
    from .. import dsh

    home = dsh.dsh_home(dict(places.env))
    hooks_file = home / "sagemem" / "hooks.json"
    findings, hooks = _collect("dsh", [("user", hooks_file)])
    layers = [home / "cordis.patch.yml", *sorted(home.glob("profiles/*/cordis.patch.yml"))]
    loading = [
        (layer, rows) for layer in layers if (rows := _dsh_rows(layer, dsh.BEGIN, dsh.END)) is not None
    ]
    if not hooks and not loading:
        return bool(findings), findings
    fix = f"{dsh.BRIDGE_INSTALL} && {_reinstall('dsh', 'user')}"
    if hooks and not loading:
        text = f"{hooks_file} holds sagemem's hooks, but no patch layer in {home} loads them"
        findings.append(_problem("dsh", "patch", text, _reinstall("dsh", "user"), hooks_file))
    for layer, rows in loading:
        bridge = next((r for r in rows if r.get("id") == "sagemem-hooks"), None)
        if bridge is None:
            text = f"{layer}: sagemem's entry loads no Claude Code hooks bridge, so dsh runs no sagemem hook"
            findings.append(_problem("dsh", "bridge", text, fix, layer))
        elif not Path(str(bridge.get("name", ""))).is_file():
            text = f"{layer}: the hooks bridge {bridge.get('name')} is gone, so dsh runs no sagemem hook"
            findings.append(_problem("dsh", "bridge", text, fix, layer))
        server = next((r for r in rows if r.get("id") == "sagemem-mcp"), {})
        entry = mcp_entry("dsh", layer, server.get("config"), _reinstall("dsh", "user"))
        findings += [runs.mcp(entry)] if entry else []
    return True, findings + hook_findings(hooks, places, runs)


def _dsh_rows(layer: Path, begin: str, end: str) -> list[dict[str, Any]] | None:
    """The rows of sagemem's marked entry in a patch layer (one JSON object a line), None
    when the layer has none."""
    try:
        text = layer.read_text("utf-8", "replace")
    except OSError:
        return None
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return None
    rows = []
    for line in text[start:stop].splitlines():
        try:
            row = json.loads(line.strip()[2:]) if line.strip().startswith("- {") else None
        except ValueError:
            row = None
        rows += [row] if isinstance(row, dict) else []
    return rows


# -- the memory directory -----------------------------------------------------------------------


def memory_findings(places: Places) -> list[Finding]:
    """The memory directory a hook run here would use: it exists, and its health check."""
    from ..config import locate

    location = locate(env=places.env, cwd=places.cwd)
    folder = location.memory_dir
    if not folder.is_dir():
        text = f"no memory here: a hook would use {folder} ({location.rule}), which does not exist"
        fix = "sagemem init --project (this project's memory) or sagemem init (yours, for everywhere)"
        return [_problem("memory", "memory", text, fix, folder)]
    from ..store import MemoryStore

    try:
        report = MemoryStore.at(location).check()
    except Exception as exc:  # a check that cannot run is reported, not raised
        return [_unknown("memory", "memory", f"{folder}: {type(exc).__name__}: {exc}", folder)]
    files = f"{report.files} memor{'y' if report.files == 1 else 'ies'}"
    if report.ok:
        return [_ok("memory", "memory", f"{folder}: {files}, no problems", folder)]
    problems = f"{report.problems} problem{'s' * (report.problems != 1)}"
    text = f"{folder}: {files}, {problems} found by the health check"
    return [
        _problem("memory", "memory", text, "sagemem check (sagemem check --fix for the safe repairs)", folder)
    ]
