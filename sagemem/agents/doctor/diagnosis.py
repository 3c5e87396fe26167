"""`diagnose`: each harness's checks in turn, then the memory directory, in one `Report`.

A harness counts as set up here when its settings hold a sagemem hook or MCP entry (or a
settings file that cannot be read); when none is, one finding says so. Search paths with
relative entries, which every child doctor starts goes without, are told first.

Every harness with a record (`store/harnesses.py`) is checked: by its own module where it
has gates of its own (`OWN_CHECKS`), else from its record alone (`record_check`).
"""

from __future__ import annotations

from collections.abc import Callable

from ...store.harnesses import HARNESSES, Harness, user_file
from ..install import read_toml
from . import claude, codex, dsh, gemini
from .findings import Finding, Report, info
from .memory_dir import memory_findings
from .places import Places
from .probes import Runs, hook_findings
from .process import search_path_findings
from .settings import McpEntry, collect, mcp_entry, mcp_fix, nested, read_quietly

Check = Callable[[Places, Runs], tuple[bool, list[Finding]]]
# The harnesses with checks of their own: their own gates, or settings read their own way.
OWN_CHECKS: dict[str, Check] = {
    "claude-code": claude.check,
    "codex": codex.check,
    "gemini": gemini.check,
    "dsh": dsh.check,
}


def diagnose(places: Places | None = None) -> Report:
    """Every check, for each harness sagemem is set up in here, then the memory directory."""
    places = places or Places.here()
    runs = Runs(places)
    findings: list[Finding] = search_path_findings(places)
    found_any = False
    for name, record in HARNESSES.items():
        check = OWN_CHECKS.get(name)
        found, results = check(places, runs) if check else record_check(record, places, runs)
        found_any = found_any or found
        findings += results
    if not found_any:
        titles = [record.title for record in HARNESSES.values()]
        named = f"{', '.join(titles[:-1])} or {titles[-1]}" if len(titles) > 1 else titles[0]
        findings.append(
            info(
                "sagemem",
                "installed",
                "no harness runs sagemem here: no sagemem hook or MCP entry in the project or user settings"
                f" of {named} (`sagemem install <harness>` adds them)",
            )
        )
    return Report(tuple(findings + memory_findings(places)))


def record_check(record: Harness, places: Places, runs: Runs) -> tuple[bool, list[Finding]]:
    """A harness's findings from its record alone: the hooks in its settings files, each one
    run, and each MCP entry started; and whether sagemem is set up in it (a settings file
    that cannot be read counts)."""
    files = [
        (scope, places.cwd / path)
        for scope, path in (("project", record.project_settings), ("local", record.local_settings))
        if path
    ]
    files.append(("user", user_file(record, record.user_settings, places.home, places.env)))
    findings, hooks = collect(record.name, files)
    places_of = [("project", record.mcp_project), ("user", record.mcp_user)]
    mcp = [entry for scope, path in places_of if path and (entry := _mcp(record, scope, path, places))]
    if not hooks and not mcp:
        return bool(findings), findings
    findings += hook_findings(hooks, places, runs)
    findings += [runs.mcp(entry) for entry in mcp]
    return True, findings


def _mcp(record: Harness, scope: str, name: str, places: Places) -> McpEntry | None:
    """The sagemem entry in the record's MCP file `name` for `scope` (JSON, or TOML by its
    suffix)."""
    path = places.cwd / name if scope == "project" else user_file(record, name, places.home, places.env)
    data = read_toml(path) if path.suffix == ".toml" else read_quietly(path)
    entry = nested(data, record.mcp_key, "sagemem")
    return mcp_entry(record.name, path, entry, mcp_fix(record.name, scope))
