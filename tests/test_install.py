"""`sagemem install` and `uninstall`: what they write, what they rewrite, what they leave, where
the backups go, and the command they register."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sagemem import command, install
from sagemem.errors import SagememError, UnsafePath
from sagemem.install import TARGETS, apply

from .memories import make_project

Use = Callable[..., None]


@pytest.fixture
def runs_as(monkeypatch: pytest.MonkeyPatch) -> Use:
    """Make `sagemem.command` answer `words`, as if sagemem ran from elsewhere."""

    def use(*words: str) -> None:
        monkeypatch.setattr(command, "sagemem_command", lambda: words)
        monkeypatch.setattr(install, "sagemem_command", lambda: words)

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
    events = len(TARGETS[harness][2]) + (harness != "codex")  # the hooks, and the MCP entry
    first = apply(harness, "project", add=True, cwd=tmp_path)
    assert len(first["changes"]) == events and first["backup"]
    assert Path(first["backup"]).read_text() == json.dumps(mine, indent=4)
    assert Path(first["backup"]).parent == cache_backups()  # no memory here yet: the cache dir
    installed = json.loads(target.read_text())
    assert installed["model"] == "x" and installed["permissions"] == mine["permissions"]
    assert "my-own-hook" in commands(installed)
    assert sum(f"hook {harness} " in c for c in commands(installed)) == len(TARGETS[harness][2])
    if harness == "gemini":
        assert all(h["timeout"] == 10_000 for g in installed["hooks"]["BeforeAgent"] for h in g["hooks"])
    assert apply(harness, "project", add=True, cwd=tmp_path)["changes"] == []  # idempotent
    dry = apply(harness, "project", add=False, cwd=tmp_path, dry_run=True)
    assert dry["files"][0]["changes"] and json.loads(target.read_text()) == installed
    if harness == "claude-code":
        assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"]["args"][-1] == "mcp"
    if harness == "gemini":
        assert installed["mcpServers"]["sagemem"]["args"][-1] == "mcp"
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
    apply("claude-code", "project", add=True, cwd=tmp_path)
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"]
    assert server == {"command": str(tmp_path / "py" / "python3"), "args": ["-m", "sagemem", "mcp"]}
    changes = apply("claude-code", "project", add=False, cwd=tmp_path)["changes"]
    assert ".mcp.json: removed MCP server sagemem" in changes
    assert not (tmp_path / ".mcp.json").exists()  # install made it, and nothing else is in it


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


@pytest.mark.skipif(
    not command.in_virtual_env() or not Path(sys.executable).with_name("sagemem").is_file(),
    reason="needs the suite to run from a virtual environment with sagemem's script installed",
)
def test_in_a_virtual_env_the_absolute_path_is_written(tmp_path: Path) -> None:
    script = str(Path(sys.executable).with_name("sagemem").absolute())
    done = sagemem("install", "claude-code", "--json", cwd=tmp_path, env={"PATH": os.defpath})
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert f"{script} hook claude-code UserPromptSubmit" in commands(settings)
    server = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"]
    assert server == {"command": script, "args": ["mcp"]}


def test_an_older_entry_of_its_own_is_rewritten_in_place(tmp_path: Path, runs_as: Use) -> None:
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
    assert prompt[1]["hooks"][0] == {
        **old,
        "command": "/opt/venv/bin/sagemem hook claude-code UserPromptSubmit",
    }
    assert settings["hooks"]["Stop"] == [{"hooks": [mine]}]
    changes = done["files"][0]["changes"]
    assert (
        "updated UserPromptSubmit hook: sagemem hook claude-code UserPromptSubmit -> "
        "/opt/venv/bin/sagemem hook claude-code UserPromptSubmit"
    ) in changes
    assert done["files"][1]["changes"] == [
        "updated MCP server sagemem: sagemem mcp -> /opt/venv/bin/sagemem mcp"
    ]
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["sagemem"]["command"] == (
        "/opt/venv/bin/sagemem"
    )
    assert apply("claude-code", "project", add=True, cwd=tmp_path)["changes"] == []


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
    as_json = json.loads(sagemem("install", "claude-code", "--json", cwd=tmp_path).stdout)
    assert [f["path"] for f in as_json["files"]] == [
        str(tmp_path / ".claude" / "settings.json"),
        str(tmp_path / ".mcp.json"),
    ]
    assert all(f["changes"] == [] for f in as_json["files"]) and as_json["changes"] == []
    again = sagemem("install", "claude-code", cwd=tmp_path).stdout.splitlines()
    assert again == [
        f"{tmp_path / '.claude' / 'settings.json'}: nothing to change",
        f"{tmp_path / '.mcp.json'}: nothing to change",
    ]


# -- Codex and Claude Code's user scope: what is left to the person -----------------------------


def test_codex_says_a_new_or_changed_hook_needs_trust(tmp_path: Path, runs_as: Use) -> None:
    runs_as("/opt/a/bin/sagemem")
    first = apply("codex", "project", add=True, cwd=tmp_path)
    assert first["files"][0]["created"]
    assert "/hooks" in first["todo"] and "sagemem doctor" in first["todo"]
    assert "only in a project you have trusted" in first["todo"]
    assert "codex_hooks = true" in first["todo"]  # the flag older Codex builds need
    assert "/hooks" not in (apply("codex", "project", add=True, cwd=tmp_path)["todo"] or "")
    runs_as("/opt/b/bin/sagemem")  # the environment moved: the command changes, trust must be given again
    moved = apply("codex", "project", add=True, cwd=tmp_path)
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
    assert not (home() / ".sagemem").exists() and not cache_backups().exists()


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
