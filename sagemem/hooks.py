"""Harness hooks: `sagemem hook <harness> [event]`, with the event's JSON on stdin.

The contract, for every harness and every input: exit 0, print nothing or exactly one JSON
object, never block or erase the user's prompt. Any failure (bad JSON, no memory dir,
unreadable files, a bug) prints nothing and adds one line to `<state>/hook.log` (or the
user's cache dir): a memory tool must never disrupt the agent's session.

The output is the shape Claude Code, Codex, Gemini CLI and DeepSeek Harness all read:
`{"hookSpecificOutput": {"hookEventName": <the firing event>, "additionalContext": ...}}`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HARNESSES = ("claude-code", "codex", "gemini")
PROMPT_EVENTS = ("UserPromptSubmit", "BeforeAgent")
START_EVENTS = ("SessionStart",)
# Claude Code and Codex deliver up to 10,000 characters of context whole; stay under that.
MAX_CONTEXT_BYTES = 9000
HOOK_LOG = "hook.log"
_ALIASES = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "before-agent": "BeforeAgent",
}
# What every injection starts with: a prompt that carries it is sagemem's own text coming
# back (a harness re-firing the prompt event with injected context), not a user's question.
OWN_MARKERS = ("(sagemem, from ", "（sagemem，来自 ")


def main(argv: list[str], *, memory_dir: str | None = None, state_dir: str | None = None) -> int:
    """Run one hook: read stdin, write the harness's JSON (or nothing) to stdout, exit 0."""
    harness = argv[0] if argv else ""
    event = argv[1] if len(argv) > 1 else None
    try:
        raw = sys.stdin.read()
    except (OSError, UnicodeDecodeError):
        raw = ""
    output = handle(harness, event, raw, memory_dir=memory_dir, state_dir=state_dir)
    if output is not None:
        sys.stdout.write(json.dumps(output, ensure_ascii=False))
        sys.stdout.flush()
    return 0


def handle(
    harness: str,
    event: str | None,
    raw: str,
    *,
    memory_dir: str | None = None,
    state_dir: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The hook's output for one event, or None for "say nothing". Never raises."""
    state: Path | None = None
    try:
        data = json.loads(raw) if raw.strip() else {}
        if not isinstance(data, dict):
            raise ValueError("the event is not a JSON object")
        fired = str(data.get("hook_event_name") or _ALIASES.get(event or "", event or ""))
        if harness not in HARNESSES:
            raise ValueError(f"unknown harness {harness!r} (one of {', '.join(HARNESSES)})")
        if fired not in PROMPT_EVENTS + START_EVENTS:
            return None
        from .config import load_settings, locate
        from .inject import inject

        cwd = Path(str(data.get("cwd") or os.getcwd()))
        location = locate(memory_dir, state_dir, env=env, cwd=cwd)
        state = location.state_dir
        if not location.memory_dir.is_dir():
            return None  # no memory here: nothing to say, nothing wrong
        session = str(data["session_id"]) if data.get("session_id") else None
        if fired in START_EVENTS:
            query, reset = "", str(data.get("source", "")) in ("compact", "clear")
        else:
            query, reset = str(data.get("prompt") or ""), False
            if any(marker in query for marker in OWN_MARKERS):
                return None
        settings = load_settings(location.state_dir, env)
        injection = inject(
            location.memory_dir,
            location.state_dir,
            query,
            settings,
            session=session,
            reset=reset,
            max_bytes=MAX_CONTEXT_BYTES,
        )
        if not injection.text:
            return None
        return {"hookSpecificOutput": {"hookEventName": fired, "additionalContext": injection.text}}
    except Exception as exc:  # fail open: whatever happened, the agent's prompt goes on untouched
        _log(state, f"{harness} {event or ''}: {type(exc).__name__}: {exc}")
        return None


def _log(state: Path | None, message: str) -> None:
    try:
        from .config import locate
        from .log import log_once

        log_once(state or locate().state_dir, message, HOOK_LOG, once=False)
    except Exception:  # noqa: S110 - the log is the last resort; nothing is left to tell
        pass
