"""sagemem's entries in a harness's settings files: its hooks (`Hook`, found by `hooks_in`)
and its MCP servers (`McpEntry`), and the command that writes each one again.

Settings are read only from a regular file and up to a size cap: `~/.claude.json` keeps
every project's history, and a cloned project's settings may link to a FIFO or a device. A
missing file holds nothing; one that cannot be read, or is not a JSON object, is a problem
that names the file. `read_quietly` is for the files a check only consults: there an
unreadable file counts as empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...store.harnesses import HARNESSES, mcp_place
from .findings import Finding, problem

MAX_SETTINGS_BYTES = 64 * 1024 * 1024  # ~/.claude.json keeps every project's history


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

        record = HARNESSES[self.harness]
        if record.installer:  # its hooks file is sagemem's alone
            return True
        group = {} if self.matcher is None else {"matcher": self.matcher}
        return any(e.name == self.event for e in record.events) and own_handler(
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


def read_quietly(path: Path) -> dict[str, Any]:
    """The settings in `path`, {} when there are none or they cannot be read."""
    return read_settings(path)[0] or {}


def nested(data: Any, *keys: str) -> Any:
    """`data[k1][k2]...`, None where a level is missing or not an object."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def hooks_in(harness: str, scope: str, path: Path, data: Mapping[str, Any]) -> list[Hook]:
    """The command handlers in `data["hooks"]` that run `sagemem ... hook <harness> ...`."""
    found = []
    pattern = _hook_pattern()
    events = data.get("hooks")
    for event, groups in events.items() if isinstance(events, dict) else []:
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str) and "sagemem" in command and pattern.search(command):
                    found.append(Hook(harness, scope, path, event, g, h, group.get("matcher"), handler))
    return found


def _hook_pattern() -> re.Pattern[str]:
    """`hook <harness>` for any harness with a record."""
    return re.compile(rf"\bhook (?:{'|'.join(map(re.escape, HARNESSES))})\b")


def collect(harness: str, files: Iterable[tuple[str, Path]]) -> tuple[list[Finding], list[Hook]]:
    """The sagemem hooks in each settings file (each file once), and a problem for each file
    that cannot be read."""
    findings, hooks, seen = [], [], set()
    for scope, path in files:
        if path in seen:
            continue
        seen.add(path)
        data, why = read_settings(path)
        if why:
            findings.append(problem(harness, "settings", f"{path}: {why}", f"edit {path}", path))
        hooks += hooks_in(harness, scope, path, data or {})
    return findings, hooks


def reinstall(harness: str, scope: str) -> str:
    """The `sagemem install` line that writes the harness's entries in `scope` again (the user
    scope named where it is not the harness's default)."""
    from ...store.command import command_line

    named = scope == "user" and HARNESSES[harness].scopes[0] != "user"
    return command_line("install", harness, *(["--scope", "user"] if named else []))


@dataclass(frozen=True)
class McpEntry:
    """One sagemem MCP server in a harness's settings: how the harness starts it."""

    harness: str
    label: str  # where it is: a file, or a file and a table
    where: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    fix: str  # what puts it right when its program is gone


def mcp_entry(harness: str, path: Path, entry: Any, fix: str, label: str = "") -> McpEntry | None:
    """`entry` from the settings in `path`, None when it is not an object with a command."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return None
    args, env = entry.get("args"), entry.get("env")
    args = args if isinstance(args, list) else []
    env = env if isinstance(env, dict) else {}
    variables = {str(k): str(v) for k, v in env.items()}
    return McpEntry(
        harness, label or str(path), str(path), entry["command"], tuple(map(str, args)), variables, fix
    )


def mcp_entries(harness: str, files: list[tuple[Path, str]]) -> list[McpEntry]:
    """The `mcpServers.sagemem` entries of JSON settings files, with each one's fix."""
    found = []
    for path, fix in files:
        entry = mcp_entry(harness, path, nested(read_quietly(path), "mcpServers", "sagemem"), fix)
        found += [entry] if entry else []
    return found


def mcp_fix(harness: str, scope: str) -> str:
    """What writes the harness's sagemem MCP entry in `scope` again: the harness's own `mcp
    add` where that writes it (Codex's entry, Claude Code's user entry), else `sagemem
    install`."""
    from ..install import mcp_add_line

    record = HARNESSES[harness]
    place = mcp_place(record, scope)
    if place is None or place[1]:  # none, or `install` writes it
        return reinstall(harness, scope)
    return mcp_add_line(record, replacing=True)
