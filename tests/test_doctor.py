"""`sagemem doctor`: fake harness settings in a fake HOME, real hook and MCP processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.agents import doctor
from sagemem.agents.doctor import OK, PROBLEM, UNKNOWN, Finding, Hook, Places, ThisSagemem

from .memories import make_project

PYTHON_SAGEMEM = [sys.executable, "-m", "sagemem"]
# Recorded from the real Codex 0.171 (`codex app-server`, hooks/list): its own currentHash for
# sagemem's hooks as `install` writes them, for a UserPromptSubmit group with a matcher (which
# Codex leaves out), and for a handler with no timeout (600 s).
RECORDED = [
    (
        "SessionStart",
        "startup|resume|clear",
        "sagemem hook codex SessionStart",
        10,
        "8c185d079a92062bf06f0b7b0bd2685",
    ),
    ("UserPromptSubmit", None, "sagemem hook codex UserPromptSubmit", 10, "7f900aed2f7051591ccb1d1ab10be6c"),
    (
        "UserPromptSubmit",
        "anything",
        "sagemem hook codex UserPromptSubmit",
        10,
        "7f900aed2f7051591ccb1d1ab10be6c",
    ),
    ("SessionStart", None, "sagemem hook codex SessionStart", None, "ba2757f2e9a93d7667abb08665e8a28"),
    (
        "SessionStart",
        None,
        "sh /work/shared/tools/marker_hook.sh MARK-PERSIST",
        60,
        "98b5f00dd6b504c572416c70475f8d4",
    ),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    MemoryStore(root / ".sagemem" / "memory").rebuild_index()  # a healthy memory
    (root / ".git").mkdir()  # a repository's root: where Codex and Claude Code anchor a project
    return root


def home() -> Path:
    return Path(os.environ["HOME"])


def places(project: Path, this: Path | None = None, **env: str) -> Places:
    """The real environment (HOME already isolated), no `codex` on PATH unless given, and
    system settings files of the test's own. `this`: a test's program that doctor is to take
    for its own sagemem (else it is this installation's, the only one doctor runs)."""
    environment = {**os.environ, "PATH": str(project.parent / "no-bin"), **env}
    own = (
        {} if this is None else {"sagemem": ThisSagemem(sys.executable, frozenset({os.path.realpath(this)}))}
    )
    return Places(
        **own,
        cwd=project,
        home=home(),
        env=environment,
        claude_policy=project.parent / "system" / "managed-settings.json",
        gemini_system=project.parent / "system" / "gemini-settings.json",
        timeout=20,
        hook_timeout=20,
    )


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def hooks_file(harness: str, words: list[str] | str, **handler: object) -> dict:
    """Settings with sagemem's prompt hook (as `install` writes it) running `words`."""
    event = doctor.PROMPT_EVENTS[harness]
    line = words if isinstance(words, str) else shlex.join([*words, "hook", harness, event])
    matcher = {"gemini": {"matcher": "*"}}.get(harness, {})
    entry = {"type": "command", "command": line, "timeout": 10_000 if harness == "gemini" else 10, **handler}
    return {"hooks": {event: [{**matcher, "hooks": [entry]}]}}


def script(path: Path, body: str) -> Path:
    write(path, body)
    path.chmod(0o755)
    return path


def found(report: doctor.Report, check: str, status: str | None = None) -> list[Finding]:
    return [f for f in report.findings if f.check == check and (status is None or f.status == status)]


# -- hooks ----------------------------------------------------------------------------------------


def test_the_real_hook_passes_and_writes_no_session_ledger(project: Path) -> None:
    settings = write(project / ".claude" / "settings.json", hooks_file("claude-code", PYTHON_SAGEMEM))
    report = doctor.diagnose(places(project))
    [resolved] = found(report, "hook")
    assert resolved.status == OK and sys.executable in resolved.message
    [ran] = found(report, "hook-run")
    assert ran.status == OK and ran.where == str(settings) and "answers a test event" in ran.message
    state = project / ".sagemem" / "memory" / ".sagemem"
    assert not list(state.glob("sessions/*")) and not (state / "hook.log").exists()
    assert report.ok


def test_a_hook_whose_program_does_not_exist_is_a_problem_with_its_fix(project: Path) -> None:
    missing = str(project.parent / "gone" / "bin" / "sagemem")
    write(project / ".claude" / "settings.json", hooks_file("claude-code", [missing]))
    report = doctor.diagnose(places(project))
    [problem] = found(report, "hook", PROBLEM)
    assert missing in problem.message and "does not exist" in problem.message
    assert problem.fix.endswith("install claude-code")  # install rewrites its own entry
    assert not found(report, "hook-run") and not report.ok


def test_a_bare_name_not_on_path_and_a_users_own_handler(project: Path) -> None:
    settings = hooks_file("codex", ["sagemem"])
    settings["hooks"]["UserPromptSubmit"][0]["matcher"] = "theirs"  # not install's: theirs to edit
    write(project / ".codex" / "hooks.json", settings)
    [problem] = found(doctor.diagnose(places(project)), "hook", PROBLEM)
    assert "is not on PATH" in problem.message
    assert problem.fix == f"edit {project / '.codex' / 'hooks.json'}: hooks.UserPromptSubmit"


@pytest.mark.parametrize(
    "body, said",
    [
        ("#!/bin/sh\necho 'Traceback: boom' >&2\nexit 1\n", "exited with 1 on a test event: Traceback: boom"),
        ("#!/bin/sh\necho 'hello there'\n", "not one JSON object"),
        ('#!/bin/sh\necho \'{"a": 1}{"b": 2}\'\n', "not one JSON object"),
    ],
)
def test_a_hook_that_fails_or_prints_garbage_is_a_problem(project: Path, body: str, said: str) -> None:
    fake = script(project.parent / "bin" / "sagemem", body)
    write(project / ".gemini" / "settings.json", hooks_file("gemini", [str(fake)]))
    [problem] = found(doctor.diagnose(places(project, fake)), "hook-run", PROBLEM)
    assert said in problem.message
    assert problem.fix.startswith("run it by hand to see why: printf '%s' ") and str(fake) in problem.fix


def test_a_hook_that_hangs_is_cut_off_with_everything_it_started(project: Path) -> None:
    fake = script(project.parent / "bin" / "sagemem", "#!/bin/sh\n/bin/sleep 300 &\n/bin/sleep 300\n")
    write(project / ".claude" / "settings.json", hooks_file("claude-code", [str(fake)], timeout=1))
    [problem] = found(doctor.diagnose(places(project, fake)), "hook-run", PROBLEM)
    assert "did not answer a test event within 1 s (the harness waits 1 s)" in problem.message


def test_only_lines_sagemem_writes_are_run(project: Path) -> None:
    marker = project.parent / "ran"
    line = f"sagemem hook claude-code UserPromptSubmit; touch {marker}"
    write(project / ".claude" / "settings.json", hooks_file("claude-code", line))
    report = doctor.diagnose(places(project))
    [unknown] = found(report, "hook", UNKNOWN)
    assert "not a line sagemem writes" in unknown.message
    assert not marker.exists() and report.ok


def test_a_program_found_only_through_the_active_virtual_env(project: Path) -> None:
    venv = project.parent / "venv"
    fake = script(venv / "bin" / "sagemem", "#!/bin/sh\nexit 0\n")
    write(project / ".claude" / "settings.json", hooks_file("claude-code", ["sagemem"]))
    active = places(project, fake, PATH=f"{fake.parent}{os.pathsep}/usr/bin", VIRTUAL_ENV=str(venv))
    [problem] = found(doctor.diagnose(active), "hook", PROBLEM)
    assert f"found only because the virtual environment {venv} is active" in problem.message
    assert "writes the absolute path" in problem.fix
    elsewhere = places(project, fake, PATH=str(fake.parent))  # on PATH by itself: fine
    assert found(doctor.diagnose(elsewhere), "hook", PROBLEM) == []


# -- MCP entries ------------------------------------------------------------------------------------


def test_a_good_mcp_entry_starts_and_answers(project: Path) -> None:
    server = {"command": sys.executable, "args": ["-m", "sagemem", "mcp"]}
    write(project / ".mcp.json", {"mcpServers": {"sagemem": server}})
    report = doctor.diagnose(places(project))
    [ok] = found(report, "mcp", OK)
    assert "starts and answers initialize" in ok.message and ok.where == str(project / ".mcp.json")
    assert report.ok


def test_an_mcp_entry_runs_without_the_mcp_package(project: Path) -> None:
    """A sagemem whose Python cannot import mcp (the import is blocked in the shim): the
    server needs no package beyond sagemem, so it starts and answers."""
    shim = script(
        project.parent / "bin" / "sagemem",
        f"#!{sys.executable}\nimport sys\nsys.modules['mcp'] = None\nsys.modules['pydantic'] = None\n"
        "from sagemem.__main__ import main\nmain()\n",
    )
    write(
        home() / ".gemini" / "settings.json",
        {"mcpServers": {"sagemem": {"command": str(shim), "args": ["mcp"]}}},
    )
    [ok] = found(doctor.diagnose(places(project, shim)), "mcp", OK)
    assert "starts and answers initialize (sagemem" in ok.message


def test_an_mcp_server_starts_before_any_memory_and_the_memory_finding_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    server = {"command": sys.executable, "args": ["-m", "sagemem", "mcp"]}
    write(empty / ".mcp.json", {"mcpServers": {"sagemem": server}})
    report = doctor.diagnose(places(empty))
    assert found(report, "mcp", OK) and not found(report, "mcp", PROBLEM)
    assert any("does not exist" in f.message for f in report.findings if f.area == "memory")


def test_two_mcp_entries_for_different_memories_are_each_started(project: Path, tmp_path: Path) -> None:
    """Same command, another SAGEMEM_DIR: another server, started and judged on its own."""
    server = {"command": sys.executable, "args": ["-m", "sagemem", "mcp"]}
    other = {**server, "env": {"SAGEMEM_DIR": str(tmp_path / "nowhere")}}
    write(project / ".mcp.json", {"mcpServers": {"sagemem": server}})
    write(home() / ".gemini" / "settings.json", {"mcpServers": {"sagemem": other}})
    report = doctor.diagnose(places(project))
    judged = {f.where for f in found(report, "mcp", OK)}
    assert judged == {str(project / ".mcp.json"), str(home() / ".gemini" / "settings.json")}


def test_the_interpreter_of_an_env_shebang_with_options(tmp_path: Path) -> None:
    program = script(tmp_path / "bin" / "sagemem", "#!/usr/bin/env -S python3 -u\nprint()\n")
    python = script(tmp_path / "harness-bin" / "python3", "#!/bin/sh\n")
    assert doctor.interpreter(program, str(python.parent)) == str(python)


def test_an_mcp_server_that_never_answers_is_cut_off(project: Path) -> None:
    fake = script(project.parent / "bin" / "sagemem", "#!/bin/sh\n/bin/sleep 300\n")
    write(project / ".mcp.json", {"mcpServers": {"sagemem": {"command": str(fake), "args": ["mcp"]}}})
    quick = Places(**{**places(project, fake).__dict__, "timeout": 1})
    [problem] = found(doctor.diagnose(quick), "mcp", PROBLEM)
    assert "no answer to initialize within 1 s" in problem.message


def test_an_mcp_entry_of_another_form_is_not_started(project: Path) -> None:
    marker = project.parent / "ran"
    code = f"open({str(marker)!r}, 'w'); import sys; sys.stderr.write('needs the mcp package'); sys.exit(1)"
    write(
        project / ".mcp.json", {"mcpServers": {"sagemem": {"command": sys.executable, "args": ["-c", code]}}}
    )
    [unknown] = found(doctor.diagnose(places(project)), "mcp", UNKNOWN)
    assert "not an entry sagemem writes" in unknown.message and not marker.exists()


# -- Codex ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("event, matcher, line, timeout, prefix", RECORDED)
def test_the_codex_hash_is_the_one_codex_computes(
    event: str, matcher: str | None, line: str, timeout: int | None, prefix: str
) -> None:
    handler = {"type": "command", "command": line, **({"timeout": timeout} if timeout else {})}
    hook = Hook("codex", "project", Path("/p/.codex/hooks.json"), event, 0, 0, matcher, handler)
    assert doctor.codex_hash(hook).startswith(f"sha256:{prefix}")


def codex_setup(
    project: Path, trust: str | None, state: dict[str, object] | None = None, extra: str = ""
) -> Path:
    settings = write(project / ".codex" / "hooks.json", hooks_file("codex", PYTHON_SAGEMEM))
    lines = [f"[projects.{json.dumps(str(project))}]", f'trust_level = "{trust}"'] if trust else []
    for key, values in (state or {}).items():
        lines.append(f"[hooks.state.{json.dumps(key)}]")
        lines += [f"{name} = {json.dumps(value)}" for name, value in values.items()]  # type: ignore[union-attr]
    write(home() / ".codex" / "config.toml", "\n".join([extra, *lines]) + "\n")
    return settings


def prompt_hook(settings: Path) -> Hook:
    [hook] = doctor.hooks_in("codex", "project", settings, json.loads(settings.read_text()))
    return hook


def test_codex_trust_from_config_toml(project: Path) -> None:
    key = f"{project}/.codex/hooks.json:user_prompt_submit:0:0"
    settings = codex_setup(project, "trusted")
    [untrusted] = found(doctor.diagnose(places(project)), "trust")
    assert (
        untrusted.status == PROBLEM and "not trusted yet" in untrusted.message and "/hooks" in untrusted.fix
    )
    assert "Codex 0.171's rules: `codex` is not on PATH" in untrusted.message
    codex_setup(project, "trusted", {key: {"trusted_hash": doctor.codex_hash(prompt_hook(settings))}})
    assert found(doctor.diagnose(places(project)), "trust")[0].status == OK
    codex_setup(project, "trusted", {key: {"trusted_hash": "sha256:" + "0" * 64}})  # trusted, then changed
    [modified] = found(doctor.diagnose(places(project)), "trust")
    assert modified.status == PROBLEM and "changed since you trusted it" in modified.message
    trusted = doctor.codex_hash(prompt_hook(settings))
    codex_setup(project, "trusted", {key: {"trusted_hash": trusted, "enabled": False}})
    [off] = found(doctor.diagnose(places(project)), "trust")
    assert off.status == PROBLEM and "turned off" in off.message


def test_codex_project_and_feature_switches(project: Path) -> None:
    codex_setup(project, None)
    report = doctor.diagnose(places(project))
    [project_trust] = found(report, "project-trust")
    assert project_trust.status == PROBLEM and f'[projects."{project}"]' in project_trust.fix
    assert not found(report, "trust")  # Codex does not even load them: nothing to trust yet
    codex_setup(project, "trusted", extra="[features]\nhooks = false\n")
    [feature] = found(doctor.diagnose(places(project)), "feature")
    assert feature.status == PROBLEM and feature.fix == "codex features enable hooks"


def fake_codex(folder: Path, listing: object, *, hang: bool = False) -> Path:
    """A `codex` whose app-server answers initialize and hooks/list with `listing`."""
    body = f"""#!{sys.executable}
import json, sys, time
if {hang!r}:
    time.sleep(300)
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    listing = json.loads({json.dumps(json.dumps(listing))})
    result = {{"hooks/list": {{"data": listing}}}}.get(message["method"], {{}})
    print(json.dumps({{"method": "configWarning", "params": {{}}}}), flush=True)
    print(json.dumps({{"id": message["id"], "result": result}}), flush=True)
"""
    return script(folder / "codex", body)


def test_codex_app_server_is_asked_when_codex_is_on_path(project: Path) -> None:
    settings = codex_setup(project, "trusted")
    key = f"{settings}:user_prompt_submit:0:0"
    listed = [{"cwd": str(project), "hooks": [{"key": key, "trustStatus": "trusted", "enabled": True}]}]
    fake = fake_codex(project.parent / "codex-bin", listed)
    [trusted] = found(doctor.diagnose(places(project, PATH=str(fake.parent))), "trust")
    assert trusted.status == OK and "Codex 0.171's rules" not in trusted.message  # Codex's own answer


def test_a_codex_app_server_that_hangs_falls_back_to_the_formula(project: Path) -> None:
    codex_setup(project, "trusted")
    fake = fake_codex(project.parent / "codex-bin", [], hang=True)
    quick = Places(**{**places(project, PATH=str(fake.parent)).__dict__, "timeout": 1})
    [untrusted] = found(doctor.diagnose(quick), "trust")
    assert (
        untrusted.status == PROBLEM
        and "codex app-server: no answer to initialize within 1 s" in untrusted.message
    )


# -- Claude Code's switches and auto memory ---------------------------------------------------------


def test_disable_all_hooks_later_settings_win(project: Path) -> None:
    write(
        project / ".claude" / "settings.json",
        {**hooks_file("claude-code", PYTHON_SAGEMEM), "disableAllHooks": True},
    )
    [problem] = found(doctor.diagnose(places(project)), "hooks-disabled")
    assert problem.where == str(project / ".claude" / "settings.json") and "disableAllHooks" in problem.fix
    write(home() / ".claude" / "settings.json", {"disableAllHooks": True})
    write(
        project / ".claude" / "settings.json",
        {**hooks_file("claude-code", PYTHON_SAGEMEM), "disableAllHooks": False},
    )
    assert found(doctor.diagnose(places(project)), "hooks-disabled") == []
    write(project.parent / "system" / "managed-settings.json", {"allowManagedHooksOnly": True})
    [policy] = found(doctor.diagnose(places(project)), "hooks-disabled")
    assert "allowManagedHooksOnly" in policy.message


@pytest.mark.parametrize(
    "user, local, env, on",
    [
        (None, None, {}, True),
        ({"autoMemoryEnabled": False}, None, {}, False),
        ({"autoMemoryEnabled": False}, {"autoMemoryEnabled": True}, {}, True),
        (None, None, {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": " Yes "}, False),
        ({"autoMemoryEnabled": False}, None, {"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"}, True),
        (None, None, {"CLAUDE_CODE_SIMPLE": "1"}, False),
    ],
)
def test_claude_auto_memory_on_or_off(
    project: Path, user: dict | None, local: dict | None, env: dict, on: bool
) -> None:
    if user:
        write(home() / ".claude" / "settings.json", user)
    if local:
        write(project / ".claude" / "settings.local.json", local)
    [finding] = [doctor.claude_auto_memory(places(project, **env))]
    assert finding.status == "info" and f"auto memory is {'on' if on else 'off'} here" in finding.message


def test_claude_auto_memory_folder(project: Path, tmp_path: Path) -> None:
    slug = doctor.claude_slug(str(project))
    assert doctor.claude_memory_dir(places(project)) == home() / ".claude" / "projects" / slug / "memory"
    assert (
        doctor.claude_memory_dir(places(project / "src")) == home() / ".claude" / "projects" / slug / "memory"
    )
    write(project / ".claude" / "settings.json", {"autoMemoryDirectory": "/ignored/in/project"})
    write(home() / ".claude" / "settings.json", {"autoMemoryDirectory": "~/notes/auto"})
    assert doctor.claude_memory_dir(places(project)) == home() / "notes" / "auto"
    moved = places(project, CLAUDE_CONFIG_DIR=str(tmp_path / "cc"))
    assert doctor.claude_memory_dir(moved) == tmp_path / "cc" / "projects" / slug / "memory"


def test_a_linked_worktree_shares_its_main_checkouts_auto_memory(tmp_path: Path) -> None:
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        ["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"],
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@x",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@x",
        },
    )
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    assert doctor.git_main_root(tmp_path / "wt") == main.resolve()


@pytest.mark.parametrize(
    "path, slug",
    [  # both recorded from the folders the real Claude Code 2.1.197 made
        ("/tmp/research-doctor/cc_A.b_c d+é~x/proj", "-tmp-research-doctor-cc-A-b-c-d---x-proj"),
        (
            "/tmp/research-doctor/ccs/" + "x" * 120 + "/" + "y" * 100,
            "-tmp-research-doctor-ccs-" + "x" * 120 + "-" + "y" * 54 + "-q11aky",
        ),
        ("/home/u/😀", "-home-u---"),  # one character, two UTF-16 units
    ],
)
def test_claude_slug(path: str, slug: str) -> None:
    assert doctor.claude_slug(path) == slug


# -- Gemini ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rules, env, trusted",
    [
        ({}, {}, None),
        ({"{parent}": "TRUST_FOLDER"}, {}, True),
        ({"{parent}": "TRUST_FOLDER", "{project}": "DO_NOT_TRUST"}, {}, False),
        ({"{project}/x": "TRUST_PARENT"}, {}, True),
        ({"{project}": "DO_NOT_TRUST"}, {"GEMINI_CLI_TRUST_WORKSPACE": "true"}, True),
    ],
)
def test_gemini_folder_trust(project: Path, rules: dict, env: dict, trusted: bool | None) -> None:
    given = {k.format(parent=project.parent, project=project): v for k, v in rules.items()}
    write(home() / ".gemini" / "trustedFolders.json", given)
    assert doctor.gemini_trust(places(project, **env))[0] is trusted


def test_gemini_untrusted_project_and_hooks_config(project: Path) -> None:
    settings = write(project / ".gemini" / "settings.json", hooks_file("gemini", PYTHON_SAGEMEM))
    [untrusted] = found(doctor.diagnose(places(project)), "folder-trust")
    assert untrusted.status == PROBLEM and '"TRUST_FOLDER"' in untrusted.fix
    write(home() / ".gemini" / "trustedFolders.json", {str(project): "TRUST_FOLDER"})
    assert found(doctor.diagnose(places(project)), "folder-trust")[0].status == OK
    data = json.loads(settings.read_text())
    data["hooks"]["BeforeAgent"][0]["hooks"][0]["name"] = "sagemem"
    write(settings, {**data, "hooksConfig": {"disabled": ["sagemem"]}})
    [off] = found(doctor.diagnose(places(project)), "hooks-config")
    assert "hooksConfig.disabled lists 'sagemem'" in off.message
    write(home() / ".gemini" / "settings.json", {"hooksConfig": {"enabled": False}})
    write(settings, data)
    [all_off] = found(doctor.diagnose(places(project)), "hooks-config")
    assert "Gemini runs no hooks" in all_off.message


# -- dsh, the memory, and the command ---------------------------------------------------------------


def test_dsh_hooks_and_a_missing_bridge(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagemem.agents import dsh

    from .test_dsh import bridge_package

    dsh_home = tmp_path / "dsh-home"
    monkeypatch.setenv("DSH_HOME", str(dsh_home))
    package = bridge_package(tmp_path)
    dsh.apply(add=True, bridge=str(package))
    report = doctor.diagnose(places(project, DSH_HOME=str(dsh_home)))
    assert [f.status for f in report.findings if f.area == "dsh"].count(PROBLEM) == 0
    assert found(report, "hook-run", OK) and found(report, "mcp", OK)
    (package / "lib" / "index.js").unlink()
    [gone] = found(doctor.diagnose(places(project, DSH_HOME=str(dsh_home))), "bridge", PROBLEM)
    assert "is gone" in gone.message and dsh.BRIDGE_INSTALL in gone.fix


def test_the_memory_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    [missing] = doctor.memory_findings(places(empty))
    assert missing.status == PROBLEM and "sagemem init" in missing.fix
    assert not (home() / ".sagemem").exists()  # doctor made nothing
    project = make_project(tmp_path / "proj")
    (project / ".sagemem" / "memory" / "project_bad.md").write_text("---\nname: [unclosed\n---\n")
    [sick] = doctor.memory_findings(places(project))
    assert (
        sick.status == PROBLEM and "found by the health check" in sick.message and "sagemem check" in sick.fix
    )


def test_doctor_changes_nothing(project: Path) -> None:
    write(project / ".claude" / "settings.json", hooks_file("claude-code", PYTHON_SAGEMEM))
    codex_setup(project, None)
    write(
        project / ".mcp.json",
        {"mcpServers": {"sagemem": {"command": sys.executable, "args": ["-m", "sagemem", "mcp"]}}},
    )

    def files() -> dict[Path, bytes]:
        tracked = [*home().rglob("*"), *project.rglob("*")]
        return {p: p.read_bytes() for p in tracked if p.is_file() and ".sagemem" not in p.parts}

    before = files()
    doctor.diagnose(places(project))
    assert files() == before


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(cwd.parent / "no-bin")}
    return subprocess.run(
        [*PYTHON_SAGEMEM, "doctor", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_the_command_exit_codes_and_json(project: Path) -> None:
    write(project / ".claude" / "settings.json", hooks_file("claude-code", PYTHON_SAGEMEM))
    done = cli(project, "--json")
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert set(report) == {"ok", "problems", "unknown", "findings"} and report["ok"] is True
    assert all(set(f) == {"area", "check", "status", "message", "fix", "where"} for f in report["findings"])
    assert {f["status"] for f in report["findings"]} <= {"ok", "problem", "info", "unknown"}
    missing = str(project.parent / "gone" / "sagemem")
    write(project / ".claude" / "settings.json", hooks_file("claude-code", [missing]))
    failed = cli(project)
    assert failed.returncode == 1
    lines = failed.stdout.splitlines()
    at = next(
        i for i, line in enumerate(lines) if line.startswith("problem: claude-code: ") and missing in line
    )
    assert lines[at + 1].startswith("  fix: ") and lines[-1] == "1 problem"
