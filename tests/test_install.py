"""`sagemem install` and `uninstall`: what they write, what they rewrite, what they leave, where
the backups go, and the command they register."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.agents import install
from sagemem.agents.install import apply
from sagemem.store import command
from sagemem.store.config import locate_scopes
from sagemem.store.errors import SagememError, UnsafePath
from sagemem.store.harnesses import HARNESSES
from sagemem.store.native import claude_auto_memory, claude_memory_dir

from .memories import make_project
from .test_secrets import fake

PLANTED_TOKEN = "ghp_" + fake("gh1", 36)

Use = Callable[..., None]


@pytest.fixture
def runs_as(monkeypatch: pytest.MonkeyPatch) -> Use:
    """Make `sagemem.store.command` answer `words`, as if sagemem ran from elsewhere."""

    def use(*words: str) -> None:
        monkeypatch.setattr(command, "sagemem_command", lambda: words)
        monkeypatch.setattr(install, "sagemem_command", lambda: words)
        monkeypatch.setattr(install, "hook_command", lambda: words)  # as where no `-P` is

    return use


def home() -> Path:
    return Path(os.environ["HOME"])


def cache_backups() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "sagemem" / "backups"


def commands(settings: dict) -> list[str]:
    return [h["command"] for groups in settings.get("hooks", {}).values() for g in groups for h in g["hooks"]]


def sagemem(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemem", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_install_merges_idempotently_and_uninstall_removes_exactly_it(tmp_path: Path, harness: str) -> None:
    path = {
        "claude-code": ".claude/settings.json",
        "codex": ".codex/hooks.json",
        "gemini": ".gemini/settings.json",
    }
    target = tmp_path / path[harness]
    target.parent.mkdir(parents=True)
    mine = {
        "model": "x",
        "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "my-own-hook"}]}]},
        "permissions": {"allow": ["Bash(ls)"]},
    }
    target.write_text(json.dumps(mine, indent=4))
    # The hooks, the MCP entry (Gemini's marked trusted), and this machine's launcher the
    # project's portable lines run.
    events = len(HARNESSES[harness].events) + (harness != "codex") + (harness == "gemini") + 1
    first = apply(harness, "project", add=True, cwd=tmp_path)
    assert len(first["changes"]) == events and first["backup"]
    assert (home() / command.LAUNCHER).resolve() == Path(command.sagemem_command()[0]).resolve()
    assert Path(first["backup"]).read_text() == json.dumps(mine, indent=4)
    assert Path(first["backup"]).parent == cache_backups()  # no memory here yet: the cache dir
    installed = json.loads(target.read_text())
    assert installed["model"] == "x" and installed["permissions"] == mine["permissions"]
    assert "my-own-hook" in commands(installed)
    assert sum(f"hook {harness} " in c for c in commands(installed)) == len(HARNESSES[harness].events)
    if harness == "gemini":
        assert all(h["timeout"] == 10_000 for g in installed["hooks"]["BeforeAgent"] for h in g["hooks"])
    assert apply(harness, "project", add=True, cwd=tmp_path)["changes"] == []  # idempotent
    dry = apply(harness, "project", add=False, cwd=tmp_path, dry_run=True)
    assert dry["files"][0]["changes"] and json.loads(target.read_text()) == installed
    portable = {"command": "sh", "args": ["-c", command.portable_line("mcp")]}
    if harness == "claude-code":
        assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"] == portable
    if harness == "gemini":
        assert installed["mcpServers"]["sagemem"] == {**portable, "trust": True}
    if harness == "codex":
        assert first["todo"].splitlines()[0] == f"codex mcp add sagemem -- {command.command_line('mcp')}"
    apply(harness, "project", add=False, cwd=tmp_path)
    assert json.loads(target.read_text()) == mine
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no backups beside it


def test_install_leaves_a_users_own_sagemem_handler_alone(tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "settings.json"
    target.parent.mkdir()
    handler = {"type": "command", "command": "/opt/sagemem hook claude-code PreToolUse"}
    theirs = {"matcher": "Bash", "hooks": [handler]}
    target.write_text(json.dumps({"hooks": {"PreToolUse": [theirs]}}))
    apply("claude-code", "project", add=True, cwd=tmp_path)
    groups = json.loads(target.read_text())["hooks"]["PreToolUse"]
    assert [g["matcher"] for g in groups] == ["Bash", "Write|Edit|MultiEdit"]  # the guard went in
    assert groups[0]["hooks"] == [handler]  # theirs kept its own command
    apply("claude-code", "project", add=False, cwd=tmp_path)
    assert json.loads(target.read_text()) == {"hooks": {"PreToolUse": [theirs]}}


def test_uninstall_removes_the_python_m_form_it_wrote(tmp_path: Path, runs_as: Use) -> None:
    runs_as(str(tmp_path / "py" / "python3"), "-m", "sagemem")
    apply("gemini", "user", add=True, cwd=tmp_path)
    settings = home() / ".gemini" / "settings.json"
    server = json.loads(settings.read_text())["mcpServers"]["sagemem"]
    python = str(tmp_path / "py" / "python3")
    assert server == {"command": python, "args": ["-m", "sagemem", "mcp"], "trust": True}
    changes = apply("gemini", "user", add=False, cwd=tmp_path)["changes"]
    assert "settings.json: removed MCP server sagemem" in changes
    assert not settings.exists()  # install made it, and nothing else is in it


def test_with_no_script_the_launcher_runs_the_module(tmp_path: Path, runs_as: Use) -> None:
    runs_as(str(tmp_path / "py" / "python3"), "-P", "-m", "sagemem")
    apply("claude-code", "project", add=True, cwd=tmp_path)
    launcher = home() / command.LAUNCHER
    assert not launcher.is_symlink() and os.access(launcher, os.X_OK)
    assert launcher.read_text() == f'#!/bin/sh\nexec {tmp_path / "py" / "python3"} -P -m sagemem "$@"\n'


@pytest.mark.parametrize(
    "text, rule",
    [
        ("{ not json", "not valid JSON"),
        ('{"hooks": {"SessionStart": {}}}', "hooks.SessionStart must be a list"),
        ('{"hooks": {"PreToolUse": [{"hooks": "x"}]}}', "hooks.PreToolUse must be a list"),
    ],
)
def test_install_refuses_a_broken_settings_file(tmp_path: Path, text: str, rule: str) -> None:
    target = tmp_path / ".claude" / "settings.json"
    target.parent.mkdir()
    target.write_text(text)
    with pytest.raises(SagememError, match=rule) as failure:
        apply("claude-code", "project", add=True, cwd=tmp_path)
    assert str(target) in str(failure.value)
    assert target.read_text() == text and sorted(p.name for p in target.parent.iterdir()) == ["settings.json"]


def test_a_broken_file_stops_the_whole_install(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{ not json")
    with pytest.raises(SagememError, match=r"\.mcp\.json: not valid JSON"):
        apply("claude-code", "project", add=True, cwd=tmp_path)
    assert not (tmp_path / ".claude").exists()  # checked before anything was written


def test_install_command_user_scope(tmp_path: Path) -> None:
    done = sagemem(
        "install", "gemini", "--scope", "user", "--json", cwd=tmp_path, env={"HOME": str(tmp_path)}
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["path"] == str(tmp_path / ".gemini" / "settings.json")


# -- the command written ----------------------------------------------------------------------------


def test_a_python_with_no_sagemem_script_beside_it_keeps_the_sagemem_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launcher that puts sagemem on the path itself (pex, a Nix wrapper) runs a Python
    that cannot import sagemem alone: the hook keeps running that launcher."""
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr(command, "sagemem_command", lambda: ("/opt/wrapped/bin/sagemem",))
    command.hook_command.cache_clear()
    try:
        assert command.hook_command() == ("/opt/wrapped/bin/sagemem",)
        (python.parent / "sagemem").write_text("")  # a script beside it: the Python is started directly
        command.hook_command.cache_clear()
        if sys.version_info >= (3, 11):
            assert command.hook_command() == (str(python), "-P", "-c", command.HOOK_CODE)
    finally:
        command.hook_command.cache_clear()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the hook line runs Python with -P from 3.11")
def test_the_hook_line_runs_this_sagemem_never_the_projects_own(tmp_path: Path) -> None:
    """The line `install` writes for a user's hooks, run by a shell in a project that has a
    `sagemem/` package of its own, as a harness runs it: this sagemem answers."""
    project = tmp_path / "project"
    marker = tmp_path / "PWNED"
    (project / "sagemem").mkdir(parents=True)
    (project / "sagemem" / "__init__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    (project / "sagemem" / "__main__.py").write_text(f"open({str(marker)!r}, 'w')\n")
    make_project(project)
    assert apply("claude-code", "user", add=True, cwd=project)["files"]
    settings = json.loads((home() / ".claude" / "settings.json").read_text())
    [line] = [c for c in commands(settings) if c.endswith(" hook claude-code UserPromptSubmit")]
    assert shlex.split(line)[:4] == [sys.executable, "-P", "-c", command.HOOK_CODE]
    prompt = "when is the studio lease rent due"
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": prompt, "cwd": str(project)}
    env = {**os.environ, "SAGEMEM_DAEMON": "off"}
    done = subprocess.run(
        ["sh", "-c", line], input=json.dumps(event), capture_output=True, text=True, cwd=project, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "Fifth Street" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert not marker.exists()


@pytest.mark.skipif(
    not command.in_virtual_env() or not Path(sys.executable).with_name("sagemem").is_file(),
    reason="needs the suite to run from a virtual environment with sagemem's script installed",
)
def test_in_a_virtual_env_the_absolute_path_is_written(tmp_path: Path) -> None:
    """In the user's own settings; a project's, which its team commits, run the launcher
    that leads to it."""
    script = str(Path(sys.executable).with_name("sagemem").absolute())
    done = sagemem("install", "gemini", "--scope", "user", cwd=tmp_path, env={"PATH": os.defpath})
    assert done.returncode == 0, done.stderr
    settings = json.loads((home() / ".gemini" / "settings.json").read_text())
    direct = shlex.join([sys.executable, "-P", "-c", command.HOOK_CODE])
    runs = direct if sys.version_info >= (3, 11) else script
    assert f"{runs} hook gemini BeforeAgent" in commands(settings)
    assert settings["mcpServers"]["sagemem"] == {"command": script, "args": ["mcp"], "trust": True}
    done = sagemem("install", "claude-code", cwd=tmp_path, env={"PATH": os.defpath})
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert command.portable_line("hook", "claude-code", "UserPromptSubmit", harness="claude-code") in (
        commands(settings)
    )
    assert script not in (tmp_path / ".claude" / "settings.json").read_text()
    assert os.readlink(home() / command.LAUNCHER) == script


def test_an_older_entry_of_its_own_is_rewritten_in_place(tmp_path: Path, runs_as: Use) -> None:
    """A machine's path from an earlier install becomes the portable line."""
    """A bare `sagemem` from an earlier install: the command changes, the place does not,
    and a person's handler in the same group and their other entries stay as they are."""
    target = tmp_path / ".claude" / "settings.json"
    target.parent.mkdir()
    old = {"type": "command", "command": "sagemem hook claude-code UserPromptSubmit", "timeout": 10}
    mine = {"type": "command", "command": "my-logger"}
    target.write_text(
        json.dumps(
            {
                "hooks": {
                    "UserPromptSubmit": [{"hooks": [mine]}, {"hooks": [old, mine]}],
                    "Stop": [{"hooks": [mine]}],
                }
            }
        )
    )
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"sagemem": {"command": "sagemem", "args": ["mcp"]}}})
    )
    runs_as("/opt/venv/bin/sagemem")
    done = apply("claude-code", "project", add=True, cwd=tmp_path)
    settings = json.loads(target.read_text())
    prompt = settings["hooks"]["UserPromptSubmit"]
    assert prompt[0] == {"hooks": [mine]} and prompt[1]["hooks"][1] == mine and len(prompt) == 2
    line = command.portable_line("hook", "claude-code", "UserPromptSubmit", harness="claude-code")
    assert prompt[1]["hooks"][0] == {**old, "command": line}
    assert settings["hooks"]["Stop"] == [{"hooks": [mine]}]
    changes = done["files"][0]["changes"]
    assert f"updated UserPromptSubmit hook: sagemem hook claude-code UserPromptSubmit -> {line}" in changes
    portable = {"command": "sh", "args": ["-c", command.portable_line("mcp")]}
    assert done["files"][1]["changes"] == [
        f"updated MCP server sagemem: sagemem mcp -> sh -c '{portable['args'][1]}'"
    ]
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"] == portable
    assert apply("claude-code", "project", add=True, cwd=tmp_path)["changes"] == []
    runs_as("/opt/venv2/bin/sagemem")  # sagemem moved: only this machine's launcher follows it
    moved = apply("claude-code", "project", add=True, cwd=tmp_path)
    assert moved["changes"] == [
        "sagemem: updated this machine's sagemem for the project's shared settings: /opt/venv2/bin/sagemem"
    ]
    assert os.readlink(home() / command.LAUNCHER) == "/opt/venv2/bin/sagemem"


def test_a_persons_own_mcp_entry_under_sagemems_name_is_left_alone(tmp_path: Path, runs_as: Use) -> None:
    theirs = {"command": "sagemem", "args": ["--dir", "/notes", "mcp"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"sagemem": theirs}}))
    runs_as("/opt/venv/bin/sagemem")
    assert apply("claude-code", "project", add=True, cwd=tmp_path)["files"][1]["changes"] == []
    apply("claude-code", "project", add=False, cwd=tmp_path)
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {"mcpServers": {"sagemem": theirs}}


def test_each_change_is_printed_under_its_own_file(tmp_path: Path) -> None:
    done = sagemem("install", "claude-code", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"{tmp_path / '.mcp.json'}: added MCP server sagemem" in lines
    settings = [line for line in lines if line.startswith(f"{tmp_path / '.claude' / 'settings.json'}: ")]
    assert len(settings) == 4 and all(" hook: " in line for line in settings)
    shared = f"{tmp_path / '.claude' / 'settings.json'}, {tmp_path / '.mcp.json'}"
    launcher = home() / command.LAUNCHER
    assert f"to commit with the project: {shared}" in lines
    assert f"this machine's own (not to commit): {launcher}" in lines
    as_json = json.loads(sagemem("install", "claude-code", "--json", cwd=tmp_path).stdout)
    assert [(f["path"], f["shared"]) for f in as_json["files"]] == [
        (str(tmp_path / ".claude" / "settings.json"), True),
        (str(tmp_path / ".mcp.json"), True),
        (str(launcher), False),
    ]
    assert all(f["changes"] == [] for f in as_json["files"]) and as_json["changes"] == []
    again = sagemem("install", "claude-code", cwd=tmp_path).stdout.splitlines()
    assert again == [
        f"{tmp_path / '.claude' / 'settings.json'}: nothing to change",
        f"{tmp_path / '.mcp.json'}: nothing to change",
        f"{launcher}: nothing to change",
        f"to commit with the project: {shared}",
        *as_json["notes"],  # and one line on Claude Code's own memory
    ]
    assert len(as_json["notes"]) == 1 and as_json["notes"][0].startswith("Claude Code's auto memory stays on")


# -- Codex and Claude Code's user scope: what is left to the person -----------------------------


def test_codex_says_a_new_or_changed_hook_needs_trust(tmp_path: Path, runs_as: Use) -> None:
    runs_as("/opt/a/bin/sagemem")
    first = apply("codex", "project", add=True, cwd=tmp_path)
    assert first["files"][0]["created"]
    assert "/hooks" in first["todo"] and "sagemem doctor" in first["todo"]
    assert "only in a project you have trusted" in first["todo"]
    assert "codex_hooks = true" in first["todo"]  # the flag older Codex builds need
    assert "/hooks" not in (apply("codex", "project", add=True, cwd=tmp_path)["todo"] or "")
    runs_as("/opt/b/bin/sagemem")  # the environment moved: the project's portable line stays
    assert "/hooks" not in (apply("codex", "project", add=True, cwd=tmp_path)["todo"] or "")
    apply("codex", "user", add=True, cwd=tmp_path)
    runs_as("/opt/c/bin/sagemem")  # the user's hooks name it: they change, trust is given again
    moved = apply("codex", "user", add=True, cwd=tmp_path)
    assert any(line.startswith("updated UserPromptSubmit hook") for line in moved["files"][0]["changes"])
    assert "/hooks" in moved["todo"]


def test_codex_mcp_todo_follows_its_config(tmp_path: Path, runs_as: Use) -> None:
    runs_as("/opt/a/bin/sagemem")
    config = home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp_servers.sagemem]\ncommand = "/opt/a/bin/sagemem"\nargs = ["mcp"]\n')
    done = apply("codex", "user", add=True, cwd=tmp_path)
    assert "codex mcp add" not in done["todo"]  # already there, as it should be
    config.write_text('[mcp_servers.sagemem]\ncommand = "/old/bin/sagemem"\nargs = ["mcp"]\n')
    assert (
        "codex mcp add sagemem -- /opt/a/bin/sagemem mcp"
        in apply("codex", "user", add=True, cwd=tmp_path)["todo"]
    )
    assert apply("codex", "user", add=False, cwd=tmp_path)["todo"] == "codex mcp remove sagemem"
    config.write_text("")
    assert apply("codex", "user", add=False, cwd=tmp_path)["todo"] is None  # nothing to remove


def test_codex_user_hooks_follow_codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    done = apply("codex", "user", add=True, cwd=tmp_path)
    assert done["path"] == str(tmp_path / "codex-home" / "hooks.json")
    assert (tmp_path / "codex-home" / "hooks.json").is_file() and not (home() / ".codex").exists()


def test_claude_user_scope_replaces_an_older_mcp_entry_in_two_steps(tmp_path: Path, runs_as: Use) -> None:
    runs_as("/opt/a/bin/sagemem")
    state = home() / ".claude.json"
    assert apply("claude-code", "user", add=True, cwd=tmp_path)["todo"] == (
        "claude mcp add --scope user sagemem -- /opt/a/bin/sagemem mcp"
    )
    state.write_text(
        json.dumps({"mcpServers": {"sagemem": {"type": "stdio", "command": "sagemem", "args": ["mcp"]}}})
    )
    assert apply("claude-code", "user", add=True, cwd=tmp_path)["todo"] == (
        "claude mcp remove --scope user sagemem && "
        "claude mcp add --scope user sagemem -- /opt/a/bin/sagemem mcp"
    )
    state.write_text(
        json.dumps({"mcpServers": {"sagemem": {"command": "/opt/a/bin/sagemem", "args": ["mcp"]}}})
    )
    assert apply("claude-code", "user", add=True, cwd=tmp_path)["todo"] is None


# -- backups and the files install created ------------------------------------------------------


def test_uninstall_removes_what_install_created_and_nothing_else(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    before = sorted(p.relative_to(project) for p in project.rglob("*") if ".sagemem" not in p.parts)
    apply("claude-code", "project", add=True, cwd=project)
    apply("gemini", "project", add=True, cwd=project)
    done = apply("claude-code", "project", add=False, cwd=project)
    apply("gemini", "project", add=False, cwd=project)
    after = sorted(p.relative_to(project) for p in project.rglob("*") if ".sagemem" not in p.parts)
    assert after == before  # no .claude/, .gemini/, .mcp.json, `{}` or backup left
    assert done["files"][0]["removed"] and done["files"][1]["removed"]
    state = project / ".sagemem" / "memory" / ".sagemem" / "backups"
    assert sorted(Path(b).parent for b in done["backups"]) == [state, state]  # the memory's state dir
    record = json.loads((state / install.RECORD).read_text())
    assert record["created"] == {}
    assert {record["backups"][Path(b).name] for b in done["backups"]} == {
        str(project / ".claude" / "settings.json"),
        str(project / ".mcp.json"),
    }
    assert state.stat().st_mode & 0o777 == 0o700
    assert not (home() / ".sagemem" / "memory").exists() and not cache_backups().exists()
    assert (home() / command.LAUNCHER).exists()  # left for the other projects that run it


def test_a_record_written_before_its_format_number_is_of_format_1(tmp_path: Path) -> None:
    """An install record from before `"format"` was written is read as format 1: the file
    install created is still removed, and the record says its format from the next write."""
    project = make_project(tmp_path / "proj")
    apply("claude-code", "project", add=True, cwd=project)
    path = project / ".sagemem" / "memory" / ".sagemem" / "backups" / install.RECORD
    record = json.loads(path.read_text())
    assert record["format"] == 1
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "format"}))
    done = apply("claude-code", "project", add=False, cwd=project)
    assert done["files"][0]["removed"] and not (project / ".claude").exists()
    after = json.loads(path.read_text())
    assert list(after)[0] == "format" and after["format"] == 1 and after["created"] == {}


def test_a_file_the_person_had_stays_even_empty(tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "settings.json"
    target.parent.mkdir()
    target.write_text("{}\n")
    (tmp_path / ".claude" / "agents").mkdir()
    apply("claude-code", "project", add=True, cwd=tmp_path)
    done = apply("claude-code", "project", add=False, cwd=tmp_path)
    assert json.loads(target.read_text()) == {} and not done["files"][0]["removed"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["agents", "settings.json"]
    assert not (tmp_path / ".mcp.json").exists()  # that one install made


def test_a_created_file_someone_filled_since_stays(tmp_path: Path) -> None:
    apply("gemini", "project", add=True, cwd=tmp_path)
    target = tmp_path / ".gemini" / "settings.json"
    target.write_text(json.dumps({**json.loads(target.read_text()), "theme": "dark"}))
    apply("gemini", "project", add=False, cwd=tmp_path)
    assert json.loads(target.read_text()) == {"theme": "dark"}


def test_a_file_created_before_init_is_still_known_after_it(tmp_path: Path) -> None:
    apply("claude-code", "project", add=True, cwd=tmp_path)  # no memory yet: recorded in the cache dir
    assert (cache_backups() / install.RECORD).is_file()
    make_project(tmp_path)
    done = apply("claude-code", "project", add=False, cwd=tmp_path)
    assert done["files"][0]["removed"] and not (tmp_path / ".claude").exists()
    assert Path(done["backups"][0]).parent == tmp_path / ".sagemem" / "memory" / ".sagemem" / "backups"


def test_user_scope_backups_go_to_the_user_memory_or_the_cache(tmp_path: Path) -> None:
    settings = home() / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}')
    first = apply("gemini", "user", add=True, cwd=tmp_path)
    assert Path(first["backup"]).parent == cache_backups()
    assert not (home() / ".sagemem").exists()  # no user memory made as a side effect
    make_project(home())  # the user memory, ~/.sagemem/memory, now exists
    second = apply("gemini", "user", add=False, cwd=tmp_path)
    assert Path(second["backup"]).parent == home() / ".sagemem" / "memory" / ".sagemem" / "backups"
    assert json.loads(settings.read_text()) == {"theme": "dark"}


def test_backups_are_never_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / ".claude" / "settings.json"
    target.parent.mkdir()
    target.write_text('{"model": "x"}')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache_backups().parent.mkdir(parents=True)
    cache_backups().symlink_to(elsewhere)
    with pytest.raises(UnsafePath):
        apply("claude-code", "project", add=True, cwd=tmp_path)
    assert target.read_text() == '{"model": "x"}' and list(elsewhere.iterdir()) == []


# -- Claude Code's own auto memory: left on by default, handed to sagemem only when asked ----------

CAT = "---\nname: cat\ndescription: the user's cat\ntype: user\n---\n\nThe cat is called Sesame.\n"
TESTS = (
    "---\nname: tests\ndescription: run the whole suite before a commit\nmetadata:\n  type: feedback\n"
    "---\n\nRun pytest -q.\n"
)
THEIR_STUDIO = "---\nname: studio\ndescription: Claude's own note on the studio\ntype: project\n---\n\nOld.\n"


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def claude_folder(project: Path, files: dict[str, str]) -> Path:
    """Claude Code's auto-memory folder for `project`, with `files` in it as Claude saved them."""
    folder = claude_memory_dir(project, home(), os.environ)
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("".join(f"- [{n}]({n}) — saved by Claude\n" for n in files))
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def project_settings(project: Path) -> dict:
    return json.loads((project / ".claude" / "settings.json").read_text())


def test_by_default_claude_codes_memory_is_left_on_and_its_folder_named(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    folder = claude_folder(project, {"user_cat.md": CAT})
    before = tree(folder)
    for memory in (None, "both"):  # `both` with nothing sagemem set changes nothing either
        done = apply("claude-code", "project", add=True, cwd=project, memory=memory)
        assert "autoMemoryEnabled" not in project_settings(project)
        assert done["notes"] == [
            f"Claude Code's auto memory stays on: sagemem reads its folder for this project, {folder}, "
            "as the `claude` scope"
        ]
        assert done["import"] is None
    assert tree(folder) == before
    assert claude_auto_memory(project, home(), os.environ)[0]
    shown = sagemem("install", "claude-code", cwd=project)
    assert done["notes"][0] in shown.stdout.splitlines()
    assert (
        json.loads(sagemem("install", "claude-code", "--json", cwd=project).stdout)["notes"] == done["notes"]
    )


def test_with_auto_memory_off_the_note_says_sagemems_rules_are_given(tmp_path: Path) -> None:
    """The person turned it off themselves: install says so, and `--memory both` leaves their key."""
    project = make_project(tmp_path / "proj")
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"autoMemoryEnabled": false}')
    off = (
        f"Claude Code's auto memory is off here (autoMemoryEnabled is false in {settings}): sagemem gives "
        "its rules for saving a memory at session start instead"
    )
    assert apply("claude-code", "project", add=True, cwd=project, memory="both")["notes"] == [off]
    assert json.loads(settings.read_text())["autoMemoryEnabled"] is False  # theirs, not sagemem's
    chosen = apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    assert chosen["notes"][0] == off  # no `--memory both` to offer: the setting is not sagemem's
    apply("claude-code", "project", add=False, cwd=project)
    assert json.loads(settings.read_text()) == {"autoMemoryEnabled": False}


def test_memory_sagemem_imports_first_then_turns_claude_codes_memory_off(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    store = MemoryStore(project / ".sagemem" / "memory")
    ours = (store.memory_dir / "project_studio_opening.md").read_bytes()
    folder = claude_folder(
        project,
        {
            "user_cat.md": CAT,
            "feedback_tests.md": TESTS,  # Claude Code's `metadata: type:` form
            "project_studio_opening.md": THEIR_STUDIO,  # a name the project memory has: left alone
            "reference_ci.md": f"---\ndescription: the CI bot's token\n---\n\n{PLANTED_TOKEN}\n",
            "notes.md": "no frontmatter\n",
        },
    )
    claude_before = tree(folder)
    files_before = set(store.files())
    snapshots = len(store.snapshots())

    done = apply("claude-code", "project", add=True, cwd=project, memory="sagemem")

    assert {f["file"]: f["status"] for f in done["import"]["files"]} == {
        "user_cat.md": "imported",
        "feedback_tests.md": "imported",
        "project_studio_opening.md": "skipped",
        "reference_ci.md": "refused",
        "notes.md": "refused",
    }
    assert "looks like a GitHub token" in next(
        f["change"] for f in done["import"]["files"] if f["file"] == "reference_ci.md"
    )
    assert done["import"]["into"] == "project" and done["import"]["memory_dir"] == str(store.memory_dir)
    # The snapshot came first: it holds the project memory as it was before the import.
    assert len(store.snapshots()) == snapshots + 1
    [taken] = [s for s in store.snapshots() if s.id == done["import"]["snapshot"]]
    assert {f["name"] for f in taken.files} == files_before | {"MEMORY.md"}
    assert (store.memory_dir / "user_cat.md").read_text() == CAT
    assert (store.memory_dir / "feedback_tests.md").read_text() == TESTS
    assert (store.memory_dir / "project_studio_opening.md").read_bytes() == ours  # never overwritten
    assert set(store.files()) == files_before | {"user_cat.md", "feedback_tests.md"}
    index = (store.memory_dir / "MEMORY.md").read_text()
    assert "(user_cat.md)" in index and "(feedback_tests.md)" in index
    assert store.get("feedback_tests.md").type == "feedback"
    assert tree(folder) == claude_before  # Claude Code's own files: not one byte changed
    # Then, and only then, Claude Code's auto memory is off for this project.
    assert project_settings(project)["autoMemoryEnabled"] is False
    assert claude_auto_memory(project, home(), os.environ) == (
        False,
        f"autoMemoryEnabled is false in {project / '.claude' / 'settings.json'}",
    )
    assert (
        "set autoMemoryEnabled to false: Claude Code's auto memory is off for this project"
        in (done["files"][0]["changes"])
    )
    assert "`sagemem install claude-code --memory both` turns it back on" in done["notes"][0]
    assert "no longer read as a scope" in done["notes"][1]
    assert "claude" not in [s.name for s in locate_scopes(cwd=project)]  # nothing is found twice

    again = apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    assert [f["status"] for f in again["import"]["files"] if f["file"] == "user_cat.md"] == ["present"]
    assert again["import"]["snapshot"] is None and again["changes"] == []  # nothing left to do
    assert len(store.snapshots()) == snapshots + 1


def test_memory_both_and_uninstall_take_back_exactly_what_sagemem_set(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    claude_folder(project, {"user_cat.md": CAT})
    settings = project / ".claude" / "settings.json"
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    plain = apply("claude-code", "project", add=True, cwd=project)  # no --memory: left as it is
    assert plain["changes"] == [] and project_settings(project)["autoMemoryEnabled"] is False
    assert plain["notes"][0].endswith("`sagemem install claude-code --memory both` turns it back on")
    both = apply("claude-code", "project", add=True, cwd=project, memory="both")
    assert "autoMemoryEnabled" not in project_settings(project) and commands(project_settings(project))
    assert both["files"][0]["changes"] == [
        "removed autoMemoryEnabled (install --memory sagemem set it to false)"
    ]
    assert claude_auto_memory(project, home(), os.environ)[0]
    assert "stays on" in both["notes"][0]
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    gone = apply("claude-code", "project", add=False, cwd=project)
    assert (
        "removed autoMemoryEnabled (install --memory sagemem set it to false)" in gone["files"][0]["changes"]
    )
    assert not settings.exists()  # install made the file, and nothing is left in it

    # A value the person had is put back; a value they changed since is theirs.
    settings.parent.mkdir(exist_ok=True)
    settings.write_text('{"autoMemoryEnabled": true, "model": "x"}')
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    assert project_settings(project)["autoMemoryEnabled"] is False
    apply("claude-code", "project", add=True, cwd=project, memory="both")
    assert project_settings(project)["autoMemoryEnabled"] is True
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    settings.write_text(json.dumps({**project_settings(project), "autoMemoryEnabled": False, "theme": "x"}))
    apply("claude-code", "project", add=False, cwd=project)  # still the false sagemem set: put back
    assert json.loads(settings.read_text()) == {"autoMemoryEnabled": True, "model": "x", "theme": "x"}


def test_a_key_the_person_changed_since_is_left_alone(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    changed = {**project_settings(project), "autoMemoryEnabled": True}
    (project / ".claude" / "settings.json").write_text(json.dumps(changed))
    assert apply("claude-code", "project", add=True, cwd=project, memory="both")["changes"] == []
    apply("claude-code", "project", add=True, cwd=project, memory="sagemem")  # theirs was true: set again
    (project / ".claude" / "settings.json").write_text(json.dumps(changed))
    apply("claude-code", "project", add=False, cwd=project)
    assert project_settings(project) == {"autoMemoryEnabled": True}


def test_memory_sagemem_dry_run_shows_it_all_and_writes_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    folder = claude_folder(project, {"user_cat.md": CAT})
    before = tree(tmp_path), tree(home())
    done = sagemem("install", "claude-code", "--memory", "sagemem", "--dry-run", cwd=project)
    assert done.returncode == 0, done.stderr
    assert (tree(tmp_path), tree(home())) == before
    lines = done.stdout.splitlines()
    memory = project / ".sagemem" / "memory"
    assert lines[:2] == [
        f"snapshot of the project scope ({memory}) before the import: not taken in a dry run",
        f"{folder / 'user_cat.md'}: imported into the project scope",
    ]
    assert (
        f"{project / '.claude' / 'settings.json'}: set autoMemoryEnabled to false: Claude Code's auto memory"
        " is off for this project"
    ) in lines
    assert any(line.startswith("Claude Code's auto memory is off here") for line in lines)
    assert "dry run: nothing written" in done.stderr


def test_memory_sagemem_needs_a_sagemem_memory_and_changes_nothing_without(tmp_path: Path) -> None:
    folder = claude_folder(tmp_path, {"user_cat.md": CAT})
    with pytest.raises(SagememError, match=r"no sagemem memory here.*sagemem init --project"):
        apply("claude-code", "project", add=True, cwd=tmp_path, memory="sagemem")
    assert not (tmp_path / ".claude").exists() and (folder / "user_cat.md").read_text() == CAT


def test_in_chooses_the_scope_the_memories_go_to(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    user = MemoryStore(home() / ".sagemem" / "memory")
    user.init()
    claude_folder(project, {"user_cat.md": CAT})
    done = sagemem("--in", "user", "install", "claude-code", "--memory", "sagemem", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["import"]["into"] == "user" and user.get("user_cat.md").name == "cat"
    assert not (project / ".sagemem" / "memory" / "user_cat.md").exists()
    refused = sagemem("--in", "claude", "install", "claude-code", "--memory", "sagemem", cwd=project)
    assert refused.returncode == 1 and "'claude' is not a sagemem scope here" in refused.stderr


@pytest.mark.parametrize(
    "args, rule",
    [
        (["codex", "--memory", "sagemem"], "--memory is for claude-code only"),
        (["gemini", "--memory", "both"], "--memory is for claude-code only"),
        (["claude-code", "--scope", "user", "--memory", "sagemem"], "use it with the project scope"),
    ],
)
def test_memory_is_for_claude_codes_project_scope_only(tmp_path: Path, args: list[str], rule: str) -> None:
    done = sagemem("install", *args, cwd=tmp_path)
    assert done.returncode == 2 and rule in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # nothing written
    with pytest.raises(SagememError, match="for Claude Code with the project scope only"):
        apply(args[0], "user" if "user" in args else "project", add=True, cwd=tmp_path, memory="sagemem")


def test_a_setting_that_wins_over_the_projects_is_named(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"autoMemoryEnabled": true}')
    done = apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    assert project_settings(project)["autoMemoryEnabled"] is False
    assert done["notes"][0].startswith(
        f"Claude Code's auto memory is still on here (autoMemoryEnabled is true in {local}), despite"
    )


# -- install's record may be forged: a project's state dir comes with its clone -----------------


def _forge_folders(record_file: Path, settings: Path, folders: list[Path]) -> None:
    record = json.loads(record_file.read_text())
    record["created"][str(settings)]["folders"] = [str(f) for f in folders]
    record_file.write_text(json.dumps(record))


def test_a_forged_record_makes_uninstall_remove_no_folder_install_did_not_make(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    victim = tmp_path / "victim-empty"
    victim.mkdir()
    apply("claude-code", "project", add=True, cwd=project)
    settings = project / ".claude" / "settings.json"
    record = project / ".sagemem" / "memory" / ".sagemem" / "backups" / install.RECORD
    _forge_folders(record, settings, [victim, settings.parent])
    done = sagemem("uninstall", "claude-code", cwd=project)
    assert done.returncode == 0, done.stderr
    assert victim.is_dir() and "victim" not in done.stdout
    assert not settings.exists() and settings.parent.is_dir()  # the list was no chain: no folder removed
    # A chain from the file's own folder up: believed only below the project, which stays.
    bare = tmp_path / "bare"
    bare.mkdir()
    apply("claude-code", "project", add=True, cwd=bare)  # no memory here: recorded in the cache dir
    settings = bare / ".claude" / "settings.json"
    _forge_folders(cache_backups() / install.RECORD, settings, [settings.parent, bare, tmp_path])
    done = sagemem("uninstall", "claude-code", cwd=bare)
    assert done.returncode == 0, done.stderr
    assert not settings.parent.exists() and bare.is_dir() and tmp_path.is_dir()
    assert f"removed the folder {settings.parent}" in done.stdout and f"folder {bare}:" not in done.stdout


def test_install_record_never_makes_uninstall_remove_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config" / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    apply("claude-code", "user", add=True, cwd=tmp_path)
    settings = config / "settings.json"
    record = cache_backups() / install.RECORD
    folders = json.loads(record.read_text())["created"][str(settings)]["folders"]
    assert folders == [str(config), str(config.parent)]
    monkeypatch.setenv("HOME", str(config.parent))  # a record naming the home folder: never removed
    done = apply("claude-code", "user", add=False, cwd=tmp_path)
    assert done["files"][0]["removed"] and not config.exists() and config.parent.is_dir()


def test_what_else_a_forged_record_names_is_never_touched(tmp_path: Path) -> None:
    """A setting to put back is looked up by the file being edited, and the backups' list is
    never acted on: a record naming other files changes none of them."""
    project = make_project(tmp_path / "proj")
    apply("claude-code", "project", add=True, cwd=project)
    elsewhere = tmp_path / "other" / ".claude" / "settings.json"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text('{"autoMemoryEnabled": false}')
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    record_file = project / ".sagemem" / "memory" / ".sagemem" / "backups" / install.RECORD
    record = json.loads(record_file.read_text())
    record["settings"] = {str(elsewhere): {"autoMemoryEnabled": {"was": True}}}
    record["backups"] = {"20261201-000000-000000-claude-settings.json": str(victim), "../x": str(victim)}
    record["created"][str(elsewhere)] = {"folders": [str(elsewhere.parent)]}
    record_file.write_text(json.dumps(record))
    done = sagemem("uninstall", "claude-code", cwd=project)
    assert done.returncode == 0, done.stderr
    assert elsewhere.read_text() == '{"autoMemoryEnabled": false}' and victim.read_text() == "mine"


def test_gemini_says_the_folder_must_be_trusted_until_it_is(tmp_path: Path) -> None:
    first = apply("gemini", "project", add=True, cwd=tmp_path)
    assert "trust this folder in Gemini" in first["todo"]
    assert f'add {json.dumps(str(tmp_path.resolve()))}: "TRUST_FOLDER" to' in first["todo"]
    rules = home() / ".gemini" / "trustedFolders.json"
    rules.parent.mkdir(exist_ok=True)
    rules.write_text(json.dumps({str(tmp_path): "TRUST_FOLDER"}))
    assert apply("gemini", "project", add=True, cwd=tmp_path)["todo"] is None


def test_gemini_runs_sagemems_tools_without_asking_unless_the_person_says(tmp_path: Path) -> None:
    """`gemini -p` offers a model only the tools it need not confirm: the entry is trusted."""
    settings = tmp_path / ".gemini" / "settings.json"
    first = apply("gemini", "project", add=True, cwd=tmp_path)
    assert json.loads(settings.read_text())["mcpServers"]["sagemem"]["trust"] is True
    assert any("set trust on MCP server sagemem" in line for line in first["changes"])
    data = json.loads(settings.read_text())
    data["mcpServers"]["sagemem"]["trust"] = False  # the person wants to be asked
    settings.write_text(json.dumps(data))
    assert apply("gemini", "project", add=True, cwd=tmp_path)["changes"] == []
    assert json.loads(settings.read_text())["mcpServers"]["sagemem"]["trust"] is False
