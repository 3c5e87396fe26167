"""Claude Code, by the rules of Claude Code 2.1: its hooks in the user, project and local
settings, its MCP entries in `.mcp.json` and `~/.claude.json`, the switches that keep hooks
from running (`disableAllHooks`, a managed `allowManagedHooksOnly`), the trust dialog, and
Claude Code's own auto memory with the folder it writes to.
"""

from __future__ import annotations

from pathlib import Path

from ...store.harnesses import HARNESSES, user_file
from ...store.native import claude_auto_memory as native_auto_memory
from ...store.native import claude_slug, git_main_root
from ..install import claude_dir, claude_json
from .findings import Finding, info, problem
from .places import Places
from .probes import Runs, hook_findings
from .settings import collect, mcp_entries, mcp_fix, nested, read_quietly

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
CLAUDE = HARNESSES["claude-code"]


def check(places: Places, runs: Runs) -> tuple[bool, list[Finding]]:
    """Claude Code's findings here, and whether sagemem is set up in it (a settings file that
    cannot be read counts)."""
    user = user_file(CLAUDE, CLAUDE.user_settings, places.home, places.env)
    project, local = places.cwd / CLAUDE.project_settings, places.cwd / CLAUDE.local_settings
    findings, hooks = collect("claude-code", [("project", project), ("local", local), ("user", user)])
    state = claude_json(places.home, places.env)
    mcp = mcp_entries(
        "claude-code",
        [
            (places.cwd / ".mcp.json", mcp_fix("claude-code", "project")),
            (state, mcp_fix("claude-code", "user")),
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
        fix = mcp_fix("claude-code", "user").split(" && ")[-1]  # nothing to remove first
        findings.append(info("claude-code", "mcp", text, fix))
    findings.append(claude_auto_memory(places))
    return True, findings


def _claude_layers(places: Places, *, project: bool = True) -> list[Path]:
    """Claude Code's settings files, the later winning: user, project, local, managed."""
    user = user_file(CLAUDE, CLAUDE.user_settings, places.home, places.env)
    own = [places.cwd / CLAUDE.project_settings] if project else []
    return [user, *own, places.cwd / CLAUDE.local_settings, places.claude_policy]


def _claude_switches(places: Places) -> list[Finding]:
    """`disableAllHooks` in the merged settings, and the managed policy's
    `allowManagedHooksOnly`: either keeps sagemem's hooks from running."""
    policy = places.claude_policy
    if read_quietly(policy).get("allowManagedHooksOnly") is True:
        text = (
            f"Claude Code runs only managed hooks, not sagemem's: allowManagedHooksOnly is true in {policy}"
        )
        return [problem("claude-code", "hooks-disabled", text, f"ask whoever manages {policy}", policy)]
    disabled, source = False, None
    for path in _claude_layers(places):
        value = read_quietly(path).get("disableAllHooks")
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
    return [problem("claude-code", "hooks-disabled", text, fix, source)]


def _claude_trust(places: Places, state: Path) -> Finding:
    projects = nested(read_quietly(state), "projects") or {}
    for folder in (places.cwd, *places.cwd.parents):
        if nested(projects, str(folder), "hasTrustDialogAccepted") is True:
            return info(
                "claude-code", "workspace-trust", f"Claude Code's trust dialog was accepted for {folder}"
            )
    return info(
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
    return info("claude-code", "auto-memory", text)


def _auto_memory_on(places: Places) -> tuple[bool, str]:
    """The rule the hooks and `path` use (`native.claude_auto_memory`), with doctor's places."""
    return native_auto_memory(places.cwd, places.home, places.env, policy=places.claude_policy)


def claude_memory_dir(places: Places) -> Path:
    """`autoMemoryDirectory` (Claude Code ignores it in the project's own settings), else
    `<Claude's folder>/projects/<slug of the project root>/memory`."""
    chosen = None
    for path in _claude_layers(places, project=False):
        value = read_quietly(path).get("autoMemoryDirectory")
        if isinstance(value, str) and (value.startswith(("~/", "~\\")) or Path(value).is_absolute()):
            chosen = value
    if chosen is not None:
        return places.home / chosen[2:] if chosen.startswith("~") else Path(chosen)
    root = git_main_root(places.cwd) or places.cwd
    return claude_dir(places.home, places.env) / "projects" / claude_slug(str(root)) / "memory"
