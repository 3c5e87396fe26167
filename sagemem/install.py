"""Adding sagemem's hooks to a harness's settings file, and taking exactly them out again.

`apply` merges one handler per event into the file's `hooks` (event -> matcher groups ->
handlers), leaving every other setting and hook as it was, and does nothing when the handler
is already there. Removal takes out only handlers whose command is a `sagemem ... hook
<harness> <event>` line, and the groups and keys that leaves empty. Before any write the old
file is copied beside it, and the new one is written atomically.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from .errors import SagememError
from .files import write_atomic

# harness -> (project file, user file, {event: (matcher or None, timeout)}, timeout unit)
TARGETS: dict[str, tuple[str, str, dict[str, tuple[str | None, int]]]] = {
    "claude-code": (
        ".claude/settings.json",
        ".claude/settings.json",
        {
            "SessionStart": ("startup|resume|clear|compact", 10),
            "UserPromptSubmit": (None, 10),
            # The write guard on the agent's own file tools.
            "PreToolUse": ("Write|Edit|MultiEdit", 10),
            "PostToolUse": ("Read|Write|Edit|MultiEdit", 10),
        },
    ),
    "codex": (
        ".codex/hooks.json",
        ".codex/hooks.json",
        {"SessionStart": ("startup|resume|clear", 10), "UserPromptSubmit": (None, 10)},
    ),
    # Gemini CLI counts timeouts in milliseconds and names the prompt event BeforeAgent.
    "gemini": (
        ".gemini/settings.json",
        ".gemini/settings.json",
        {"SessionStart": ("*", 10_000), "BeforeAgent": ("*", 10_000)},
    ),
}


def settings_path(harness: str, scope: str, *, cwd: Path | None = None, home: Path | None = None) -> Path:
    project, user, _ = TARGETS[harness]
    return (cwd or Path.cwd()) / project if scope == "project" else (home or Path.home()) / user


def command_for(harness: str, event: str) -> str:
    """The hook's command line: `sagemem` when it is on PATH, else this install's own script."""
    if shutil.which("sagemem"):
        base = "sagemem"
    else:
        script = Path(sys.executable).with_name("sagemem")
        base = str(script) if script.exists() else f"{sys.executable} -m sagemem"
    return f"{base} hook {harness} {event}"


def apply(
    harness: str,
    scope: str,
    *,
    add: bool,
    dry_run: bool = False,
    cwd: Path | None = None,
    home: Path | None = None,
) -> dict[str, Any]:
    path = settings_path(harness, scope, cwd=cwd, home=home)
    original = path.read_bytes() if path.exists() else None
    try:
        data = json.loads(original.decode("utf-8")) if original else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise SagememError(f"{path}: not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise SagememError(f"{path}: expected a JSON object with a `hooks` object; nothing was changed")
    changes = (_add if add else _remove)(data, harness)
    backup = None
    if changes and not dry_run:
        if original is not None:
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            backup = path.with_name(f"{path.name}.sagemem-backup-{stamp}")
            backup.write_bytes(original)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return {
        "path": str(path),
        "changes": changes,
        "backup": str(backup) if backup else None,
        "dry_run": dry_run,
    }


def _add(data: dict[str, Any], harness: str) -> list[str]:
    hooks = data.setdefault("hooks", {})
    changes = []
    for event, (matcher, timeout) in TARGETS[harness][2].items():
        groups = hooks.setdefault(event, [])
        if any(_ours(h, harness, event) for g in groups for h in g.get("hooks", [])):
            continue
        handler: dict[str, Any] = {
            "type": "command",
            "command": command_for(harness, event),
            "timeout": timeout,
        }
        if harness == "gemini":
            handler = {"name": "sagemem", **handler}
        group: dict[str, Any] = {"hooks": [handler]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        groups.append(group)
        changes.append(f"added {event} hook: {handler['command']}")
    return changes


def _remove(data: dict[str, Any], harness: str) -> list[str]:
    hooks = data.get("hooks", {})
    changes = []
    for event in TARGETS[harness][2]:
        groups = hooks.get(event, [])
        for group in groups:
            kept = [h for h in group.get("hooks", []) if not _ours(h, harness, event)]
            if len(kept) != len(group.get("hooks", [])):
                changes.append(f"removed {event} hook")
                group["hooks"] = kept
        groups[:] = [g for g in groups if g.get("hooks")]
        if event in hooks and not hooks[event]:
            del hooks[event]
    if "hooks" in data and not data["hooks"]:
        del data["hooks"]
    return changes


def _ours(handler: Any, harness: str, event: str) -> bool:
    command = str(handler.get("command", "")) if isinstance(handler, dict) else ""
    return "sagemem" in command and command.endswith(f" hook {harness} {event}")
