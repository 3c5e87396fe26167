"""One record per harness (`store/harnesses.py`): every record is consistent, and a harness
that exists only as a record is taken by the CLI, installed, answered in its own shape, and
checked by doctor, each through the real code paths."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

import pytest
from click.testing import CliRunner

from sagemem.agents import doctor, hooks
from sagemem.agents.doctor import OK, Places
from sagemem.agents.doctor.diagnosis import OWN_CHECKS
from sagemem.agents.install import own_installer
from sagemem.cli import cli
from sagemem.store import command, harnesses
from sagemem.store.config import SCOPE_NAMES
from sagemem.store.harnesses import HARNESSES, TRUST, Harness, HookEvent

from .memories import QUESTION, make_project

# A fifth harness, by its record alone: its own prompt event, folder and variable, an answer
# of another shape (no event name in it), an MCP file of its own in a project.
FAKE = Harness(
    "fake",
    "Fake Agent",
    "BeforePrompt",
    (HookEvent("SessionStart", "boot", 5), HookEvent("BeforePrompt", None, 7)),
    ".fake/hooks.json",
    project_settings=".fake/hooks.json",
    home_dir=".fake",
    home_env="FAKE_HOME",
    output=("answer", "context"),
    output_event="",
    mcp_project=".fake/mcp.json",
    mcp_tool="fake.sagemem.",
)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.setitem(HARNESSES, FAKE.name, FAKE)
    return FAKE


def sagemem(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(cli, list(args), input=input, env=env, catch_exceptions=False)
    return done.exit_code, done.output


def relative(path: str) -> bool:
    return bool(path) and not PurePosixPath(path).is_absolute() and ".." not in PurePosixPath(path).parts


# -- every record --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HARNESSES))
def test_every_record_is_consistent(name: str) -> None:
    record = HARNESSES[name]
    assert record.name == name and name.replace("-", "").isalnum() and name.islower()
    events = [event.name for event in record.events]
    assert len(set(events)) == len(events) and record.prompt_event in events
    known = {*hooks.START_EVENTS, record.prompt_event, *(hooks.TOOL_EVENTS if record.write_guard else ())}
    assert set(events) <= known, f"{name}: events no code answers"
    assert all(isinstance(e.timeout, int) and e.timeout > 0 for e in record.events)
    assert all(e.matcher is None or (isinstance(e.matcher, str) and e.matcher) for e in record.events)
    # Paths are relative (to the home folder or the project), and the user's file is in the
    # harness's own folder, which its variable moves.
    files = [record.user_settings, record.project_settings, record.local_settings]
    files += [record.mcp_project, record.mcp_user]
    assert all(relative(path) for path in files if path) and relative(record.user_settings)
    assert relative(record.home_dir) and PurePosixPath(record.user_settings).is_relative_to(record.home_dir)
    assert record.home_env == "" or record.home_env.isupper()
    # Scopes: the project's only where it reads project settings, the local file beside them.
    assert record.scopes and set(record.scopes) <= {"project", "user"}
    assert ("project" in record.scopes) == bool(record.project_settings)
    if record.local_settings:
        assert PurePosixPath(record.local_settings).parent == PurePosixPath(record.project_settings).parent
    # The answer, the MCP entry and the code a record names.
    assert record.output and all(record.output) and record.output_event not in record.output
    assert not (record.mcp_add or record.mcp_remove) or (
        record.mcp_user and "{command}" in record.mcp_add and record.mcp_remove
    )
    assert record.mcp_with_hooks or record.mcp_project or record.mcp_user or not record.mcp_tool
    assert record.trust in TRUST
    assert record.own_memory == "" or record.own_memory in SCOPE_NAMES
    if record.installer:
        assert callable(own_installer(record)) and record.scopes == ("user",)


def test_the_cli_and_doctor_offer_every_record_and_nothing_else() -> None:
    code, shown = sagemem("install", "--help")
    assert code == 0 and "{" + "|".join(HARNESSES) + "}" in shown
    assert set(OWN_CHECKS) <= set(HARNESSES)  # a module of its own only for a harness with a record
    assert doctor.PROMPT_EVENTS == {name: h.prompt_event for name, h in HARNESSES.items()}


def test_a_moved_folder_holds_the_harness_files_inside_it_and_beside_it(tmp_path: Path) -> None:
    claude, home = HARNESSES["claude-code"], tmp_path / "home"
    moved = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    assert harnesses.user_file(claude, claude.user_settings, home, {}) == home / ".claude" / "settings.json"
    assert harnesses.user_file(claude, claude.user_settings, home, moved) == tmp_path / "cc" / "settings.json"
    assert harnesses.user_file(claude, ".claude.json", home, moved) == tmp_path / "cc" / ".claude.json"
    assert harnesses.user_file(claude, ".claude.json", home, {}) == home / ".claude.json"
    assert harnesses.home_folder(HARNESSES["gemini"], home, moved) == home / ".gemini"


# -- a fifth harness by one record ---------------------------------------------------------------


def test_the_cli_takes_a_harness_from_its_record_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, shown = sagemem("install", "fake")
    assert code == 2 and "'fake' is not one of" in shown  # no record, no harness
    monkeypatch.setitem(HARNESSES, FAKE.name, FAKE)
    code, shown = sagemem("install", "fake", "--dry-run")
    assert code == 0 and ".fake/hooks.json: added BeforePrompt hook" in shown
    code, shown = sagemem("hook", "--help")
    assert code == 0 and "{claude-code|codex|gemini|dsh|fake}" in shown


def test_install_writes_the_records_hooks_and_mcp_entry_and_uninstall_takes_them_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Harness
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    code, shown = sagemem("install", "fake")
    assert code == 0, shown
    settings = json.loads((project / ".fake" / "hooks.json").read_text())
    assert list(settings["hooks"]) == ["SessionStart", "BeforePrompt"]
    [start], [prompt] = settings["hooks"]["SessionStart"], settings["hooks"]["BeforePrompt"]
    assert start["matcher"] == "boot" and "matcher" not in prompt  # the record's matchers
    assert [h["timeout"] for h in start["hooks"] + prompt["hooks"]] == [5, 7]
    assert start["hooks"][0]["command"] == command.portable_line(
        "hook", "fake", "SessionStart", harness="fake"
    )
    assert "name" not in prompt["hooks"][0]
    servers = json.loads((project / ".fake" / "mcp.json").read_text())["mcpServers"]
    assert servers == {"sagemem": {"command": "sh", "args": ["-c", command.portable_line("mcp")]}}
    assert "still to do" not in shown  # no trust to ask for, no MCP command of its own
    code, shown = sagemem("uninstall", "fake")
    assert code == 0 and not [*(project / ".fake").iterdir()]  # the files install made are gone


def test_the_user_scope_follows_the_harness_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Harness
) -> None:
    monkeypatch.chdir(tmp_path)
    assert sagemem("install", "fake", "--scope", "user")[0] == 0
    assert (Path(os.environ["HOME"]) / ".fake" / "hooks.json").is_file()
    moved = tmp_path / "elsewhere"
    code, shown = sagemem("install", "fake", "--scope", "user", env={"FAKE_HOME": str(moved)})
    assert code == 0, shown
    hooks_file = json.loads((moved / "hooks.json").read_text())
    assert hooks_file["hooks"]["BeforePrompt"][0]["hooks"][0]["command"].endswith(" hook fake BeforePrompt")


def test_the_hook_answers_in_the_records_shape_and_names_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Harness
) -> None:
    project = make_project(tmp_path / "proj")
    monkeypatch.chdir(project)
    assert sagemem("install", "fake")[0] == 0  # its MCP entry: the saving rules name the tools
    event = {"hook_event_name": "BeforePrompt", "session_id": "f-1", "cwd": str(project), "prompt": QUESTION}
    code, out = sagemem("hook", "fake", input=json.dumps(event))
    assert code == 0
    answer = json.loads(out)
    assert list(answer) == ["answer"] and list(answer["answer"]) == ["context"]
    text = answer["answer"]["context"]
    assert "project_studio_opening.md" in text and "fake.sagemem.memory_remember(" in text
    # Named on the command line in kebab case, as the record's own events may be.
    unnamed = {k: v for k, v in event.items() if k != "hook_event_name"}
    code, out = sagemem("hook", "fake", "before-prompt", input=json.dumps({**unnamed, "session_id": "f-2"}))
    assert code == 0 and "project_studio_opening.md" in json.loads(out)["answer"]["context"]
    # Its file tools are Claude Code's (`write_guard`): a write over an unread memory is refused.
    write = {"file_path": str(project / ".sagemem" / "memory" / "user_me.md"), "content": "x"}
    tool = {"hook_event_name": "PreToolUse", "session_id": "f-3", "tool_name": "Write", "tool_input": write}
    denied = hooks.handle("fake", None, json.dumps({**tool, "cwd": str(project)}))
    assert denied is not None and denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    monkeypatch.setitem(HARNESSES, "fake", FAKE._replace(write_guard=False))
    assert hooks.handle("fake", None, json.dumps({**tool, "cwd": str(project)})) is None


def test_doctor_checks_a_harness_from_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: Harness
) -> None:
    project = make_project(tmp_path / "proj")
    (project / ".git").mkdir()
    # The hooks doctor runs are other processes: there, the record comes from sitecustomize.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"from sagemem.store.harnesses import HARNESSES, Harness, HookEvent\nHARNESSES['fake'] = {FAKE!r}\n"
    )
    env = {**os.environ, "PATH": str(tmp_path / "no-bin"), "PYTHONPATH": str(site)}
    system = tmp_path / "system"

    def places() -> Places:
        return Places(
            cwd=project,
            home=Path(os.environ["HOME"]),
            env=env,
            claude_policy=system / "managed.json",
            gemini_system=system / "gemini.json",
            timeout=20,
            hook_timeout=20,
        )

    [nothing] = [f for f in doctor.diagnose(places()).findings if f.check == "installed"]
    assert nothing.message.endswith(
        "of Claude Code, Codex, Gemini CLI, dsh or Fake Agent (`sagemem install <harness>` adds them)"
    )
    monkeypatch.chdir(project)
    assert sagemem("install", "fake")[0] == 0
    report = doctor.diagnose(places())
    mine = [f for f in report.findings if f.area == "fake"]
    settings = project / ".fake" / "hooks.json"
    [resolved] = [f for f in mine if f.check == "hook"]
    assert resolved.status == OK and "the SessionStart, BeforePrompt hooks run" in resolved.message
    [ran] = [f for f in mine if f.check == "hook-run"]  # the record's prompt event, run for real
    assert ran.status == OK and ran.message == f"{settings}: the BeforePrompt hook answers a test event"
    [server] = [f for f in mine if f.check == "mcp"]
    assert server.status == OK and server.where == str(project / ".fake" / "mcp.json")
    assert not [f for f in report.findings if f.check == "installed"]
    assert [f for f in report.findings if f.status != OK and f.area == "fake"] == [], report.findings
    log = project / ".sagemem" / "memory" / ".sagemem" / hooks.HOOK_LOG
    assert not log.exists() or "fake" not in log.read_text()  # the hook knew the harness
