"""The checks that run something: each hook's program resolves, the prompt hook answers a
test event, each MCP entry starts and answers `initialize`. `Runs` does each once per
command line, however many settings files hold it.

Only this sagemem is run (`commands.verdict`). A line whose program is another one is named
with what it resolves to and not run: a problem when that program came with the project (the
harness would run it), "could not check" when it is another installation elsewhere (it may
well work; doctor cannot tell). No fix names a program doctor did not run: a fix is what a
person copies, and the other program may be a stranger's.

The test event has no `session_id`, so the hook runs stateless (no session ledger is
written), with a prompt that asks for nothing. An MCP server gets this environment and, of
its entry's variables, only sagemem's own.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ...store.command import is_portable
from ...store.harnesses import HARNESSES
from .commands import (
    Resolved,
    Verdict,
    hook_words,
    portable_program,
    resolve,
    sagemem_rest,
    shadowed,
    verdict,
)
from .findings import PROBLEM, Finding, ok, problem, unknown
from .places import Places
from .process import Failed, Session, last_line, run
from .settings import Hook, McpEntry, nested, reinstall

TEST_PROMPT = "sagemem doctor: a test event; nothing to look up"
# Each harness's prompt event, the one doctor runs (from its record; the older form).
PROMPT_EVENTS = {name: harness.prompt_event for name, harness in HARNESSES.items()}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "sagemem-doctor", "version": "1"},
}


def hook_findings(hooks: list[Hook], places: Places, runs: Runs) -> list[Finding]:
    """Does each hook's program resolve (one line per file and program when it does), is it
    this sagemem, and does the prompt hook answer a test event."""
    findings: list[Finding] = []
    resolved: dict[tuple[str, Path, str], list[str]] = {}
    declined: dict[tuple[str, Path, Verdict, str], list[str]] = {}
    for hook in hooks:
        where = f"{hook.path}: the {hook.event} hook"
        mine = hook.ours and hook.scope in ("project", "user")
        fix = reinstall(hook.harness, hook.scope) if mine else f"edit {hook.path}: hooks.{hook.event}"
        words = hook_words(hook, places.home)
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
        chosen = verdict(words, found, places)
        if not chosen.argv:
            declined.setdefault((hook.harness, hook.path, chosen, fix), []).append(hook.event)
            continue
        if found.venv:
            text = (
                f"{where} runs `{found.program}`, found only because the virtual environment {found.venv}"
                " is active in this shell: a harness started from another shell gets no memory"
            )
            how = f"{fix} (run in this environment, it writes the absolute path)" if mine else fix
            findings.append(problem(hook.harness, "hook", text, how, hook.path))
        else:
            resolved.setdefault((hook.harness, hook.path, _runs(found, chosen.argv)), []).append(hook.event)
        if hook.event == HARNESSES[hook.harness].prompt_event:
            findings.append(runs.hook(hook, chosen.argv))
    fine = [
        ok(
            harness,
            "hook",
            f"{path}: the {_events(events)} {'run' if len(events) > 1 else 'runs'} {program}",
            path,
        )
        for (harness, path, program), events in resolved.items()
    ]
    refused = [
        _declined(
            harness,
            "hook",
            f"{path}: the {_events(events)} {'were' if len(events) > 1 else 'was'} not run",
            chosen,
            fix,
            path,
        )
        for (harness, path, chosen, fix), events in declined.items()
    ]
    return fine + refused + findings


def _events(events: list[str]) -> str:
    return f"{', '.join(events)} hook{'s' * (len(events) > 1)}"


def _runs(found: Resolved, argv: tuple[str, ...]) -> str:
    """The program a hook runs, as its line names it, and the one doctor ran for it where
    that is spelled otherwise (a link to this sagemem's script)."""
    return found.shown if argv[0] == found.shown else f"{found.shown} (this sagemem: {argv[0]})"


def _declined(area: str, check: str, what: str, chosen: Verdict, fix: str, where: object) -> Finding:
    """What was not run and why: a problem when the program came with the project (the
    harness would run it), else "could not check", saying how to tell whose it is; `fix`
    points the entry at this sagemem."""
    text = f"{what}: {chosen.why}"
    if chosen.from_project:
        return problem(area, check, f"{text}; the harness would run it", fix, where)
    leads = f"; {chosen.leads}" if chosen.leads else ""
    how = (
        "doctor runs only itself: if that program is an installation you made (its place and first"
        " line, above, say whose it is), check it with its own doctor; if not, do not run it"
        + (f"; to use this sagemem instead: {fix}" if fix else "")
    )
    return unknown(area, check, f"{text}, so it was not checked{leads}", where, fix=how)


class Runs:
    """Hook runs and MCP starts, each done once per command line."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self._done: dict[tuple[str, ...], Finding] = {}

    def hook(self, hook: Hook, argv: tuple[str, ...]) -> Finding:
        """Run `argv`, this sagemem's own command for the hook's line, as the hook."""
        # The timeout is part of the run (a slower limit can pass where a shorter one fails).
        key = ("hook", *argv, hook.event, str(_hook_seconds(hook)))
        if key not in self._done:
            self._done[key] = _test_hook(hook, argv, self.places)
        done = self._done[key]
        where = f"{hook.path}: the {hook.event} hook"
        return Finding(
            hook.harness, done.check, done.status, f"{where} {done.message}", done.fix, str(hook.path)
        )

    def mcp(self, entry: McpEntry) -> Finding:
        chosen = _mcp_argv(entry, self.places)
        if isinstance(chosen, Finding):  # not started
            done = chosen
        else:
            # Its SAGEMEM_* variables choose the memory it serves, so they are part of the run.
            key = (
                "mcp",
                *chosen,
                *sorted(f"{k}={v}" for k, v in entry.env.items() if k.startswith("SAGEMEM_")),
            )
            if key not in self._done:
                self._done[key] = _test_mcp(entry, chosen, self.places)
            done = self._done[key]
        message = f"{entry.label}: the sagemem MCP server {done.message}"
        fix = done.fix or (entry.fix if done.status == PROBLEM else "")
        return Finding(entry.harness, done.check, done.status, message, fix, entry.where)


def _hook_seconds(hook: Hook) -> float | None:
    timeout = hook.handler.get("timeout", hook.handler.get("timeoutSec"))
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        return None
    return timeout / 1000 if HARNESSES[hook.harness].timeout_ms else float(timeout)


def _test_hook(hook: Hook, argv: tuple[str, ...], places: Places) -> Finding:
    """Run the hook (`argv`: its line's words, with this sagemem's own program; no shell is
    needed, as the line is plain words) in the project with a test prompt event: it passes
    when it exits 0 and prints nothing or one JSON object. The message follows the hook's
    name."""
    data = json.dumps({"hook_event_name": hook.event, "cwd": str(places.cwd), "prompt": TEST_PROMPT})
    own = _hook_seconds(hook)
    limit = min(own or places.hook_timeout, places.hook_timeout)
    ran = run(list(argv), data.encode("utf-8"), places, limit)
    # What doctor ran: this sagemem's own program (the line may reach it by a link the project can change).
    by_hand = f"run it by hand to see why: printf '%s' {shlex.quote(data)} | {shlex.join(argv)}"
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


def _mcp_argv(entry: McpEntry, places: Places) -> tuple[str, ...] | Finding:
    """What doctor starts for the entry (this sagemem's own program with its arguments), or
    the finding that says why nothing is started. The message follows the server's name."""
    argv = [entry.command, *entry.args]
    if (
        entry.command == "sh"
        and len(entry.args) == 2
        and entry.args[0] == "-c"
        and is_portable(entry.args[1], "mcp")
    ):
        argv = [portable_program(places.home), "mcp"]
    if sagemem_rest(argv) != ["mcp"]:
        text = (
            f"was not started: `{shlex.join(argv)}` is not an entry sagemem writes (doctor starts only those)"
        )
        return unknown(entry.harness, "mcp", text)
    own = shadowed(argv, places)
    if own is not None:
        text = f"runs `python -m sagemem` in a project that has its own {own}, which would run instead"
        return problem(entry.harness, "mcp", text, "")
    found = resolve(argv[0], places)
    if found.path is None:
        return problem(entry.harness, "mcp", f"runs {argv[0]}, which {found.problem}", entry.fix)
    chosen = verdict(argv, found, places)
    if not chosen.argv:
        return _declined(entry.harness, "mcp", "was not started", chosen, entry.fix, "")
    return chosen.argv


def _test_mcp(entry: McpEntry, argv: tuple[str, ...], places: Places) -> Finding:
    """Start `argv`, this sagemem's server for the entry, as the harness would (no shell),
    and do an MCP `initialize`. The message follows the server's name."""
    # Only sagemem's own variables from the entry: a cloned project's entry could set others
    # (PYTHONPATH, LD_PRELOAD) that run code of its own.
    env = {**places.env, **{k: v for k, v in entry.env.items() if k.startswith("SAGEMEM_")}}
    by_hand = f"run it by hand to see why: {shlex.join(argv)}"
    try:
        with Session(list(argv), places, places.timeout, env) as session:
            try:
                result = session.request("initialize", INITIALIZE)
            except Failed as failed:
                return problem(entry.harness, "mcp", f"does not answer: {failed}", by_hand)
    except OSError as exc:
        return unknown(entry.harness, "mcp", f"could not be started: {exc.strerror or exc}")
    server = " ".join(str(nested(result, "serverInfo", k) or "") for k in ("name", "version")).strip()
    name = f" ({server})" if server else ""
    return ok(entry.harness, "mcp", f"starts and answers initialize{name}")
