"""The resident process (`sagemem daemon`), as real processes: hooks handed to it answer as
hooks run in their own process do, see every change the change journal reports, and fall
back to running in their own process whenever it will not or cannot serve them.

Every test runs its resident process in a folder of its own (TMPDIR) and stops it after. The
waits below are bounds on how long a process may take to start or end, not timings: they
pass as soon as the condition holds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sagemem.agents import relay

from .memories import QUESTION, make_project

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the resident process is Linux only"
)

SESSION = {"session_id": "d1", "transcript_path": "/tmp/x.jsonl", "permission_mode": "default"}


def wait_for(condition: Callable[[], Any], seconds: float = 60.0) -> Any:
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"still not so after {seconds} s: {condition}")


class Daemon:
    """`sagemem daemon ...` as its own process, from no project folder: the installation a
    hook's process runs (an installed package, not this checkout when the tests import it
    from here), whose resident process is the one hooks reach."""

    @staticmethod
    def cli(*args: str, **env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-P", "-m", "sagemem", "daemon", *args],
            capture_output=True,
            text=True,
            cwd="/",
            env={**os.environ, **env},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def status(self) -> dict[str, Any]:
        return json.loads(self.cli("status", "--json"))

    def start(self) -> bool:
        return self.cli("start").strip() == "started"

    def stop(self) -> None:
        self.cli("stop")

    def socket(self) -> str:
        return str(self.status()["socket"])


daemon = Daemon()


@pytest.fixture
def run_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder of this test's for the resident process's socket (short: a socket's path has
    at most 107 bytes), with hooks allowed to use one."""
    folder = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setenv("SAGEMEM_DAEMON", "on")
    try:
        yield folder
    finally:
        daemon.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def resident(run_dir: Path) -> dict[str, Any]:
    """A resident process serving this installation, ready."""
    assert daemon.start()
    return wait_for(lambda: daemon.status()["running"] and daemon.status())


def served() -> int:
    return int(daemon.status()["hooks"])


def hook(project: Path, event: dict[str, Any], **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        input=json.dumps({**SESSION, "cwd": str(project), **event}),
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, **env},
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == ""
    return done.stdout


def prompt(project: Path, text: str, session: str = "d1", **env: str) -> str:
    """The context a prompt brings (a session injects a snippet once: a new `session` for
    the same snippet again)."""
    out = hook(project, {"hook_event_name": "UserPromptSubmit", "prompt": text, "session_id": session}, **env)
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


def session(project: Path, **env: str) -> list[str]:
    """A session's hooks: its start, prompts, a Read, an Edit the guard allows, a stale Write
    it denies, the Write's aftermath."""
    memory = project / ".sagemem" / "memory"
    opening = memory / "project_studio_opening.md"
    outs = [hook(project, {"hook_event_name": "SessionStart", "source": "startup"}, **env)]
    outs.append(hook(project, {"hook_event_name": "UserPromptSubmit", "prompt": QUESTION}, **env))
    outs.append(hook(project, {"hook_event_name": "UserPromptSubmit", "prompt": "周一晚上排课吗？"}, **env))
    read = {"tool_name": "Read", "tool_input": {"file_path": str(opening)}}
    outs.append(hook(project, {"hook_event_name": "PostToolUse", **read}, **env))
    edit = {"file_path": str(opening), "old_string": "five years", "new_string": "six years"}
    outs.append(
        hook(project, {"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": edit}, **env)
    )
    write = {"file_path": str(memory / "user_me.md"), "content": "---\n---\nnew\n"}
    outs.append(
        hook(project, {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": write}, **env)
    )
    new = memory / "project_costumes.md"
    new.write_text(
        "---\ndescription: costumes for the spring show are rented from Ada\n---\n\nAda, deposit 200.\n"
    )
    after = {"tool_name": "Write", "tool_input": {"file_path": str(new)}}
    outs.append(hook(project, {"hook_event_name": "PostToolUse", **after}, **env))
    outs.append(
        hook(project, {"hook_event_name": "UserPromptSubmit", "prompt": "who rents us the costumes?"}, **env)
    )
    return [out.replace(str(project), "<project>") for out in outs]


def test_hooks_through_the_resident_process_answer_as_in_their_own_process(
    tmp_path: Path, resident: dict[str, Any]
) -> None:
    alone, warm = make_project(tmp_path / "alone"), make_project(tmp_path / "warm")
    expected = session(alone, SAGEMEM_DAEMON="off")
    before = served()
    assert session(warm) == expected
    assert served() == before + len(expected)
    assert "Ada, deposit 200" in expected[-1] and "月租" not in expected[1]
    assert "permissionDecision" in expected[5] and expected[4] == ""
    for name in ("MEMORY.md", "project_costumes.md"):
        assert (warm / ".sagemem" / "memory" / name).read_bytes() == (
            alone / ".sagemem" / "memory" / name
        ).read_bytes()
    assert str(warm / ".sagemem" / "memory") in daemon.status()["watched"]


def test_every_change_is_seen_by_the_next_hook(tmp_path: Path, resident: dict[str, Any]) -> None:
    """Changes made the moment before a prompt, in every way an editor or a shell makes them,
    are in that prompt's answer: the journal is drained before a hook runs, and a spare
    forked before the change is not used."""
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    prompt(project, "hello")  # the folder is watched from now on
    wait_for(lambda: str(memory) in daemon.status()["watched"])
    lease = memory / "project_studio_opening.md"

    asked = iter(range(100))

    def ask() -> str:
        return prompt(project, QUESTION, session=f"s{next(asked)}")

    assert "five years" in ask()
    lease.write_text(lease.read_text().replace("five years", "nine years"))  # in place
    assert "nine years" in ask()
    swap = memory / ".project_studio_opening.md.swp"
    swap.write_text(lease.read_text().replace("nine years", "three years"))
    os.replace(swap, lease)  # an editor's save: a new file renamed over the old one
    assert "three years" in ask()
    os.rename(lease, memory / "project_new_lease.md")
    out = ask()
    assert "project_new_lease.md" in out and "project_studio_opening.md" not in out
    os.unlink(memory / "project_new_lease.md")
    assert "three years" not in ask()
    (memory / "project_lease_again.md").write_text(
        "---\ndescription: the studio lease starts in March, rent 2,400 a month\n---\n\nRent 2,400.\n"
    )
    assert "Rent 2,400" in ask()
    status = daemon.status()
    assert status["journal"] and status["hooks"] >= 7


def test_a_spare_runs_a_hook_when_nothing_changed_and_never_after_a_change(
    tmp_path: Path, resident: dict[str, Any]
) -> None:
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    prompt(project, "hello")
    wait_for(lambda: daemon.status()["spare"])
    spared = daemon.status()["hooks_by_spare"]
    assert "five years" in prompt(project, QUESTION)
    assert daemon.status()["hooks_by_spare"] == spared + 1
    wait_for(lambda: daemon.status()["spare"])
    lease = memory / "project_studio_opening.md"
    lease.write_text(lease.read_text().replace("five years", "seven years"))
    assert "seven years" in prompt(project, QUESTION, session="again")
    assert daemon.status()["hooks_by_spare"] == spared + 1


def test_the_first_hook_starts_one_and_the_next_hooks_use_it(tmp_path: Path, run_dir: Path) -> None:
    project = make_project(tmp_path / "proj")
    assert not daemon.status()["running"]
    assert "five years" in prompt(project, QUESTION)  # in its own process, starting one
    wait_for(lambda: daemon.status()["running"])
    assert "Contemporary" in prompt(project, "which classes start the second week?", session="d2")
    assert served() == 1


def test_off_means_no_resident_process(tmp_path: Path, run_dir: Path) -> None:
    project = make_project(tmp_path / "proj")
    assert "five years" in prompt(project, QUESTION, SAGEMEM_DAEMON="off")
    assert not (run_dir / f"sagemem-{os.getuid()}").exists()
    assert daemon.cli("start", SAGEMEM_DAEMON="off").startswith("not started")


def test_a_sandboxed_hook_runs_in_its_own_process(tmp_path: Path, resident: dict[str, Any]) -> None:
    """A process under no_new_privs (a sandbox's mark) is not served: its hook runs inside it."""
    project = make_project(tmp_path / "proj")
    before = served()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ctypes, os, sys; ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); "
            "os.execv(sys.executable, [sys.executable, '-m', 'sagemem', 'hook', 'claude-code'])",
        ],
        input=json.dumps(
            {**SESSION, "cwd": str(project), "hook_event_name": "UserPromptSubmit", "prompt": QUESTION}
        ),
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert "five years" in done.stdout
    assert served() == before and daemon.status()["running"]


def test_garbage_on_the_socket_is_refused_and_it_serves_on(tmp_path: Path, resident: dict[str, Any]) -> None:
    path = daemon.socket()
    bad = [
        b"",
        b"\x00\x00\x00\x05hello",
        b"\xff\xff\xff\xff" + b"x" * 100,  # longer than any request may be
        relay.frame(b"not marshal"),
        relay.frame(__import__("marshal").dumps((99, "status"))),
        relay.frame(__import__("marshal").dumps((relay.PROTOCOL, ["sagemem", "init"], "/", {}, 0o22))),
        relay.frame(__import__("marshal").dumps((relay.PROTOCOL, ["sagemem", "hook"], "/", {"A": 1}, 0o22))),
    ]
    for data in bad:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(path)
            if data:
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            assert conn.recv(16) == b""  # closed without a word: no "ready"
    project = make_project(tmp_path / "proj")
    before = served()
    assert "five years" in prompt(project, QUESTION)
    assert served() == before + 1


def test_a_go_without_the_streams_is_refused(tmp_path: Path, resident: dict[str, Any]) -> None:
    import marshal

    request = marshal.dumps((relay.PROTOCOL, ["sagemem", "hook", "claude-code"], "/", {}, 0o22))
    for go in (relay.GO, b"x"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(daemon.socket())
            conn.sendall(relay.frame(request))
            assert conn.recv(1) == relay.READY
            conn.sendall(go)
            assert conn.recv(16) == b""
    assert served() == 0


def test_a_killed_hook_process_ends_its_hook(tmp_path: Path, resident: dict[str, Any]) -> None:
    """A harness that kills a hook on its deadline ends the hook the resident process runs."""
    project = make_project(tmp_path / "proj")
    before = served()
    waiting = subprocess.Popen(  # its stdin stays open: the hook waits for its event
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=project,
    )
    try:
        wait_for(lambda: served() == before + 1 and daemon.status()["hooks_running"] == 1)
        waiting.send_signal(signal.SIGKILL)
        waiting.wait(timeout=60)
        wait_for(lambda: daemon.status()["hooks_running"] == 0)
    finally:
        waiting.kill()
        assert waiting.stdin is not None and waiting.stdout is not None
        waiting.stdin.close()
        waiting.stdout.close()
    assert "five years" in prompt(project, QUESTION)


def test_a_resident_process_that_never_answers_costs_one_wait(tmp_path: Path, run_dir: Path) -> None:
    """Something listening on the socket that never says "ready": the hook runs itself."""
    folder = run_dir / f"sagemem-{os.getuid()}"
    folder.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wedged:
        wedged.bind(daemon.socket())
        wedged.listen(8)  # accepts into its backlog, never reads
        project = make_project(tmp_path / "proj")
        assert "five years" in prompt(project, QUESTION)


def test_a_socket_folder_others_may_enter_is_not_used(tmp_path: Path, run_dir: Path) -> None:
    folder = run_dir / f"sagemem-{os.getuid()}"
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    assert not daemon.start()
    assert "five years" in prompt(make_project(tmp_path / "proj"), QUESTION)
    assert not daemon.status()["running"] and not list(folder.iterdir())


def test_the_cli_starts_reports_and_stops_it(tmp_path: Path, run_dir: Path) -> None:
    cli = daemon.cli
    assert json.loads(cli("status", "--json"))["running"] is False
    assert cli("start").strip() == "started"
    found = wait_for(lambda: json.loads(cli("--json"))["running"] and json.loads(cli("--json")))
    assert found["pid"] > 0 and found["journal"] is True and found["hooks"] == 0
    assert "running, pid" in cli("status") and cli("start").strip() == "already running"
    assert cli("stop").strip() == "stopped"
    assert json.loads(cli("status", "--json"))["running"] is False
    assert cli("stop").strip() == "not running"


def test_an_upgrade_in_place_ends_it(tmp_path: Path, run_dir: Path) -> None:
    """The package's files change under a running resident process (pip upgraded it): the
    next hook is refused and runs in its own process, with the new code, and the old resident
    process ends."""
    import sagemem

    copy = tmp_path / "site"
    shutil.copytree(
        Path(sagemem.__file__).parent, copy / "sagemem", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {**os.environ, "PYTHONPATH": str(copy)}
    project = make_project(tmp_path / "proj")

    def status() -> dict[str, Any]:
        code = "import json, sagemem.agents.daemon as d; print(json.dumps(d.status()))"
        out = subprocess.run(
            [sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)

    assert not status()["running"]
    subprocess.run(  # not from this folder: `-m` would find the package here first
        [sys.executable, "-m", "sagemem", "daemon", "start"],
        env=env,
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    try:
        wait_for(lambda: status()["running"])
        assert "five years" in prompt(project, QUESTION, PYTHONPATH=str(copy))
        assert status()["hooks"] == 1
        stamp = time.time() + 5
        os.utime(copy / "sagemem" / "search" / "inject.py", (stamp, stamp))
        assert "Contemporary" in prompt(
            project, "which classes start the second week?", "d2", PYTHONPATH=str(copy)
        )
        wait_for(lambda: not status()["running"])
    finally:
        subprocess.run(
            [sys.executable, "-m", "sagemem", "daemon", "stop"], env=env, capture_output=True, cwd=tmp_path
        )
