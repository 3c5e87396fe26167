"""Codex, by the rules of Codex 0.171: its hooks in `hooks.json` in its home and in the
`.codex/` of each folder from the git root down, its MCP entry in `config.toml`, and the
gates at which Codex skips a hook without a word: the `hooks` feature, the project's trust,
and each hook's trust and `enabled`.

Codex's own answer, the listing of `codex app-server`, is used when `codex` is on PATH;
otherwise trust is worked out from `config.toml` with the hash Codex computes. A `codex` that
came with the project (in it, or found through a relative PATH entry) is not run, and then no
fix says to type `codex`: it would run that. Codex is started in the home folder, so that
nothing it looks up from its working directory is the project's (the project goes in the
request).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...store.command import command_line
from ...store.harnesses import HARNESSES, user_file
from ..install import codex_home, read_toml
from .commands import Resolved, resolve
from .findings import Finding, info, ok, problem, unknown
from .places import Places, git_root
from .probes import Runs, hook_findings
from .process import Failed, Session
from .settings import Hook, collect, mcp_entry, mcp_fix, nested

# Codex leaves the matcher of these events out of a hook's identity (it ignores it there).
CODEX_NO_MATCHER = ("UserPromptSubmit", "Stop")
CODEX = HARNESSES["codex"]


def check(places: Places, runs: Runs) -> tuple[bool, list[Finding]]:
    """Codex's findings here, and whether sagemem is set up in it (a settings file that
    cannot be read counts)."""
    config_path = codex_home(places.home, places.env) / "config.toml"  # its MCP entry, its trust
    config = read_toml(config_path)
    root = git_root(places.cwd) or places.cwd
    chain = [places.cwd, *places.cwd.parents]
    folders = reversed(chain[: chain.index(root) + 1])  # Codex reads .codex/ from the root down
    user = user_file(CODEX, CODEX.user_settings, places.home, places.env)
    files = [("user", user), *[("project", f / CODEX.project_settings) for f in folders]]
    findings, hooks = collect("codex", files)
    label = f"{config_path} [mcp_servers.sagemem]"
    mcp = mcp_entry(
        "codex", config_path, nested(config, "mcp_servers", "sagemem"), mcp_fix("codex", "user"), label
    )
    if not hooks and mcp is None:
        return bool(findings), findings
    findings += hook_findings(hooks, places, runs)
    if hooks:
        findings += codex_trust(hooks, places, config, config_path, root)
    if mcp is not None:
        findings.append(runs.mcp(mcp))
    elif config is not None:
        text = f"Codex has no sagemem MCP server (the memory_* tools) in {config_path}"
        findings.append(info("codex", "mcp", text, mcp_fix("codex", "user")))
    return True, _no_project_codex(findings, places)


def _no_project_codex(findings: list[Finding], places: Places) -> list[Finding]:
    """`findings`; when the `codex` here came with the project, with a finding that says so
    and no fix that has the person type `codex` (it would run that)."""
    found, why = codex_here(places)
    if not why:
        return findings
    assert found.path is not None
    text = (
        f"`codex` here runs {found.real}, {why}: typed in this project, `codex` runs that,"
        " not Codex (doctor did not run it)"
    )
    where = f"`{found.entry}`" if found.entry else "the project's folder (an empty entry)"
    again = command_line("doctor")
    gone = f"take the project's `codex` off PATH first (see below), then run `{again}` again"
    kept = [dataclasses.replace(f, fix=gone) if _STARTS_CODEX.search(f.fix) else f for f in findings]
    return [*kept, problem("codex", "path", text, f"take {where} off PATH, or start Codex by its full path")]


_STARTS_CODEX = re.compile(r"(?:^|`)codex\b")  # a fix that has the person type `codex`


def codex_here(places: Places) -> tuple[Resolved, str]:
    """The `codex` on PATH here, and how it came with the project ("" when it did not)."""
    found = resolve("codex", places)
    if found.path is None:
        return found, ""
    if found.reached:
        return found, found.reached
    ways = (Path(os.path.normpath(found.path)), found.real)  # a link in the project is the project's
    return found, "in the project" if any(places.project in (p, *p.parents) for p in ways) else ""


def codex_hash(hook: Hook) -> str:
    """The hash Codex keys a hook's trust on: SHA-256 of the canonical JSON of the event,
    the matcher (where the event keeps one) and the handler."""
    handler = hook.handler
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    seconds = timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else 600
    identity: dict[str, Any] = {"type": "command", "command": hook.command, "timeout": max(1, seconds)}
    identity["async"] = bool(handler.get("async", False))
    for key in ("statusMessage", "additionalContextLimit"):
        if handler.get(key) is not None:
            identity[key] = handler[key]
    whole: dict[str, Any] = {"event_name": _snake(hook.event), "hooks": [identity]}
    if hook.event not in CODEX_NO_MATCHER and hook.matcher is not None:
        whole["matcher"] = hook.matcher
    text = json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def codex_key(hook: Hook) -> str:
    """Where Codex keeps a hook's trust: `[hooks.state."<file>:<event>:<group>:<handler>"]`."""
    return f"{hook.path}:{_snake(hook.event)}:{hook.group}:{hook.index}"


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def codex_trust(
    hooks: list[Hook], places: Places, config: dict[str, Any] | None, config_path: Path, root: Path
) -> list[Finding]:
    """Is the `hooks` feature on, is the project trusted (for its own hooks), is each hook
    trusted and enabled: Codex skips, without a word, a hook that fails any of these."""
    listing, why_not = codex_listing(places)
    if config is None and listing is None:
        text = f"Codex's hook trust: {why_not}, and {config_path} cannot be read here"
        return [unknown("codex", "trust", text, config_path)]
    feature = (
        listing["feature"]
        if listing and listing["feature"] is not None
        else nested(config, "features", "hooks")
    )
    if feature is False:
        text = f"Codex's hooks feature is off (see {config_path}): Codex runs no hooks"
        return [problem("codex", "feature", text, "codex features enable hooks", config_path)]
    findings = []
    project_hooks = [h for h in hooks if h.scope == "project"]
    trust = nested(config, "projects", str(root), "trust_level")
    if config is None and listing:  # Codex lists a project's hooks only when it trusts the project
        listed = {str(h.get("sourcePath")) for h in listing["hooks"].values()}
        trust = "trusted" if any(str(h.path) in listed for h in project_hooks) else None
    if project_hooks and trust != "trusted":
        level = f" (trust_level = {trust!r})" if trust else ""
        text = f"Codex does not trust the project {root}{level}, so it does not load .codex/hooks.json there"
        fix = (
            f"start `codex` in {root} and trust it, or add [projects.{json.dumps(str(root))}]"
            f' trust_level = "trusted" to {config_path}'
        )
        findings.append(problem("codex", "project-trust", text, fix, config_path))
    how = "" if listing else f" (worked out from {config_path} by Codex 0.171's rules: {why_not})"
    state = nested(config, "hooks", "state") or {}
    for hook in hooks:
        if hook.scope == "project" and trust != "trusted":
            continue
        key = codex_key(hook)
        if listing:
            found = listing["hooks"].get(key) or _listed(listing["hooks"].values(), hook)
            status, enabled = (found.get("trustStatus"), found.get("enabled")) if found else (None, None)
        else:
            stored = nested(state, key, "trusted_hash")
            status = "untrusted" if not stored else "trusted" if stored == codex_hash(hook) else "modified"
            enabled = nested(state, key, "enabled")
        findings.append(_codex_hook(hook, status, enabled, key, config_path, how, places))
    return findings


def _listed(listed: Iterable[Any], hook: Hook) -> Any:
    """The listed hook that is this one, where its key spells the path another way."""
    for entry in listed:
        source = entry.get("sourcePath")
        if (
            source
            and entry.get("command") == hook.command
            and _snake(str(entry.get("eventName"))) == _snake(hook.event)
        ):
            try:
                if os.path.samefile(source, hook.path):
                    return entry
            except OSError:
                continue
    return None


def _codex_hook(
    hook: Hook, status: Any, enabled: Any, key: str, config_path: Path, how: str, places: Places
) -> Finding:
    where = f"{hook.path}: the {hook.event} hook"
    review = f"start `codex` in {places.cwd}, type /hooks and trust sagemem's hooks"
    if status in ("trusted", "managed") and enabled is not False:
        return ok("codex", "trust", f"{where} is trusted by Codex{how}", hook.path)
    if status in ("trusted", "managed"):
        table = f"[hooks.state.{json.dumps(key)}]"
        fix = f"turn it on in /hooks (or drop `enabled = false` from {table} in {config_path})"
        return problem("codex", "trust", f"{where} is turned off in Codex's /hooks{how}", fix, hook.path)
    if status == "modified":
        text = f"{where} changed since you trusted it (its command, timeout or place), so Codex skips it{how}"
        return problem("codex", "trust", text, review, hook.path)
    if status == "untrusted":
        text = f"{where} is not trusted yet, so Codex skips it without a word{how}"
        return problem("codex", "trust", text, review, hook.path)
    return unknown("codex", "trust", f"{where}: codex app-server does not list it", hook.path)


def codex_listing(places: Places) -> tuple[dict[str, Any] | None, str]:
    """Codex's own answer, from `codex app-server`: {"hooks": {key: hook}, "feature": the
    `hooks` feature's state or None}; (None, why) when there is none."""
    found, why = codex_here(places)
    if found.path is None:
        return None, "`codex` is not on PATH"
    if why:  # not Codex's answer, and not to be run
        return None, f"`codex` on PATH is {found.real}, {why}: not run"
    try:
        with Session([str(found.path), "app-server"], places, places.timeout, cwd=places.home) as session:
            session.request("initialize", {"clientInfo": {"name": "sagemem-doctor", "version": "1"}})
            session.send({"jsonrpc": "2.0", "method": "initialized"})
            listed = session.request("hooks/list", {"cwds": [str(places.cwd)]})
            try:
                features = session.request("experimentalFeature/list", {})
            except Failed:
                features = None
    except Failed as failed:
        return None, f"codex app-server: {failed}"
    except OSError as exc:
        return None, f"codex app-server could not be started: {exc.strerror or exc}"
    hooks = {
        str(h.get("key")): h
        for entry in nested(listed, "data") or []
        if isinstance(entry, dict)
        for h in entry.get("hooks", [])
        if isinstance(h, dict)
    }
    flags = [f for f in nested(features, "data") or [] if isinstance(f, dict) and f.get("name") == "hooks"]
    return {"hooks": hooks, "feature": flags[0].get("enabled") if flags else None}, ""
