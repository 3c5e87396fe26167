"""The harnesses sagemem plugs into, one record each (`Harness`, in `HARNESSES`).

A record says where the harness keeps its hooks settings (in the home folder, where a
variable of its own may move its folder; in a project; the project's file for this machine
alone), which hooks `install` writes, the shape of the hook's answer, where its MCP entry
lives, how it trusts a hook, and whether its model gets the saving rules. The hook,
`install`, `doctor`, the CLI's choices and the auto-memory rules read them here, so a harness
these fields describe is one record. What a record cannot say is code of its own, which it
names: an installer (`agents/dsh.py`), doctor's checks (`agents/doctor/`), a memory folder of
its own (`native.py`). In the store, so that every part may import it; records, not
dataclasses, since the hook reads it on every event.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .records import Record


class HookEvent(Record):
    """One hook `install` writes: the event, its group's matcher (None: the group has none),
    and the timeout, in the harness's unit."""

    name: str
    matcher: str | None
    timeout: int


class Harness(Record):
    """One harness, as data. A user file is named from the home folder (`user_file`), a
    project file from the project's folder."""

    name: str  # `sagemem hook <name>`, `sagemem install <name>`
    title: str  # its name in a sentence
    prompt_event: str  # what it fires before its model reads a prompt
    events: tuple[HookEvent, ...]  # the hooks `install` writes, in order
    user_settings: str  # the hooks file in the home folder
    project_settings: str = ""  # the hooks file in a project ("": it reads none)
    local_settings: str = ""  # the project's settings for this machine alone, not committed
    home_dir: str = ""  # its own folder in the home folder
    home_env: str = ""  # the variable that moves it (for a file outside it, the home folder)
    scopes: tuple[str, ...] = ("project", "user")  # where `install` writes, its default first
    handler_name: str = ""  # the `name` a handler gets (Gemini turns hooks off by name)
    timeout_ms: bool = False  # its timeouts count milliseconds, else seconds
    # The answer: the keys down to the injected text, and the key beside the text that names
    # the firing event ("": none).
    output: tuple[str, ...] = ("hookSpecificOutput", "additionalContext")
    output_event: str = "hookEventName"
    write_guard: bool = True  # its PreToolUse and PostToolUse name Claude Code's file tools
    start_rules: bool = True  # the saving rules may come at a session's start, else at a prompt
    # The scope of a memory folder it keeps itself (`native.py`): while that memory is on, its
    # own prompt says how to save, and sagemem's rules stay out.
    own_memory: str = ""
    # Its MCP entry: in a project file, in a user file, under `mcp_key` (JSON, or TOML by the
    # file's suffix). `mcp_add` is its own command that writes the user entry (`{command}`:
    # sagemem's MCP command line), `mcp_remove` the one that takes it out; without them,
    # `install` writes it. `mcp_replaces`: `mcp_add` replaces an older entry, else
    # `mcp_remove` goes first.
    mcp_project: str = ""
    mcp_user: str = ""
    mcp_key: str = "mcpServers"
    mcp_add: str = ""
    mcp_remove: str = ""
    mcp_replaces: bool = True
    mcp_tool: str = ""  # what its model sees before an MCP tool's name
    mcp_trust: bool = False  # the entry is marked `trust` (Gemini: `-p` offers only trusted tools)
    mcp_with_hooks: bool = False  # its installer mounts the MCP server with the hooks
    # What it asks before it runs a hook: "dialog" (a folder's trust dialog), "hooks" (each
    # hook trusted by its hash, a project's only in a trusted project), "folder" (a project's
    # settings read only in a trusted folder), "" (nothing).
    trust: str = ""
    # The module of `agents/` that installs it where `install.py` cannot; its hooks file is
    # then sagemem's alone.
    installer: str = ""


TRUST = ("", "dialog", "hooks", "folder")  # `Harness.trust`
_CLAUDE_TOOLS = "mcp__sagemem__"  # Claude Code's (and its bridge's) mcp__<server>__<tool>

HARNESSES: dict[str, Harness] = {
    "claude-code": Harness(
        "claude-code",
        "Claude Code",
        "UserPromptSubmit",
        (
            HookEvent("SessionStart", "startup|resume|clear|compact", 10),
            HookEvent("UserPromptSubmit", None, 10),
            # The write guard on the agent's own file tools.
            HookEvent("PreToolUse", "Write|Edit|MultiEdit", 10),
            HookEvent("PostToolUse", "Read|Write|Edit|MultiEdit", 10),
        ),
        ".claude/settings.json",
        project_settings=".claude/settings.json",
        local_settings=".claude/settings.local.json",
        home_dir=".claude",
        home_env="CLAUDE_CONFIG_DIR",
        own_memory="claude",
        mcp_project=".mcp.json",
        mcp_user=".claude.json",
        mcp_add="claude mcp add --scope user sagemem -- {command}",
        mcp_remove="claude mcp remove --scope user sagemem",
        mcp_replaces=False,  # Claude Code refuses to add a name it has
        mcp_tool=_CLAUDE_TOOLS,
        trust="dialog",
    ),
    "codex": Harness(
        "codex",
        "Codex",
        "UserPromptSubmit",
        (HookEvent("SessionStart", "startup|resume|clear", 10), HookEvent("UserPromptSubmit", None, 10)),
        ".codex/hooks.json",
        project_settings=".codex/hooks.json",
        home_dir=".codex",
        home_env="CODEX_HOME",
        mcp_user=".codex/config.toml",
        mcp_key="mcp_servers",
        mcp_add="codex mcp add sagemem -- {command}",
        mcp_remove="codex mcp remove sagemem",
        trust="hooks",
    ),
    # Gemini CLI counts timeouts in milliseconds, names the prompt event BeforeAgent, and
    # keeps its MCP servers in its settings files.
    "gemini": Harness(
        "gemini",
        "Gemini CLI",
        "BeforeAgent",
        (HookEvent("SessionStart", "*", 10_000), HookEvent("BeforeAgent", "*", 10_000)),
        ".gemini/settings.json",
        project_settings=".gemini/settings.json",
        home_dir=".gemini",
        handler_name="sagemem",
        timeout_ms=True,
        mcp_project=".gemini/settings.json",
        mcp_user=".gemini/settings.json",
        mcp_tool="mcp_sagemem_",
        mcp_trust=True,
        trust="folder",
    ),
    # DeepSeek Harness runs Claude Code-format hooks through its bridge plugin, from a hooks
    # file of sagemem's own, and reads no project settings. Its file tools are not Claude
    # Code's; it starts SessionStart detached, as the first prompt goes out, and what that
    # says reaches only the second model request.
    "dsh": Harness(
        "dsh",
        "dsh",
        "UserPromptSubmit",
        (HookEvent("SessionStart", None, 30), HookEvent("UserPromptSubmit", None, 30)),
        ".dsh/sagemem/hooks.json",
        home_dir=".dsh",
        home_env="DSH_HOME",
        scopes=("user",),
        write_guard=False,
        start_rules=False,
        mcp_tool=_CLAUDE_TOOLS,
        mcp_with_hooks=True,
        installer="dsh",
    ),
}


def prompt_events() -> tuple[str, ...]:
    """Every harness's prompt event, each once: the events the hook answers as a prompt."""
    return tuple(dict.fromkeys(harness.prompt_event for harness in HARNESSES.values()))


def home_folder(harness: Harness, home: Path, env: Mapping[str, str] | None = None) -> Path:
    """The harness's own folder: its `home_env` variable, else `home_dir` in `home`."""
    moved = _moved(harness, env)
    return moved if moved is not None else home / harness.home_dir


def user_file(harness: Harness, path: str, home: Path, env: Mapping[str, str] | None = None) -> Path:
    """A user file of the harness's (`path`, from the home folder). Where `home_env` is set,
    it stands for the harness's folder, and for the home folder of a file outside it
    (Claude Code's `CLAUDE_CONFIG_DIR` holds its `.claude.json` too)."""
    moved = _moved(harness, env)
    if moved is None:
        return home / path
    inside = bool(harness.home_dir) and Path(path).is_relative_to(harness.home_dir)
    return moved / (Path(path).relative_to(harness.home_dir) if inside else path)


def mcp_place(harness: Harness, scope: str) -> tuple[str, bool] | None:
    """Where the MCP entry of `scope` goes, and whether `install` writes it there (else the
    harness's `mcp_add` does): the user scope's in the user file, a project's in the project
    file; where the harness keeps none in a project, the one its own command writes."""
    if scope != "user" and harness.mcp_project:
        return harness.mcp_project, True
    if harness.mcp_user and (scope == "user" or harness.mcp_add):
        return harness.mcp_user, not harness.mcp_add
    return None


def _moved(harness: Harness, env: Mapping[str, str] | None) -> Path | None:
    if not harness.home_env:
        return None
    given = (os.environ if env is None else env).get(harness.home_env, "").strip()
    return Path(given).expanduser() if given else None
