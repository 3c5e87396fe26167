"""DeepSeek Harness (dsh): sagemem's entry in its patch layers (`cordis.patch.yml`, and one
per profile), which loads the Claude Code hooks bridge and the MCP server, and the hooks file
the bridge reads (`sagemem/hooks.json` in dsh's home, sagemem's alone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .findings import Finding, problem
from .places import Places
from .probes import Runs, hook_findings
from .settings import collect, mcp_entry, reinstall


def check(places: Places, runs: Runs) -> tuple[bool, list[Finding]]:
    """dsh's findings here, and whether sagemem is set up in it (a settings file that
    cannot be read counts)."""
    from .. import dsh

    home = dsh.dsh_home(dict(places.env))
    hooks_file = home / dsh.HOOKS_FILE
    findings, hooks = collect("dsh", [("user", hooks_file)])
    layers = [home / "cordis.patch.yml", *sorted(home.glob("profiles/*/cordis.patch.yml"))]
    loading = [
        (layer, rows) for layer in layers if (rows := _dsh_rows(layer, dsh.BEGIN, dsh.END)) is not None
    ]
    if not hooks and not loading:
        return bool(findings), findings
    fix = f"{dsh.BRIDGE_INSTALL} && {reinstall('dsh', 'user')}"
    if hooks and not loading:
        text = f"{hooks_file} holds sagemem's hooks, but no patch layer in {home} loads them"
        findings.append(problem("dsh", "patch", text, reinstall("dsh", "user"), hooks_file))
    for layer, rows in loading:
        bridge = next((r for r in rows if r.get("id") == "sagemem-hooks"), None)
        if bridge is None:
            text = f"{layer}: sagemem's entry loads no Claude Code hooks bridge, so dsh runs no sagemem hook"
            findings.append(problem("dsh", "bridge", text, fix, layer))
        elif not Path(str(bridge.get("name", ""))).is_file():
            text = f"{layer}: the hooks bridge {bridge.get('name')} is gone, so dsh runs no sagemem hook"
            findings.append(problem("dsh", "bridge", text, fix, layer))
        server = next((r for r in rows if r.get("id") == "sagemem-mcp"), {})
        entry = mcp_entry("dsh", layer, server.get("config"), reinstall("dsh", "user"))
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
