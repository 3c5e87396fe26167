"""Untrusted input that is not a state file: a project folder's own `.git` pointer, inputs
with no end, odd characters in a request, and races between two commands."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sagemem import MemoryStore
from sagemem.store.native import claude_memory_dir, git_main_root

from .test_git import git

TIMEOUT = 60


def home() -> Path:
    return Path(os.environ["HOME"])


def cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "sagemem", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
    )


def prompt(cwd: Path, text: str) -> str:
    event = {"session_id": "p1", "cwd": str(cwd), "hook_event_name": "UserPromptSubmit", "prompt": text}
    done = cli(cwd, "hook", "claude-code", "UserPromptSubmit", stdin=json.dumps(event))
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout else ""


# --- a `.git` pointer file ----------------------------------------------------------------


@pytest.fixture
def other_project(tmp_path: Path) -> Path:
    """Another project of this person's, whose Claude Code memory holds a private fact."""
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "start")
    folder = claude_memory_dir(other, home(), os.environ)
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("- [Salary](user_salary.md) — my salary\n")
    (folder / "user_salary.md").write_text(
        "---\nname: salary\ndescription: my salary and the payroll account\ntype: user\n---\n\n"
        "My salary is paid into the payroll account ending 4417.\n"
    )
    return other


def forged(tmp_path: Path, other: Path, *, gitdir: str = ".gitx", full: bool = True) -> Path:
    """A project folder (unpacked from an archive: no clone makes a `.git` file) whose `.git`
    file points at a directory of its own whose `commondir` names `other`'s repository."""
    project = tmp_path / "unpacked"
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {gitdir}\n")
    pointed = project / gitdir
    pointed.mkdir(parents=True)
    (pointed / "commondir").write_text(str(other / ".git") + "\n")
    if full:  # as convincing as a forger can make it: a HEAD, and a link back to this `.git`
        (pointed / "HEAD").write_text("ref: refs/heads/main\n")
        (pointed / "gitdir").write_text(str(project / ".git") + "\n")
    return project


@pytest.mark.parametrize("full", [False, True], ids=["pointer only", "with HEAD and gitdir"])
def test_a_forged_git_pointer_never_borrows_another_projects_memory(
    tmp_path: Path, other_project: Path, full: bool
) -> None:
    project = forged(tmp_path, other_project, full=full)
    assert git_main_root(project) == project
    theirs = claude_memory_dir(other_project, home(), os.environ)
    assert claude_memory_dir(project, home(), os.environ) != theirs
    assert "4417" not in prompt(project, "what is my salary and the payroll account?")
    assert "4417" in prompt(other_project, "what is my salary and the payroll account?")  # the rig works


def test_a_pointer_into_another_repositorys_worktrees_folder_is_not_believed(
    tmp_path: Path, other_project: Path
) -> None:
    """A real worktree of the other project exists; a forged `.git` names its folder in the
    other repository: that folder's `gitdir` names the real worktree, not this one."""
    git(other_project, "worktree", "add", "-q", str(tmp_path / "real-wt"))
    name = next((other_project / ".git" / "worktrees").iterdir()).name
    project = tmp_path / "unpacked"
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {other_project / '.git' / 'worktrees' / name}\n")
    assert git_main_root(project) == project
    assert git_main_root(tmp_path / "real-wt") == other_project.resolve()  # the real one still is


def test_install_imports_no_memory_through_a_forged_pointer(tmp_path: Path, other_project: Path) -> None:
    project = forged(tmp_path, other_project)
    MemoryStore(project / ".sagemem" / "memory").init()
    done = cli(project, "install", "claude-code", "--memory", "sagemem")
    assert done.returncode == 0, done.stderr
    held = "".join(p.read_text() for p in (project / ".sagemem" / "memory").glob("*.md"))
    assert "4417" not in held


def test_a_git_link_into_another_projects_worktree_is_not_followed(
    tmp_path: Path, other_project: Path
) -> None:
    git(other_project, "worktree", "add", "-q", str(tmp_path / "real-wt"))
    project = tmp_path / "linked"
    project.mkdir()
    (project / ".git").symlink_to(tmp_path / "real-wt" / ".git")
    assert git_main_root(project) == project
    assert "4417" not in prompt(project, "what is my salary and the payroll account?")


@pytest.mark.parametrize("unreadable", ["commondir", "gitdir"])
def test_a_pointer_file_that_cannot_be_read_leaves_the_project_as_it_is(
    tmp_path: Path, other_project: Path, unreadable: str
) -> None:
    """A pointer that is a folder names nothing: the hook still injects the user's memory."""
    project = forged(tmp_path, other_project)
    pointed = project / ".gitx" / unreadable
    pointed.unlink()
    pointed.mkdir()
    user = MemoryStore(home() / ".sagemem" / "memory")
    user.init()
    user.create(type="user", name="editor", description="The user's editor is Helix", body="Helix, not vim.")
    assert git_main_root(project) == project
    assert "Helix" in prompt(project, "which editor does the user use?")
    assert cli(project, "list").returncode == 0


# --- inputs with no end, read through the cap ----------------------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    store = MemoryStore(tmp_path / "m")
    store.init()
    store.create(type="project", name="deploy", description="How we deploy", body="make deploy")
    return store.memory_dir


def peak_kib(done: subprocess.CompletedProcess[str]) -> int:
    return int(done.stderr.rsplit("peak=", 1)[1])


def measured(args: list[str], cwd: Path, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    """`sagemem args` run in a child whose peak memory is printed on stderr as `peak=KiB`."""
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdin=sys.stdin)\n"
        "sys.stderr.write(f'peak={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')\n"
        "sys.exit(done.returncode)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, sys.executable, "-P", "-m", "sagemem", *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize("command", ["new", "update"])
def test_a_body_file_with_no_end_is_refused_after_the_cap(memory: Path, command: str) -> None:
    args = ["new", "--type", "project", "--name", "z", "--description", "d"]
    if command == "update":
        version = MemoryStore(memory).get("project_deploy.md").version
        args = ["update", "project_deploy.md", "--expected-version", version]
    done = measured(["--dir", str(memory), *args, "--body-file", "/dev/zero"], memory)
    assert done.returncode == 1
    assert "/dev/zero: is larger than 512 KiB" in done.stderr
    assert peak_kib(done) < 200_000  # read to the cap and no further (it was gigabytes)
    assert sorted(p.name for p in memory.glob("*.md")) == ["MEMORY.md", "project_deploy.md"]


def test_gigabytes_on_standard_input_are_refused_after_the_cap(memory: Path) -> None:
    version = MemoryStore(memory).get("project_deploy.md").version
    before = (memory / "project_deploy.md").read_bytes()
    feeder = subprocess.Popen(["head", "-c", str(4 * 1024**3), "/dev/zero"], stdout=subprocess.PIPE)
    try:
        done = measured(
            ["--dir", str(memory), "write", "project_deploy.md", "--expected-version", version],
            memory,
            stdin=feeder.stdout,
        )
    finally:
        feeder.kill()
        feeder.wait()
        feeder.stdout.close()  # type: ignore[union-attr]
    assert done.returncode == 1 and "standard input: is larger than 512 KiB" in done.stderr
    assert peak_kib(done) < 200_000
    assert (memory / "project_deploy.md").read_bytes() == before


# --- the MCP server answers every request --------------------------------------------------


class Wire:
    """The MCP server over real pipes, spoken to line by line."""

    def __init__(self, memory: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "sagemem", "--dir", str(memory), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ask(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
        )
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def ask(self, line: bytes) -> dict[str, Any]:
        self.send(line)
        return json.loads(self.line())

    def line(self) -> bytes:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        assert ready, "no answer"
        return self.process.stdout.readline()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream:
                stream.close()


@pytest.fixture
def wire(memory: Path) -> Iterator[Wire]:
    """A server of its own, for a test that changes the directory it serves."""
    server = Wire(memory)
    yield server
    server.close()


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    """One server for the tests whose requests depend on nothing another test did (a start
    costs seconds on a loaded machine)."""
    store = MemoryStore(tmp_path_factory.mktemp("served") / "m")
    store.init()
    store.create(type="project", name="deploy", description="How we deploy", body="make deploy")
    server = Wire(store.memory_dir)
    yield server
    server.close()


def call(request_id: int, tool: str, arguments: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments}}}}}'
    ).encode()


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("memory_search", r'{"query":"deploy \ud800"}'),
        ("memory_search", r'{"query":"\udfff\ud800 deploy"}'),
        ("memory_read", r'{"file":"project_deploy\udc80.md"}'),
        ("memory_remember", r'{"type":"project","name":"x\ud800","description":"d","body":"b\udbff"}'),
    ],
)
def test_a_lone_surrogate_in_an_argument_is_answered(reader: Wire, tool: str, arguments: str) -> None:
    answer = reader.ask(call(7, tool, arguments))
    assert answer["id"] == 7 and ("result" in answer or "error" in answer)
    assert reader.ask(call(8, "memory_search", '{"query":"deploy"}'))["id"] == 8  # and it goes on


HUGE = '{"query":"' + "deploy " * (2 * 1024 * 1024) + '"}'


@pytest.mark.parametrize(
    "line, request_id",
    [
        (call(9, "memory_search", HUGE), 9),  # the Python SDK's order: the id first
        (  # the TypeScript SDK's (Claude Code, Gemini CLI): the request, then jsonrpc and id
            f'{{"method":"tools/call","params":{{"name":"memory_search","arguments":{HUGE}}},'
            f'"jsonrpc":"2.0","id":9}}'.encode(),
            9,
        ),
        (  # a string id with an escape in it
            f'{{"jsonrpc":"2.0","id":"a\\"b5","method":"tools/call","params":{{"name":"memory_search",'
            f'"arguments":{HUGE}}}}}'.encode(),
            'a"b5',
        ),
    ],
    ids=["id first", "id last", "string id"],
)
def test_a_request_over_the_cap_is_answered_with_an_error_and_not_held(
    reader: Wire, line: bytes, request_id: object
) -> None:
    answer = reader.ask(line)
    assert answer["id"] == request_id and "over 8 MiB" in json.dumps(answer["error"])
    assert reader.ask(call(10, "memory_search", '{"query":"deploy"}'))["result"]["isError"] is False


def test_a_tools_stdin_is_not_the_protocol(memory: Path) -> None:
    """What a tool or a child would read from fd 0 is the null device, never a request."""
    from sagemem.agents import mcp_input

    read, write = os.pipe()
    os.write(write, call(1, "memory_search", '{"query":"deploy"}') + b"\n")
    os.close(write)
    lines = io.TextIOWrapper(io.BufferedReader(mcp_input.Requests(read)), encoding="utf-8")
    assert json.loads(lines.readline())["id"] == 1 and lines.readline() == ""
    lines.close()
    os.close(read)


def test_requests_sent_before_the_input_ends_are_all_answered(memory: Path) -> None:
    """A client that writes its requests and closes (a script, a pipe) gets every answer:
    the server does not stop at the end of its input while a request is still running."""
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        call(2, "memory_search", '{"query":"deploy"}'),
        call(3, "memory_list", "{}"),
        call(4, "memory_check", "{}"),
    ]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "sagemem", "--dir", str(memory), "mcp"],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=TIMEOUT,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(a["id"] for a in answers) == [1, 2, 3, 4]
    assert all("result" in a for a in answers)


NOISY_SERVER = """
import dataclasses
import sys
from sagemem.agents import mcp_server
from sagemem.store.config import locate_scopes

built = mcp_server.build


def build(memories, **options):
    server = built(memories, **options)
    tool = server.tools["memory_list"]

    def noisy(**arguments):
        print("Building prefix dict from the default dictionary ...")  # as a library may
        return tool.function(**arguments)

    server.tools["memory_list"] = dataclasses.replace(tool, function=noisy)
    return server


mcp_server.build = build
mcp_server.serve(locate_scopes(sys.argv[1]))
"""


def test_a_stray_line_on_standard_output_goes_to_stderr_not_the_protocol(memory: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-P", "-c", NOISY_SERVER, str(memory)],
        input=call(1, "memory_list", "{}") + b"\n",
        capture_output=True,
        timeout=TIMEOUT,
    )
    [answer] = [json.loads(line) for line in done.stdout.splitlines()]
    assert answer["id"] == 1 and answer["result"]["isError"] is False
    assert b"Building prefix dict" in done.stderr


# --- a saved memory whose index line could not be written is said so ----------------------

INDEX_WARNING = "sagemem: warning: "
INDEX_FIX = "`sagemem index --rebuild` writes the line"


def new_memory(memory: Path, name: str) -> list[str]:
    return [
        "--dir",
        str(memory),
        "new",
        "--type",
        "project",
        "--name",
        name,
        "--description",
        "d",
        "--body",
        "b",
    ]


@pytest.mark.parametrize("command", ["new", "remember", "update", "write"])
def test_a_memory_saved_without_its_index_line_is_said_so(memory: Path, command: str) -> None:
    version = MemoryStore(memory).get("project_deploy.md").version
    text = (memory / "project_deploy.md").read_text()
    (memory / "MEMORY.md").unlink()
    (memory / "MEMORY.md").mkdir()
    args = {
        "new": new_memory(memory, "c")[2:],
        "remember": ["remember", "--type", "project", "--name", "c", "--description", "d", "--body", "b"],
        "update": ["update", "project_deploy.md", "--expected-version", version, "--tag", "ci"],
        "write": ["write", "project_deploy.md", "--expected-version", version],
    }[command]
    done = cli(memory, "--dir", str(memory), *args, stdin=text.replace("make deploy", "make ship"))
    assert done.returncode == 0, done.stderr
    assert INDEX_WARNING in done.stderr and "MEMORY.md could not be updated" in done.stderr
    assert INDEX_FIX in done.stderr


def test_a_full_disk_that_loses_the_index_line_is_said_so(memory: Path) -> None:
    """A disk with room for the memory and not for the index: RLIMIT_FSIZE makes the second
    write fail as a full disk would (the index is longer than the limit, the memory shorter)."""
    store = MemoryStore(memory)
    for n in range(150):
        store.create(type="project", name=f"m{n}", description="a line of the index " * 6, body="b")
    size = (memory / "MEMORY.md").stat().st_size
    assert size > 16_384
    script = (
        "import resource, signal, subprocess, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))\n"
        "sys.exit(subprocess.run(sys.argv[1:]).returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, sys.executable, "-P", "-m", "sagemem", *new_memory(memory, "late")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert (memory / "project_late.md").is_file()
    assert "project_late.md" not in (memory / "MEMORY.md").read_text()
    assert INDEX_WARNING in done.stderr and INDEX_FIX in done.stderr


def test_the_mcp_server_says_what_it_warned_of(memory: Path, wire: Wire) -> None:
    (memory / "MEMORY.md").unlink()
    (memory / "MEMORY.md").mkdir()
    answer = wire.ask(
        call(3, "memory_remember", '{"type":"project","name":"c","description":"d","body":"b"}')
    )
    said = answer["result"]["structuredContent"]["warnings"]
    assert len(said) == 1 and "MEMORY.md could not be updated" in said[0] and INDEX_FIX in said[0]


def test_each_mcp_call_is_told_its_own_warning_when_calls_run_at_once(memory: Path, wire: Wire) -> None:
    """The SDK runs tool calls at once, each in a thread: each answer carries its own
    warning, and only its own."""
    (memory / "MEMORY.md").unlink()
    (memory / "MEMORY.md").mkdir()
    count = 6
    for n in range(count):
        arguments = json.dumps({"type": "project", "name": f"race{n}", "description": "d", "body": "b"})
        wire.send(call(n + 1, "memory_remember", arguments))
    answers = [json.loads(wire.line()) for _ in range(count)]
    for answer in answers:
        (said,) = answer["result"]["structuredContent"]["warnings"]
        assert said.startswith(f"project_race{answer['id'] - 1}.md was written")


# --- a version is checked even when nothing changes -----------------------------------------


def test_an_update_that_changes_nothing_still_checks_the_version(memory: Path) -> None:
    stale = "0" * 64
    done = cli(memory, "--dir", str(memory), "update", "project_deploy.md", "--expected-version", stale)
    assert done.returncode == 3 and "version conflict" in done.stderr
    assert MemoryStore(memory).conflicts() == []  # nothing was proposed: nothing to decide
    version = MemoryStore(memory).get("project_deploy.md").version
    done = cli(
        memory, "--dir", str(memory), "update", "project_deploy.md", "--expected-version", version[:12]
    )
    assert done.returncode == 0, done.stderr


# --- a model's words reach the terminal as text -------------------------------------------

OSC = "\x1b]0;owned\x07"  # sets the terminal's title; others write to its clipboard


def test_dream_show_prints_the_models_words_escaped(tmp_path: Path) -> None:
    from sagemem.dream import dream

    from .fake_openai import calls, final, serving

    store = MemoryStore(tmp_path / "m")
    store.init()
    store.create(type="project", name="deploy", description="How we deploy", body="make deploy")
    script = [
        calls(("propose_archive", {"file": "project_deploy.md", "reason": f"stale{OSC}"})),
        calls(("no_such_tool", {"file": f"x{OSC}"})),
        final(f"Done{OSC}\x1b[2J"),
    ]
    with serving(script) as server:
        manifest = dream(store, base_url=server.url, model="fake-model")
    done = cli(tmp_path, "--dir", str(store.memory_dir), "dream", "show", manifest["id"])
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert done.stdout.count("\\x1b]0;owned\\x07") >= 2  # the reason and the final words, shown as escapes


# --- the commit named for an edit a merge carried into an archived memory -----------------


def test_the_archived_changed_notice_names_the_edit_not_the_merge(tmp_path: Path) -> None:
    from .test_git import RELEASE_STEPS, clone

    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    MemoryStore(origin / ".sagemem" / "memory").init(git=True)
    git(origin, "config", "receive.denyCurrentBranch", "ignore")
    alice = MemoryStore(origin / ".sagemem" / "memory")
    alice.create(type="project", name="deploy", description="how we deploy", body=RELEASE_STEPS)
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "memory")
    bob = clone(origin, tmp_path / "bob")
    alice.archive("project_deploy.md", reason="the platform team deploys now")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "archive deploy")

    memory = bob.get("project_deploy.md")
    bob.update(memory.file, expected_version=memory.version, body=RELEASE_STEPS + "9. Tag the release.\n")
    git(bob.memory_dir, "commit", "-qam", "bob: tag after deploy")
    edit = git(bob.memory_dir, "rev-parse", "--short", "HEAD").stdout.strip()
    git(bob.memory_dir, "pull", "-q", "--no-rebase", "origin", "main")
    merge = git(bob.memory_dir, "rev-parse", "--short", "HEAD").stdout.strip()
    assert (
        git(bob.memory_dir, "log", "-1", "--format=%h", "--", "archive/project_deploy.md").stdout.strip()
        == merge
    )

    (found,) = [f for f in bob.check().findings if f.check == "archived-changed"]
    assert f"{edit} by " in found.message and merge not in found.message


# --- a move that loses a race changes nothing ---------------------------------------------


@pytest.mark.parametrize("meanwhile", ["archived", "edited", "deleted"])
def test_a_move_whose_source_changed_meanwhile_leaves_one_copy_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    from sagemem import MemorySet, SagememError
    from sagemem.store.directory import Directory

    project = tmp_path / "proj"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    source = MemoryStore(project / ".sagemem" / "memory")
    source.init()
    source.create(type="project", name="deploy", description="How we deploy", body="make deploy")
    MemoryStore(home() / ".sagemem" / "memory").init()
    path = source.memory_dir / "project_deploy.md"
    take_out = Directory.take_out

    def late(self: Directory, file: str, **kwargs: Any) -> None:
        if self.memory_dir == source.memory_dir and path.exists():  # the other command lands first
            if meanwhile == "archived":
                source.archive(file, reason="retired meanwhile")
            elif meanwhile == "edited":
                path.write_text(path.read_text() + "\nedited meanwhile\n")
            else:
                path.unlink()
        take_out(self, file, **kwargs)

    monkeypatch.setattr(Directory, "take_out", late)
    with pytest.raises(SagememError):
        MemorySet.locate(cwd=project).move("project:project_deploy.md", "user")
    target = home() / ".sagemem" / "memory"
    assert not (target / "project_deploy.md").exists()
    assert "project_deploy.md" not in (target / "MEMORY.md").read_text()
    assert source.conflicts() == [] and MemoryStore(target).conflicts() == []  # nothing to decide
    if meanwhile == "edited":
        assert "edited meanwhile" in path.read_text()
    if meanwhile == "archived":
        assert (source.memory_dir / "archive" / "project_deploy.md").is_file()
