"""The checks that run something: each hook's program resolves, the prompt hook answers a
test event, each MCP entry starts and answers `initialize`. `Runs` does each once per
command line, however many settings files hold it.

The test event has no `session_id`, so the hook runs stateless (no session ledger is
written), with a prompt that asks for nothing. An MCP server gets this environment and, of
its entry's variables, only sagemem's own.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from .commands import hook_words, interpreter, resolve, sagemem_rest, shadowed
from .findings import PROBLEM, Finding, ok, problem, unknown
from .places import Places
from .process import Failed, Session, last_line, run
from .settings import Hook, McpEntry, nested, reinstall

TEST_PROMPT = "sagemem doctor: a test event; nothing to look up"
PROMPT_EVENTS = {
    "claude-code": "UserPromptSubmit",
    "codex": "UserPromptSubmit",
    "gemini": "BeforeAgent",
    "dsh": "UserPromptSubmit",
}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "sagemem-doctor", "version": "1"},
}
MCP_MISSING = ("needs the mcp package", "No module named 'mcp'")


def hook_findings(hooks: list[Hook], places: Places, runs: Runs) -> list[Finding]:
    """Does each hook's program resolve (one line per file and program when it does), and
    does the prompt hook answer a test event."""
    findings: list[Finding] = []
    resolved: dict[tuple[str, Path, str], list[str]] = {}
    for hook in hooks:
        where = f"{hook.path}: the {hook.event} hook"
        mine = hook.ours and hook.scope in ("project", "user")
        fix = reinstall(hook.harness, hook.scope) if mine else f"edit {hook.path}: hooks.{hook.event}"
        words = hook_words(hook)
        if words is None:
            text = (
                f"{where} was not run: `{hook.command}` is not a line sagemem writes (doctor runs only those)"
            )
            findings.append(unknown(hook.harness, "hook", text, hook.path))
            continue
        own = shadowed(words, places)
        if own is not None:
            text = (
                f"{where} runs `python -m sagemem` in a project that has its own {own}: the harness "
                "would import that instead of sagemem (doctor does not run it)"
            )
            findings.append(problem(hook.harness, "hook", text, fix, hook.path))
            continue
        found = resolve(words[0], places)
        if found.path is None:
            text = f"{where} runs {found.program}, which {found.problem}: the harness gets no memory"
            findings.append(problem(hook.harness, "hook", text, fix, hook.path))
            continue
        if found.venv:
            text = (
                f"{where} runs `{found.program}`, found only because the virtual environment {found.venv}"
                " is active in this shell: a harness started from another shell gets no memory"
            )
            how = f"{fix} (run in this environment, it writes the absolute path)" if mine else fix
            findings.append(problem(hook.harness, "hook", text, how, hook.path))
        else:
            resolved.setdefault((hook.harness, hook.path, str(found.path)), []).append(hook.event)
        if hook.event == PROMPT_EVENTS[hook.harness]:
            findings.append(runs.hook(hook))
    fine = [
        ok(
            harness,
            "hook",
            f"{path}: the {', '.join(events)} hook{'s run' if len(events) > 1 else ' runs'} {program}",
            path,
        )
        for (harness, path, program), events in resolved.items()
    ]
    return fine + findings


class Runs:
    """Hook runs and MCP starts, each done once per command line."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self._done: dict[tuple[str, ...], Finding] = {}

    def hook(self, hook: Hook) -> Finding:
        # The timeout is part of the run (a slower limit can pass where a shorter one fails).
        key = ("hook", hook.command, hook.event, str(_hook_seconds(hook)))
        if key not in self._done:
            self._done[key] = _test_hook(hook, self.places)
        done = self._done[key]
        where = f"{hook.path}: the {hook.event} hook"
        return Finding(
            hook.harness, done.check, done.status, f"{where} {done.message}", done.fix, str(hook.path)
        )

    def mcp(self, entry: McpEntry) -> Finding:
        # Its SAGEMEM_* variables choose the memory it serves, so they are part of the run.
        key = (
            "mcp",
            entry.command,
            *entry.args,
            *sorted(f"{k}={v}" for k, v in entry.env.items() if k.startswith("SAGEMEM_")),
        )
        if key not in self._done:
            self._done[key] = _test_mcp(entry, self.places)
        done = self._done[key]
        message = f"{entry.label}: the sagemem MCP server {done.message}"
        fix = done.fix or (entry.fix if done.status == PROBLEM else "")
        return Finding(entry.harness, done.check, done.status, message, fix, entry.where)


def _shell(line: str) -> list[str]:
    """How harnesses run a hook's command line."""
    if os.name == "nt":
        return [os.environ.get("COMSPEC", "cmd.exe"), "/d", "/s", "/c", line]
    return ["/bin/sh", "-c", line]


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
        return unknown(hook.harness, "hook-run", f"could not be run: {ran.error}")
    if ran.timed_out:
        waits = f" (the harness waits {own:g} s)" if own is not None and own <= limit else ""
        return problem(
            hook.harness, "hook-run", f"did not answer a test event within {limit:g} s{waits}", by_hand
        )
    if ran.code != 0:
        said = last_line(ran.stderr) or last_line(ran.stdout)
        text = f"exited with {ran.code} on a test event" + (f": {said}" if said else "")
        return problem(hook.harness, "hook-run", text, by_hand)
    text = ran.stdout.decode("utf-8", "replace").strip()
    try:
        valid = not text or isinstance(json.loads(text), dict)
    except ValueError:
        valid = False
    if not valid:
        said = f"printed what is not one JSON object on a test event (the harness drops it): {text[:80]!r}"
        return problem(hook.harness, "hook-run", said, by_hand)
    return ok(hook.harness, "hook-run", "answers a test event")


def _test_mcp(entry: McpEntry, places: Places) -> Finding:
    """Start the server as the harness would (no shell) and do an MCP `initialize`. The
    message follows the server's name."""
    argv = [entry.command, *entry.args]
    if sagemem_rest(argv) != ["mcp"]:
        text = (
            f"was not started: `{shlex.join(argv)}` is not an entry sagemem writes (doctor starts only those)"
        )
        return unknown(entry.harness, "mcp", text)
    own = shadowed(argv, places)
    if own is not None:
        text = f"runs `python -m sagemem` in a project that has its own {own}, which would run instead"
        return problem(entry.harness, "mcp", text, "")
    found = resolve(entry.command, places)
    if found.path is None:
        return problem(entry.harness, "mcp", f"runs {entry.command}, which {found.problem}", "")
    # Only sagemem's own variables from the entry: a cloned project's entry could set others
    # (PYTHONPATH, LD_PRELOAD) that run code of its own.
    env = {**places.env, **{k: v for k, v in entry.env.items() if k.startswith("SAGEMEM_")}}
    by_hand = f"run it by hand to see why: {shlex.join(argv)}"
    try:
        with Session([str(found.path), *entry.args], places, places.timeout, env) as session:
            try:
                result = session.request("initialize", INITIALIZE)
            except Failed as failed:
                said = f"{failed} {session.stderr.decode('utf-8', 'replace')}"
                if any(marker in said for marker in MCP_MISSING):
                    python = interpreter(found.path, places.env.get("PATH"))
                    text = f"does not start: the mcp package is missing from {python}"
                    return problem(
                        entry.harness, "mcp", text, f"{shlex.quote(python)} -m pip install 'sagemem[mcp]'"
                    )
                if "memory directory does not exist" in said:  # the memory finding says which
                    fix = "sagemem init --project (this project's memory) or sagemem init (yours)"
                    return problem(entry.harness, "mcp", f"does not start: {failed}", fix)
                return problem(entry.harness, "mcp", f"does not answer: {failed}", by_hand)
    except OSError as exc:
        return unknown(entry.harness, "mcp", f"could not be started: {exc.strerror or exc}")
    server = " ".join(str(nested(result, "serverInfo", k) or "") for k in ("name", "version")).strip()
    name = f" ({server})" if server else ""
    return ok(entry.harness, "mcp", f"starts and answers initialize{name}")
