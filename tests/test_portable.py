"""What a team commits runs on a teammate's machine: `install` on one machine (its own HOME
and its own sagemem, in a folder no PATH holds), the project cloned with git to another
whose sagemem is somewhere else, and the committed hooks and MCP entries still run there,
or say clearly what is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem.agents import install
from sagemem.store import command

from .memories import QUESTION, make_project

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the portable lines are POSIX shell")

HARNESSES = {  # the file each harness's project install writes, and its prompt event
    "claude-code": (".claude/settings.json", "UserPromptSubmit"),
    "codex": (".codex/hooks.json", "UserPromptSubmit"),
    "gemini": (".gemini/settings.json", "BeforeAgent"),
}


def machine(root: Path) -> tuple[Path, Path]:
    """A machine: its home folder, and its sagemem, the console script of a virtual
    environment of its own (its packages are this one's), which no PATH holds."""
    home = root / "home"
    home.mkdir(parents=True)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [packages] = (venv / "lib").glob("python3*/site-packages")
    ours = [p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir()]
    lines = "".join(f"import site; site.addsitedir({str(p)!r})\n" for p in ours)
    (packages / "zz_this_sagemem.pth").write_text(lines)
    script = venv / "bin" / "sagemem"
    script.write_text(f"#!{venv / 'bin' / 'python'}\nfrom sagemem.__main__ import main\nmain()\n")
    script.chmod(0o755)
    return home, script


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def env_for(home: Path, path: str = os.defpath) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SAGEMEM_", "VIRTUAL_ENV"))}
    # Hooks in their own process: a resident process would outlive the test (`test_daemon.py`).
    return {
        **keep,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": path,
        "SAGEMEM_DAEMON": "off",
    }


def committed_commands(project: Path, harness: str) -> tuple[str, dict]:
    """The prompt hook's command line, and the MCP entry, as the project's files hold them."""
    file, event = HARNESSES[harness]
    settings = json.loads((project / file).read_text())
    [hook] = [h["command"] for g in settings["hooks"][event] for h in g["hooks"]]
    servers = json.loads((project / ".mcp.json").read_text()) if harness == "claude-code" else settings
    return hook, servers.get("mcpServers", {}).get("sagemem", {})


def run_line(line: str, project: Path, env: dict[str, str], event: dict) -> subprocess.CompletedProcess[str]:
    """`line` as a harness runs a hook: through a shell, in the project, the event on stdin."""
    return subprocess.run(
        ["sh", "-c", line],
        input=json.dumps({"cwd": str(project), **event}),
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=120,
    )


def initialize(entry: dict, project: Path, env: dict[str, str]) -> dict:
    """Start the MCP entry as a harness does (no shell of its own) and ask `initialize`."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])


@pytest.fixture
def cloned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, Path]:
    """The project installed for all three harnesses on machine A and committed, cloned to
    machine B: (A's sagemem, B's clone, B's home, B's sagemem)."""
    home_a, script_a = machine(tmp_path / "a")
    project = make_project(tmp_path / "a" / "proj")
    git("init", "-q", cwd=project)
    monkeypatch.setattr(install, "sagemem_command", lambda: (str(script_a),))
    monkeypatch.setattr(command, "sagemem_command", lambda: (str(script_a),))
    for harness in HARNESSES:
        install.apply(harness, "project", add=True, cwd=project, home=home_a, env=env_for(home_a))
    git("add", "-A", cwd=project)
    git("-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "memory", cwd=project)
    home_b, script_b = machine(tmp_path / "b")
    clone = tmp_path / "b" / "proj"
    git("clone", "-q", str(project), str(clone), cwd=tmp_path)
    return script_a, clone, home_b, script_b


def test_no_file_a_team_commits_names_this_machines_paths(cloned: tuple[Path, Path, Path, Path]) -> None:
    script_a, clone, _, _ = cloned
    tracked = [name for name in git("ls-files", "-z", cwd=clone).split("\0") if name]
    settings = [name for name in tracked if not name.startswith(".sagemem/")]
    assert sorted(settings) == [
        ".claude/settings.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".mcp.json",
    ]
    for name in settings:
        text = (clone / name).read_text()
        assert str(script_a.parent.parent) not in text and "/home" not in text, name


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_on_a_machine_without_sagemem_the_hook_says_what_to_do(
    cloned: tuple[Path, Path, Path, Path], harness: str
) -> None:
    _, clone, home_b, _ = cloned
    hook, entry = committed_commands(clone, harness)
    done = run_line(hook, clone, env_for(home_b), {"hook_event_name": HARNESSES[harness][1], "prompt": "x"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"sagemem is not installed on this machine: install it, then run sagemem install {harness}"
    )
    if entry:
        failed = subprocess.run(
            [entry["command"], *entry["args"]], capture_output=True, text=True, cwd=clone, env=env_for(home_b)
        )
        assert failed.returncode == 1 and "sagemem is not installed on this machine" in failed.stderr


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_after_install_there_the_committed_hooks_and_mcp_run_its_own_sagemem(
    cloned: tuple[Path, Path, Path, Path], harness: str
) -> None:
    _, clone, home_b, script_b = cloned
    env = env_for(home_b)
    done = subprocess.run(
        [str(script_b), "install", harness], capture_output=True, text=True, cwd=clone, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert git("status", "--porcelain", cwd=clone) == ""  # the team's files are as committed
    assert os.readlink(home_b / command.LAUNCHER) == str(script_b)
    hook, entry = committed_commands(clone, harness)
    event = {"hook_event_name": HARNESSES[harness][1], "session_id": "s1", "prompt": QUESTION}
    answer = run_line(hook, clone, env, event)
    assert answer.returncode == 0, answer.stderr
    assert "lease" in answer.stdout and "studio" in answer.stdout  # the project's memory, injected
    if entry:
        assert initialize(entry, clone, env)["result"]["serverInfo"]["name"] == "sagemem"


def test_with_sagemem_on_path_the_committed_lines_need_no_install(
    cloned: tuple[Path, Path, Path, Path],
) -> None:
    _, clone, home_b, script_b = cloned
    env = env_for(home_b, f"{script_b.parent}{os.pathsep}{os.defpath}")
    hook, entry = committed_commands(clone, "claude-code")
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": QUESTION}
    answer = run_line(hook, clone, env, event)
    assert answer.returncode == 0 and "lease" in answer.stdout, answer.stderr
    assert initialize(entry, clone, env)["result"]["serverInfo"]["name"] == "sagemem"
    assert not (home_b / ".sagemem").exists()  # nothing made on the way


def test_doctor_follows_the_committed_lines_to_this_machines_sagemem(
    cloned: tuple[Path, Path, Path, Path],
) -> None:
    _, clone, home_b, script_b = cloned
    env = env_for(home_b)
    missing = subprocess.run(
        [str(script_b), "doctor", "--json"], capture_output=True, text=True, cwd=clone, env=env, timeout=300
    )
    hooks = [
        f
        for f in json.loads(missing.stdout)["findings"]
        if f["area"] == "claude-code" and f["check"] == "hook"
    ]
    assert hooks and all(f["status"] == "problem" and "is not on PATH" in f["message"] for f in hooks)
    assert all(f["fix"].endswith("install claude-code") for f in hooks)
    subprocess.run(
        [str(script_b), "install", "claude-code"], cwd=clone, env=env, capture_output=True, check=True
    )
    done = subprocess.run(
        [str(script_b), "doctor", "--json"], capture_output=True, text=True, cwd=clone, env=env, timeout=300
    )
    ours = [f for f in json.loads(done.stdout)["findings"] if f["area"] == "claude-code"]
    checks = {(f["check"], f["status"]) for f in ours}
    assert {("hook", "ok"), ("hook-run", "ok"), ("mcp", "ok")} <= checks, ours
    assert f"run {home_b / command.LAUNCHER} (this sagemem: {script_b})" in " ".join(
        f["message"] for f in ours
    )
