"""Gemini CLI, by the rules of Gemini CLI 0.61: its hooks and MCP entries in the project and
user settings, folder trust (Gemini ignores an untrusted project's settings, hooks and all),
and `hooksConfig`, which turns every hook off, or some by name.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...store.harnesses import HARNESSES, user_file
from .findings import Finding, info, ok, problem
from .places import Places
from .probes import Runs, hook_findings
from .settings import Hook, collect, mcp_entries, mcp_fix, nested, read_quietly

GEMINI = HARNESSES["gemini"]


def check(places: Places, runs: Runs) -> tuple[bool, list[Finding]]:
    """Gemini CLI's findings here, and whether sagemem is set up in it (a settings file that
    cannot be read counts)."""
    project, user = places.cwd / GEMINI.project_settings, _user_settings(places)
    findings, hooks = collect("gemini", [("project", project), ("user", user)])
    mcp = mcp_entries("gemini", [(project, mcp_fix("gemini", "project")), (user, mcp_fix("gemini", "user"))])
    if not hooks and not mcp:
        return bool(findings), findings
    trusted, why = gemini_trust(places)
    if project in {h.path for h in hooks} | {Path(e.where) for e in mcp}:
        findings.append(_gemini_trust(places, trusted, why))
    elif trusted is not True:
        text = f"Gemini does not trust {places.cwd} ({why}): a headless run there stops until it does"
        findings.append(info("gemini", "folder-trust", text))
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
    for path in (_user_settings(places), places.gemini_system):
        value = nested(read_quietly(path), "security", "folderTrust", "enabled")
        enabled = value if isinstance(value, bool) else enabled
    if not enabled:
        return True, "folder trust is off"
    given = places.env.get("GEMINI_CLI_TRUST_WORKSPACE", "").strip().lower()
    if given in ("true", "false"):
        return given == "true", f"GEMINI_CLI_TRUST_WORKSPACE={given}"
    rules_path = places.home / ".gemini" / "trustedFolders.json"
    best: tuple[int, bool, str] | None = None  # the longest rule that covers the folder wins
    for raw, rule in read_quietly(rules_path).items():
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
        return ok("gemini", "folder-trust", text)
    text = f"Gemini does not trust {places.cwd} ({why}): it ignores its .gemini/settings.json, hooks and all"
    if trusted is None:
        rule = f'{json.dumps(str(places.cwd))}: "TRUST_FOLDER"'
        fix = f"start `gemini` there and trust the folder, or add {rule} to {rules}"
    elif why.startswith("GEMINI_CLI_TRUST_WORKSPACE"):
        fix = "unset GEMINI_CLI_TRUST_WORKSPACE (or set it to true)"
    else:
        fix = f"edit {rules}: the rule that says DO_NOT_TRUST"
    return problem("gemini", "folder-trust", text, fix, rules)


def _gemini_switches(places: Places, hooks: list[Hook]) -> list[Finding]:
    """`hooksConfig.enabled: false` turns every hook off; `hooksConfig.disabled` lists the
    ones turned off, by name (else by command). User, project, then system settings."""
    enabled, source, disabled = True, None, {}
    layers = [_user_settings(places), places.cwd / GEMINI.project_settings]
    for path in [*layers, places.gemini_system]:
        config = read_quietly(path).get("hooksConfig")
        if not isinstance(config, dict):
            continue
        if isinstance(config.get("enabled"), bool):
            enabled, source = config["enabled"], path
        names = config.get("disabled")
        names = names if isinstance(names, list) else []
        disabled.update({str(name): path for name in names if str(name) not in disabled})
    if hooks and not enabled:
        text = f"Gemini runs no hooks: hooksConfig.enabled is false in {source}"
        return [
            problem("gemini", "hooks-config", text, f"edit {source}: set hooksConfig.enabled to true", source)
        ]
    findings = []
    for hook in hooks:
        name = str(hook.handler.get("name") or hook.command)
        if name in disabled:
            text = f"{hook.path}: the {hook.event} hook is off: hooksConfig.disabled lists {name!r}"
            text += f" (in {disabled[name]})"
            fix = f"edit {disabled[name]}: take {name!r} out of hooksConfig.disabled"
            findings.append(problem("gemini", "hooks-config", text, fix, disabled[name]))
    return findings


def _user_settings(places: Places) -> Path:
    return user_file(GEMINI, GEMINI.user_settings, places.home, places.env)
