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
    """Install (`add`) or uninstall sagemem's hooks, and its MCP server entry where the
    harness keeps it in a JSON file; `todo` is the command left for the person to run."""
    path = settings_path(harness, scope, cwd=cwd, home=home)

    def hooks(data: dict[str, Any]) -> list[str]:
        changes = (_add if add else _remove)(data, harness)
        if harness == "gemini":  # Gemini keeps its MCP servers in the same settings file
            changes += _mcp(data, add)
        return changes

    files = [(path, hooks)]
    todo = None
    if harness == "claude-code" and scope == "project":
        files.append(((cwd or Path.cwd()) / ".mcp.json", lambda data: _mcp(data, add)))
    elif harness == "claude-code":
        todo = (
            "claude mcp add --scope user sagemem -- sagemem mcp"
            if add
            else "claude mcp remove --scope user sagemem"
        )
    elif harness == "codex":
        todo = "codex mcp add sagemem -- sagemem mcp" if add else "codex mcp remove sagemem"
    changes: list[str] = []
    backups: list[str] = []
    for target, change in files:
        done, backup = _edit_json(target, change, dry_run)
        changes += [f"{target.name}: {line}" for line in done]
        backups += [backup] if backup else []
    return {
        "path": str(path),
        "changes": changes,
        "backup": backups[0] if backups else None,
        "backups": backups,
        "todo": todo,
        "dry_run": dry_run,
    }


def _edit_json(path: Path, change: Any, dry_run: bool) -> tuple[list[str], str | None]:
    """Apply `change` to the JSON object in `path`; write it (after a backup) if it changed."""
    path = path.resolve() if path.is_symlink() else path  # a dotfiles link stays a link
    original = path.read_bytes() if path.exists() else None
    try:
        data = json.loads(original.decode("utf-8")) if original else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise SagememError(f"{path}: not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k, {}), dict) for k in ("hooks", "mcpServers")
    ):
        raise SagememError(
            f"{path}: expected a JSON object (with `hooks`/`mcpServers` objects); nothing was changed"
        )
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups
        ):
            raise SagememError(
                f"{path}: hooks.{event} must be a list of {{matcher, hooks: [...]}} groups;"
                " nothing was changed"
            )
    changes = change(data)
    backup = None
    if changes and not dry_run:
        if original is not None:
            backup = backup_beside(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return changes, str(backup) if backup else None


def backup_beside(path: Path) -> Path:
    """A copy of `path` next to it, with the same bytes and permissions, named by the time."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    copy = path.with_name(f"{path.name}.sagemem-backup-{stamp}")
    shutil.copy2(path, copy)
    return copy


def _mcp(data: dict[str, Any], add: bool) -> list[str]:
    """The `sagemem` entry of `mcpServers`: added if missing, removed only if it is ours."""
    servers = data.get("mcpServers", {})
    entry = servers.get("sagemem")
    # Ours in either form `add` writes: `<.../sagemem> mcp` or `<python> -m sagemem mcp`.
    ours = isinstance(entry, dict) and (
        (entry.get("args") == ["mcp"] and "sagemem" in str(entry.get("command", "")))
        or entry.get("args") == ["-m", "sagemem", "mcp"]
    )
    if add and entry is None:
        base = command_for("x", "y").removesuffix(" hook x y")
        command, *prefix = base.split(" -m ") if " -m " in base else [base]
        args = ["-m", "sagemem", "mcp"] if prefix else ["mcp"]
        data.setdefault("mcpServers", {})["sagemem"] = {"command": command, "args": args}
        return ["added MCP server sagemem"]
    if not add and ours:
        del servers["sagemem"]
        if not servers:
            data.pop("mcpServers", None)
        return ["removed MCP server sagemem"]
    return []


def _add(data: dict[str, Any], harness: str) -> list[str]:
    hooks = data.setdefault("hooks", {})
    changes = []
    for event, (matcher, timeout) in TARGETS[harness][2].items():
        groups = hooks.setdefault(event, [])
        if any(_ours(g, h, harness, event) for g in groups for h in g.get("hooks", [])):
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
            kept = [h for h in group.get("hooks", []) if not _ours(group, h, harness, event)]
            if len(kept) != len(group.get("hooks", [])):
                changes.append(f"removed {event} hook")
                group["hooks"] = kept
        groups[:] = [g for g in groups if g.get("hooks")]
        if event in hooks and not hooks[event]:
            del hooks[event]
    if "hooks" in data and not data["hooks"]:
        del data["hooks"]
    return changes


def _ours(group: Any, handler: Any, harness: str, event: str) -> bool:
    """A handler `add` wrote: our command line, in a group with our matcher. A user's own
    `sagemem hook ...` line under another matcher is theirs, to keep."""
    if not isinstance(group, dict) or not isinstance(handler, dict):
        return False
    command = str(handler.get("command", ""))
    matcher = TARGETS[harness][2][event][0]
    return (
        group.get("matcher") == matcher
        and "sagemem" in command
        and command.endswith(f" hook {harness} {event}")
    )
