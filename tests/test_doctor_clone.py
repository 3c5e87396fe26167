"""`sagemem doctor` in a cloned project whose settings name programs of its own.

Doctor runs a hook line or an MCP entry only when its program is this sagemem: its own
console script, after links, `..` and `/proc` are followed, or its own Python (by the path it
was started by) with `-m sagemem`. Anything else is named, with what it resolves to, and not
run; the checks that run nothing are still made. Every program a clone ships here touches a
marker file, so a run would show.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.agents import doctor
from sagemem.agents.doctor import INFO, OK, PROBLEM, UNKNOWN, Finding
from sagemem.store.command import sagemem_command

from .memories import make_project
from .test_doctor import PYTHON_SAGEMEM, found, home, hooks_file, places, script, write

PROMPT = doctor.PROMPT_EVENTS
PACKAGE = Path("lib") / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def own_script() -> str:
    """This installation's console script, as `install` writes it."""
    program = sagemem_command()[0]
    if program == sys.executable:
        pytest.skip("this sagemem has no console script (it runs as python -m sagemem)")
    return os.path.realpath(program if os.sep in program else str(Path(sys.executable).with_name(program)))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran"


@pytest.fixture
def clone(tmp_path: Path, marker: Path) -> Path:
    """A cloned repository (memory and all) that ships a `bin/sagemem`, a `sagemem/` package,
    and a Python environment of its own (`bin/python3`, a link to this very Python, with a
    `pyvenv.cfg` that makes it import the clone's `sagemem`). Each touches `marker`."""
    root = make_project(tmp_path / "proj")
    MemoryStore(root / ".sagemem" / "memory").rebuild_index()
    (root / ".git").mkdir()
    script(root / "bin" / "sagemem", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    touch = f"open({str(marker)!r}, 'w').close()\n"
    write(root / "sagemem" / "__init__.py", "")
    write(root / "sagemem" / "__main__.py", touch)
    write(root / PACKAGE / "sagemem" / "__init__.py", "")
    write(root / PACKAGE / "sagemem" / "__main__.py", touch)
    base = Path(os.path.realpath(sys.executable)).parent
    write(root / "pyvenv.cfg", f"home = {base}\ninclude-system-site-packages = false\n")
    (root / "bin" / "python3").symlink_to(sys.executable)
    return root


def prompt_line(program: str | list[str], harness: str = "claude-code") -> str:
    words = [program] if isinstance(program, str) else program
    return shlex.join([*words, "hook", harness, PROMPT[harness]])


def declined(report: doctor.Report, check: str = "hook") -> Finding:
    """The one finding of `check` that says something was not run."""
    [finding] = [f for f in report.findings if f.check == check and f.status != OK and f.status != INFO]
    return finding


# -- every settings file doctor reads ---------------------------------------------------------------


HOOK_FILES = [
    ("claude-code", "{project}/.claude/settings.json", "workspace-trust"),
    ("claude-code", "{project}/.claude/settings.local.json", "workspace-trust"),
    ("claude-code", "{home}/.claude/settings.json", "workspace-trust"),
    ("codex", "{project}/.codex/hooks.json", "project-trust"),
    ("codex", "{home}/.codex/hooks.json", "trust"),
    ("gemini", "{project}/.gemini/settings.json", "folder-trust"),
    ("gemini", "{home}/.gemini/settings.json", "folder-trust"),
    ("dsh", "{home}/dsh/sagemem/hooks.json", "patch"),
]


@pytest.mark.parametrize("harness, where, static", HOOK_FILES)
def test_the_clones_program_in_any_hooks_file_is_named_and_not_run(
    clone: Path, marker: Path, harness: str, where: str, static: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(clone)  # as it is typed: in the clone
    settings = Path(where.format(project=clone, home=home()))
    write(settings, hooks_file(harness, prompt_line("/proc/self/cwd/bin/sagemem", harness)))
    report = doctor.diagnose(places(clone, DSH_HOME=str(home() / "dsh")))
    assert not marker.exists()
    refused = declined(report)
    assert refused.status == PROBLEM and refused.where == str(settings)
    assert f"`/proc/self/cwd/bin/sagemem` is {clone / 'bin' / 'sagemem'}" in refused.message
    assert "a program in this project, not this sagemem" in refused.message and "not run" in refused.message
    assert not found(report, "hook-run")
    assert found(report, static)  # what needs no run is still checked
    assert found(report, "memory", OK)


@pytest.mark.parametrize(
    "settings",
    [".claude/settings.json", ".codex/hooks.json", ".gemini/settings.json", ".mcp.json"],
)
def test_the_repro_through_the_command(clone: Path, marker: Path, settings: str) -> None:
    """`sagemem doctor` typed in the clone, where `/proc/self/cwd` is the clone itself."""
    shutil.rmtree(clone / "sagemem")  # else `python -m sagemem doctor` here would run the clone's
    harness = {".claude": "claude-code", ".codex": "codex", ".gemini": "gemini"}.get(settings.split("/")[0])
    if harness is None:
        mcp_settings(clone / settings, "/proc/self/cwd/bin/sagemem", ["mcp"])
    else:
        write(clone / settings, hooks_file(harness, prompt_line("/proc/self/cwd/bin/sagemem", harness)))
    done = subprocess.run(
        [*PYTHON_SAGEMEM, "doctor"],
        cwd=clone,
        env={**os.environ, "PATH": str(clone.parent / "no-bin")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not marker.exists(), done.stdout
    said = f"`/proc/self/cwd/bin/sagemem` is {clone / 'bin' / 'sagemem'}, a program in this project"
    assert done.returncode == 1 and said in done.stdout, done.stdout


MCP_FILES = [
    ("claude-code", "{project}/.mcp.json"),
    ("claude-code", "{home}/.claude.json"),
    ("gemini", "{project}/.gemini/settings.json"),
    ("gemini", "{home}/.gemini/settings.json"),
    ("codex", "{home}/.codex/config.toml"),
    ("dsh", "{home}/dsh/cordis.patch.yml"),
]


def mcp_settings(path: Path, command: str, args: list[str]) -> None:
    """A sagemem MCP entry in `path`, in that file's own format."""
    if path.suffix == ".toml":
        write(path, f"[mcp_servers.sagemem]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n")
    elif path.suffix == ".yml":
        from sagemem.agents import dsh

        row = {"id": "sagemem-mcp", "config": {"command": command, "args": args}}
        write(path, f"{dsh.BEGIN}\n- insert:\n    - {json.dumps(row)}\n{dsh.END}\n")
    else:
        write(path, {"mcpServers": {"sagemem": {"command": command, "args": args}}})


@pytest.mark.parametrize("harness, where", MCP_FILES)
def test_the_clones_program_in_any_mcp_entry_is_named_and_not_started(
    clone: Path, marker: Path, harness: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(clone)
    settings = Path(where.format(project=clone, home=home()))
    mcp_settings(settings, "/proc/self/cwd/bin/sagemem", ["mcp"])
    report = doctor.diagnose(places(clone, DSH_HOME=str(home() / "dsh")))
    assert not marker.exists()
    refused = declined(report, "mcp")
    assert refused.status == PROBLEM and refused.area == harness
    assert f"was not started: `/proc/self/cwd/bin/sagemem` is {clone / 'bin' / 'sagemem'}" in refused.message
    assert refused.fix  # what writes this sagemem's own entry


# -- every way to spell a path into the clone -------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "bin/sagemem",
        "./bin/../bin/sagemem",
        "{project}/.claude/../bin/sagemem",
        "{project}/tools/sagemem",  # a folder the clone links to its bin/
        "/proc/self/cwd/tools/../bin/sagemem",
        "/proc/self/root{project}/bin/sagemem",
        "/proc/{pid}/root{project}/bin/sagemem",
        "/proc/thread-self/cwd/bin/sagemem",
    ],
)
def test_every_spelling_of_the_clones_program_is_resolved_first(
    clone: Path, marker: Path, spelling: str
) -> None:
    (clone / "tools").symlink_to(clone / "bin")
    program = spelling.format(project=clone, pid=os.getpid())
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(program)))
    report = doctor.diagnose(places(clone))
    assert not marker.exists()
    refused = declined(report)
    assert (
        refused.status == PROBLEM
        and f"is {clone / 'bin' / 'sagemem'}, a program in this project" in refused.message
    )


def test_a_bare_name_found_through_path_in_the_clone(clone: Path, marker: Path, tmp_path: Path) -> None:
    """PATH as the harness's shell in the project reads it: a relative folder is the
    project's, and a link on PATH is followed to where it leads."""
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line("sagemem")))
    linked = tmp_path / "path-bin"
    linked.mkdir()
    (linked / "sagemem").symlink_to(clone / "bin" / "sagemem")
    for path in ("bin", str(linked), f"/proc/self/cwd/bin{os.pathsep}/usr/bin"):
        report = doctor.diagnose(places(clone, PATH=path))
        assert not marker.exists(), path
        refused = declined(report)
        assert refused.status == PROBLEM and f"is {clone / 'bin' / 'sagemem'}, a program in this project" in (
            refused.message
        ), path


def test_a_link_in_the_clone_to_another_sagemem_is_the_clones(
    clone: Path, marker: Path, tmp_path: Path
) -> None:
    """A link the project ships leads where the project says: that it leads out of the
    project now does not make it another installation."""
    other = script(tmp_path / "other-bin" / "sagemem", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    (clone / "bin" / "sagemem").unlink()
    (clone / "bin" / "sagemem").symlink_to(other)
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line("sagemem")))
    report = doctor.diagnose(places(clone, PATH=str(clone / "bin")))
    assert not marker.exists()
    refused = declined(report)
    assert refused.status == PROBLEM
    assert f"`sagemem` is {clone / 'bin' / 'sagemem'}, a program in this project" in refused.message


def test_a_link_in_the_clone_to_this_sagemem_is_this_sagemem(clone: Path, tmp_path: Path) -> None:
    """Wherever a console script is reached from, its `#!` line runs the same Python: a link
    to this sagemem's script is this sagemem, and it is run (as the real path, no shell)."""
    own = own_script()
    (clone / "bin" / "sagemem").unlink()
    (clone / "bin" / "sagemem").symlink_to(own)
    write(
        clone / ".claude" / "settings.json",
        hooks_file("claude-code", prompt_line("/proc/self/cwd/bin/sagemem")),
    )
    report = doctor.diagnose(places(clone))
    [resolved] = found(report, "hook")
    assert resolved.status == OK and f"/proc/self/cwd/bin/sagemem (this sagemem: {own})" in resolved.message
    [ran] = found(report, "hook-run")
    assert ran.status == OK and "answers a test event" in ran.message
    linked = tmp_path / "path-bin"  # the same through a link on PATH (as pipx installs)
    linked.mkdir()
    (linked / "sagemem").symlink_to(own)
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line("sagemem")))
    report = doctor.diagnose(places(clone, PATH=str(linked)))
    assert found(report, "hook-run")[0].status == OK and report.ok


# -- Pythons ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("program", ["{project}/bin/python3", "/proc/self/cwd/bin/python3", "bin/python3"])
@pytest.mark.parametrize("check", ["hook", "mcp"])
def test_a_python_in_the_clone_linked_to_this_one_is_not_this_sagemem(
    clone: Path, marker: Path, program: str, check: str
) -> None:
    """The clone's `bin/python3` is this very Python file, but started from the clone it
    reads the clone's `pyvenv.cfg` and imports the clone's `sagemem`."""
    python = program.format(project=clone)
    spelled = (
        f"`{python}` is "
        if python == str(clone / "bin" / "python3")
        else f"`{python}` is {clone}/bin/python3, "
    )
    if check == "hook":
        line = prompt_line([python, "-P", "-m", "sagemem"])
        write(clone / ".claude" / "settings.json", hooks_file("claude-code", line))
    else:
        mcp_settings(clone / ".mcp.json", python, ["-P", "-m", "sagemem", "mcp"])
    report = doctor.diagnose(places(clone))
    assert not marker.exists()
    refused = declined(report, check)
    assert refused.status == PROBLEM
    assert (
        f"{spelled}a program in this project, not this sagemem's Python ({sys.executable})" in refused.message
    )


def test_python_m_sagemem_in_a_clone_with_its_own_package(clone: Path, marker: Path) -> None:
    """This Python: without -P the harness would import the clone's `sagemem/` (a problem,
    not run); with -P it is this sagemem, and doctor runs it with -P too."""
    settings = clone / ".claude" / "settings.json"
    write(settings, hooks_file("claude-code", prompt_line(PYTHON_SAGEMEM)))
    [shadowed] = found(doctor.diagnose(places(clone)), "hook", PROBLEM)
    assert f"has its own {clone / 'sagemem'}" in shadowed.message
    write(settings, hooks_file("claude-code", prompt_line([sys.executable, "-P", "-m", "sagemem"])))
    report = doctor.diagnose(places(clone))
    assert found(report, "hook-run")[0].status == OK and not marker.exists()


def test_another_python_is_not_run(clone: Path, marker: Path, tmp_path: Path) -> None:
    """A Python outside the project that is not this one (here: one that would show it ran)."""
    other = script(tmp_path / "other-bin" / "python3", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    for words in ([str(other), "-P", "-m", "sagemem"], ["python3", "-P", "-m", "sagemem"]):
        write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(words)))
        report = doctor.diagnose(places(clone, PATH=str(other.parent)))
        assert not marker.exists()
        refused = declined(report)
        spelled = f"`{other}` is " if words[0] == str(other) else f"`python3` is {other}, "
        assert refused.status == UNKNOWN and f"{spelled}not this sagemem's Python" in refused.message
        assert report.ok  # another install may well work: doctor cannot tell, and says so


def test_a_python_outside_that_leads_into_the_clone(clone: Path, marker: Path, tmp_path: Path) -> None:
    """Named from outside the project, but the file is the project's: a problem."""
    shipped = script(clone / "tools" / "python3", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    (tmp_path / "link-bin").mkdir()
    (tmp_path / "link-bin" / "python3").symlink_to(shipped)
    line = prompt_line(["python3", "-P", "-m", "sagemem"])
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", line))
    report = doctor.diagnose(places(clone, PATH=str(tmp_path / "link-bin")))
    assert not marker.exists()
    refused = declined(report)
    assert (
        refused.status == PROBLEM
        and "a program in this project, not this sagemem's Python" in refused.message
    )


def test_this_pythons_own_file_in_another_folder_is_another_environment(clone: Path) -> None:
    """A virtual environment's Python is a link to the base Python; started as the base
    Python, it has none of the environment's packages."""
    base = os.path.realpath(sys.executable)
    if Path(base).parent == Path(sys.executable).parent:
        pytest.skip("not running in a virtual environment")
    write(
        clone / ".claude" / "settings.json",
        hooks_file("claude-code", prompt_line([base, "-P", "-m", "sagemem"])),
    )
    refused = declined(doctor.diagnose(places(clone)))
    assert refused.status == UNKNOWN and f"`{base}` is not this sagemem's Python ({sys.executable})" in (
        refused.message
    )


# -- another sagemem --------------------------------------------------------------------------------


def no_fix_runs(report: doctor.Report, *programs: Path) -> None:
    """No line of the report tells the person to run one of `programs` (a fix is what a
    person copies and pastes)."""
    for finding in report.findings:
        for program in programs:
            assert str(program) not in finding.fix, finding


def test_another_sagemem_outside_the_project_is_named_and_not_run(
    clone: Path, marker: Path, tmp_path: Path
) -> None:
    """Not run, not a problem (another install may well work), and no command that runs it:
    its place, where it leads and what its `#!` runs say whose it is."""
    venv = tmp_path / "other-env"
    other = script(venv / "bin" / "sagemem", f"#!{venv / 'bin' / 'python'}\nopen({str(marker)!r}, 'w')\n")
    linked = tmp_path / "other-bin" / "sagemem"  # as pipx links it onto PATH
    linked.parent.mkdir()
    linked.symlink_to(other)
    for line in (prompt_line("sagemem"), prompt_line(str(linked))):
        write(clone / ".claude" / "settings.json", hooks_file("claude-code", line))
        mcp_settings(home() / ".claude.json", str(linked), ["mcp"])
        report = doctor.diagnose(places(clone, PATH=str(linked.parent)))
        assert not marker.exists()
        refused = declined(report)
        spelled = f"`{linked}` is " if line.startswith(str(linked)) else f"`sagemem` is {linked}, "
        assert refused.status == UNKNOWN and f"{spelled}another sagemem than this one" in refused.message
        assert f"it leads to {other}, whose first line runs {venv / 'bin' / 'python'}" in refused.message
        assert "if that program is an installation you made" in refused.fix
        assert "check it with its own doctor; if not, do not run it" in refused.fix
        server = declined(report, "mcp")
        assert server.status == UNKNOWN and f"`{linked}` is another sagemem than this one" in server.message
        assert "check it with its own doctor" in server.fix and "claude mcp add" in server.fix
        no_fix_runs(report, other, linked)
        assert report.ok


def unpacked(tmp_path: Path, marker: Path) -> Path:
    """An archive unpacked to `zip/`: its `bin/sagemem`, `venv/bin/python3` (this Python's
    file, with a `pyvenv.cfg` and a `sagemem` of the archive's) and the project `app/`."""
    top = tmp_path / "zip"
    script(top / "bin" / "sagemem", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    write(top / "venv" / PACKAGE / "sagemem" / "__init__.py", "")
    write(top / "venv" / PACKAGE / "sagemem" / "__main__.py", f"open({str(marker)!r}, 'w').close()\n")
    base = Path(os.path.realpath(sys.executable)).parent
    write(top / "venv" / "pyvenv.cfg", f"home = {base}\ninclude-system-site-packages = false\n")
    (top / "venv" / "bin").mkdir()
    (top / "venv" / "bin" / "python3").symlink_to(sys.executable)
    app = make_project(top / "app")
    MemoryStore(app / ".sagemem" / "memory").rebuild_index()
    return app


@pytest.mark.parametrize(
    "program, leads",
    [
        ("../bin/sagemem", "bin/sagemem"),
        ("/proc/self/cwd/../bin/sagemem", "bin/sagemem"),
        ("./../venv/bin/python3 -P -m sagemem", "venv/bin/python3"),
        ("/proc/self/cwd/../venv/bin/python3 -m sagemem", "venv/bin/python3"),
    ],
)
@pytest.mark.parametrize("check", ["hook", "mcp"])
def test_a_program_reached_from_the_project_outside_it_is_the_projects(
    tmp_path: Path, marker: Path, program: str, leads: str, check: str
) -> None:
    """An archive unpacked to `zip/`, doctor run in `zip/app`: `../bin/sagemem` is the
    archive's program, though outside the project. A path relative to the project, or found
    through a relative PATH entry, came with the project whatever it leads to: a problem,
    and no fix runs it."""
    app = unpacked(tmp_path, marker)
    words = program.split()
    if check == "hook":
        write(app / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(words)))
    else:
        mcp_settings(app / ".mcp.json", words[0], [*words[1:], "mcp"])
    report = doctor.diagnose(places(app))
    assert not marker.exists()
    refused = declined(report, check)
    target = tmp_path / "zip" / leads
    assert refused.status == PROBLEM
    assert f"`{words[0]}` is {target}, reached by a path relative to this project" in refused.message
    no_fix_runs(report, target)


def test_a_program_found_through_a_relative_path_entry_outside_the_project(
    tmp_path: Path, marker: Path
) -> None:
    app = unpacked(tmp_path, marker)
    write(app / ".claude" / "settings.json", hooks_file("claude-code", prompt_line("sagemem")))
    report = doctor.diagnose(places(app, PATH=f"../bin{os.pathsep}/usr/bin"))
    assert not marker.exists()
    refused = declined(report)
    assert refused.status == PROBLEM
    assert "found through the relative PATH entry `../bin`" in refused.message
    no_fix_runs(report, tmp_path / "zip" / "bin")


def test_a_submodules_superproject_program(tmp_path: Path, marker: Path) -> None:
    """A git submodule is a git root of its own, so its superproject lies outside the
    project; `../bin/sagemem` from the submodule is the superproject's."""
    top = tmp_path / "super"
    (top / ".git" / "modules" / "sub").mkdir(parents=True)
    script(top / "bin" / "sagemem", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    sub = make_project(top / "sub")
    write(sub / ".git", "gitdir: ../.git/modules/sub\n")
    for program in ("../bin/sagemem", "/proc/self/cwd/../bin/sagemem"):
        write(sub / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(program)))
        report = doctor.diagnose(places(sub))
        assert not marker.exists()
        assert declined(report).status == PROBLEM
        no_fix_runs(report, top / "bin")


def test_the_fix_for_a_failing_hook_names_what_doctor_ran(clone: Path, tmp_path: Path) -> None:
    """`run it by hand` names this sagemem's own program, not the line's spelling of it
    (here a link in the clone, which the clone can change)."""
    own = script(tmp_path / "own-bin" / "sagemem", "#!/bin/sh\necho broken >&2\nexit 3\n")
    (clone / "bin" / "sagemem").unlink()
    (clone / "bin" / "sagemem").symlink_to(own)
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line("bin/sagemem")))
    [ran] = found(doctor.diagnose(places(clone, this=own)), "hook-run")
    assert ran.status == PROBLEM and "exited with 3" in ran.message
    assert (
        f"| {own} hook claude-code UserPromptSubmit" in ran.fix
        and "bin/sagemem hook" not in ran.fix.replace(str(own), "")
    )


def test_a_console_script_counts_only_when_it_runs_this_python(tmp_path: Path) -> None:
    """A script in an environment's bin that leads somewhere else, or whose `#!` names
    another Python, is not this sagemem; pip's `/bin/sh` form for long paths is."""
    own = own_script()
    elsewhere = script(tmp_path / "elsewhere" / "sagemem", "#!/bin/sh\nexit 0\n")
    linked = tmp_path / "venv-bin" / "sagemem"
    linked.parent.mkdir()
    linked.symlink_to(elsewhere)
    base = script(tmp_path / "base" / "sagemem", f"#!{os.path.realpath(sys.executable)}\nprint()\n")
    long = script(
        tmp_path / "long" / "sagemem",
        f"#!/bin/sh\n'''exec' {shlex.quote(sys.executable)} \"$0\" \"$@\"\n' '''\nprint()\n",
    )
    this = doctor.ThisSagemem.of(sys.executable, [own, str(linked), str(base), str(long)])
    assert this.scripts == frozenset({own, str(long)})
    if Path(os.path.realpath(sys.executable)).parent != Path(sys.executable).parent:
        assert str(base) not in this.scripts  # that #! is the base Python: another environment


# -- this sagemem, as `install` writes it -----------------------------------------------------------


def test_what_doctor_runs_for_this_sagemem_is_its_own_program_without_a_shell(clone: Path) -> None:
    """The line's words with this sagemem's real program, `-P` for a Python, and no shell."""
    own = own_script()
    (clone / "bin" / "sagemem").unlink()
    (clone / "bin" / "sagemem").symlink_to(own)
    here = places(clone)
    for words, argv in (
        (["bin/sagemem", "--dir", "m", "hook", "codex"], (own, "--dir", "m", "hook", "codex")),
        ([sys.executable, "-m", "sagemem", "mcp"], (sys.executable, "-P", "-m", "sagemem", "mcp")),
    ):
        chosen = doctor.commands.verdict(words, doctor.resolve(words[0], here), here)
        assert chosen.argv == argv if sys.version_info >= (3, 11) else chosen.argv[0] == argv[0]


def test_what_install_writes_is_run_and_answers(clone: Path, marker: Path) -> None:
    shutil.rmtree(clone / "sagemem")  # else `python -m sagemem install` here would run the clone's
    env = {**os.environ, "PATH": str(clone.parent / "no-bin")}
    for harness in ("claude-code", "codex", "gemini"):
        done = subprocess.run(
            [*PYTHON_SAGEMEM, "install", harness], cwd=clone, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    report = doctor.diagnose(places(clone))
    assert not marker.exists()
    ran = found(report, "hook-run")
    assert len(ran) == 3 and all(f.status == OK for f in ran), ran
    assert not [f for f in report.findings if f.check in ("hook", "mcp") and f.status not in (OK, INFO)]


def test_codex_on_path_in_the_project_is_not_asked(clone: Path, marker: Path) -> None:
    """`codex app-server` is Codex's own answer, but not from a `codex` the project ships."""
    shutil.rmtree(clone / "sagemem")  # else `python -m sagemem doctor` here would run the clone's
    script(clone / "bin" / "codex", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    write(
        home() / ".codex" / "config.toml", f'[projects.{json.dumps(str(clone))}]\ntrust_level = "trusted"\n'
    )
    write(clone / ".codex" / "hooks.json", hooks_file("codex", PYTHON_SAGEMEM))
    for path, how in (
        (str(clone / "bin"), "in the project"),
        ("bin", "found through the relative PATH entry `bin`"),
    ):
        done = subprocess.run(
            [*PYTHON_SAGEMEM, "doctor", "--json"],
            cwd=clone,
            env={**os.environ, "PATH": path},
            capture_output=True,
            text=True,
        )
        assert not marker.exists(), path
        report = json.loads(done.stdout)
        [trust] = [f for f in report["findings"] if f["check"] == "trust"]
        assert trust["status"] == PROBLEM and "not trusted yet" in trust["message"]
        assert f"`codex` on PATH is {clone / 'bin' / 'codex'}, {how}: not run" in trust["message"]


# -- what every child doctor starts finds on its search paths ---------------------------------------


def fake_node(folder: Path, listing: object, seen: Path) -> Path:
    """A `node` that serves `codex app-server` (answering initialize and hooks/list with
    `listing`) and notes, in `seen`, the folder it runs in and the `cwds` it was asked about."""
    body = f"""#!{sys.executable}
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "hooks/list":
        with open({str(seen)!r}, "w") as handle:
            json.dump({{"cwd": os.getcwd(), "cwds": message["params"]["cwds"]}}, handle)
    listing = json.loads({json.dumps(json.dumps(listing))})
    result = {{"hooks/list": {{"data": listing}}}}.get(message["method"], {{}})
    print(json.dumps({{"id": message["id"], "result": result}}), flush=True)
"""
    return script(folder / "node", body)


@pytest.mark.parametrize("entry", ["node_modules/.bin", "", ".", "./node_modules/../node_modules/.bin"])
def test_codex_app_server_finds_no_program_of_the_clones_through_path(
    clone: Path, marker: Path, tmp_path: Path, entry: str
) -> None:
    """Codex is an `#!/usr/bin/env node` script: with a relative (or empty) entry before
    node's folder on PATH, started in the project, `env` would run the clone's `node`. Every
    child gets PATH without such entries, and Codex is started in the home folder (the
    project goes in the request)."""
    evil = f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n"
    script(clone / "node_modules" / ".bin" / "node", evil)
    script(clone / "node", evil)  # what an empty entry, or ".", finds
    settings = write(clone / ".codex" / "hooks.json", hooks_file("codex", PYTHON_SAGEMEM))
    write(
        home() / ".codex" / "config.toml", f'[projects.{json.dumps(str(clone))}]\ntrust_level = "trusted"\n'
    )
    key = f"{settings}:user_prompt_submit:0:0"
    listed = [{"cwd": str(clone), "hooks": [{"key": key, "trustStatus": "trusted", "enabled": True}]}]
    seen = tmp_path / "seen.json"
    node = fake_node(tmp_path / "node-bin", listed, seen)
    codex = script(tmp_path / "codex-bin" / "codex", "#!/usr/bin/env node\n")
    path = os.pathsep.join([entry, str(codex.parent), str(node.parent), "/usr/bin", "/bin"])
    report = doctor.diagnose(places(clone, PATH=path))
    assert not marker.exists()
    [trust] = found(report, "trust")
    assert trust.status == OK and "Codex 0.171's rules" not in trust.message  # Codex's own answer
    asked = json.loads(seen.read_text())
    assert asked == {"cwd": str(home()), "cwds": [str(clone)]}


@pytest.mark.parametrize("entry", ["../tools", "tools", ""])
def test_a_codex_found_through_a_relative_path_entry_is_not_run(
    clone: Path, marker: Path, tmp_path: Path, entry: str
) -> None:
    """A relative PATH entry names a folder of whatever project one is in: a `codex` found
    there is not Codex's answer, wherever it leads (here `../tools`, outside the project)."""
    codex = f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n"
    for folder in (tmp_path / "tools", clone / "tools", clone):
        script(folder / "codex", codex)
    write(clone / ".codex" / "hooks.json", hooks_file("codex", PYTHON_SAGEMEM))
    write(
        home() / ".codex" / "config.toml", f'[projects.{json.dumps(str(clone))}]\ntrust_level = "trusted"\n'
    )
    report = doctor.diagnose(places(clone, PATH=f"{entry}{os.pathsep}/usr/bin"))
    assert not marker.exists()
    [trust] = found(report, "trust")
    assert trust.status == PROBLEM and "Codex 0.171's rules" in trust.message
    how = f"the relative PATH entry `{entry}`" if entry else "an empty PATH entry (the project's folder)"
    assert f"found through {how}: not run" in trust.message
    [path] = found(report, "path")  # typing `codex` here would run it: said, with no such fix
    assert path.status == PROBLEM and "`codex` here runs " in path.message
    assert not [f for f in report.findings if "start `codex`" in f.fix]


def test_codex_in_the_project_is_not_named_as_the_fix(clone: Path, marker: Path) -> None:
    """The fixes that send the person to `codex` do not, when `codex` here is the project's."""
    script(clone / "bin" / "codex", f"#!/bin/sh\n: > {shlex.quote(str(marker))}\n")
    write(clone / ".codex" / "hooks.json", hooks_file("codex", PYTHON_SAGEMEM))
    report = doctor.diagnose(places(clone, PATH=str(clone / "bin")))
    assert not marker.exists()
    [path] = found(report, "path")
    assert path.status == PROBLEM and f"`codex` here runs {clone / 'bin' / 'codex'}" in path.message
    assert not [f for f in report.findings if "start `codex`" in f.fix]


def env_recorder(folder: Path, out: Path) -> Path:
    """A program (standing in for this sagemem) that notes its search paths and answers."""
    names = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONUSERBASE")
    lines = "".join(f'printf "{n}=%s\\n" "${{{n}-unset}}" >> {shlex.quote(str(out))}\n' for n in names)
    return script(folder / "sagemem", f"#!/bin/sh\n{lines}")


def test_no_child_gets_a_relative_search_path_entry(clone: Path, tmp_path: Path) -> None:
    """Empty, relative and `/proc/self/cwd` entries of PATH, PYTHONPATH and LD_LIBRARY_PATH,
    and a relative PYTHONUSERBASE, name the folder a child runs in, the project: every child
    runs without them, and the person is told (their harness has them)."""
    out = tmp_path / "env.txt"
    own = env_recorder(tmp_path / "own-bin", out)
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(str(own))))
    loose = f"{os.pathsep}{os.pathsep}bin{os.pathsep}/proc/self/cwd/lib{os.pathsep}."  # an empty one first
    env = {
        "PATH": f"node_modules/.bin{os.pathsep}/usr/bin{loose}",
        "PYTHONPATH": f"src{os.pathsep}/opt/lib{loose}",
        "LD_LIBRARY_PATH": f"/opt/so;lib:/usr/lib{loose}",
        "PYTHONUSERBASE": ".local",  # its site-packages, from the project
    }
    report = doctor.diagnose(places(clone, this=own, **env))
    assert found(report, "hook-run")[0].status == OK
    assert out.read_text().splitlines() == [
        "PATH=/usr/bin",
        "PYTHONPATH=/opt/lib",
        "LD_LIBRARY_PATH=/opt/so:/usr/lib",
        "PYTHONUSERBASE=unset",
    ]
    told = {f.message.split(":")[0]: f.status for f in found(report, "search-path")}
    also = "`bin`, `/proc/self/cwd/lib`, `.` and an empty one"
    assert told == {
        f"PATH has the relative entries `node_modules/.bin`, {also}": INFO,
        f"PYTHONPATH has the relative entries `src`, {also}": PROBLEM,
        f"LD_LIBRARY_PATH has the relative entries `lib`, {also}": PROBLEM,
        "PYTHONUSERBASE is relative (`.local`)": PROBLEM,
    }
    out.unlink()
    doctor.diagnose(places(clone, this=own, PATH="bin", PYTHONPATH=os.pathsep, PYTHONUSERBASE="/opt/u"))
    path, *rest = out.read_text().splitlines()  # PATH unset (`sh` then sets its default)
    assert rest == ["PYTHONPATH=unset", "LD_LIBRARY_PATH=unset", "PYTHONUSERBASE=/opt/u"]
    assert path == "PATH=unset" or all(os.path.isabs(e) for e in path[5:].split(os.pathsep))


@pytest.mark.parametrize("check", ["hook", "mcp"])
def test_an_empty_pythonpath_entry_imports_nothing_of_the_clones(
    clone: Path, marker: Path, check: str
) -> None:
    """`PYTHONPATH=:/x` (an empty entry: the working directory) would make this sagemem,
    run in the clone, import the clone's `sagemem/`, even with `-P`."""
    words = [sys.executable, "-P", "-m", "sagemem"]
    if check == "hook":
        write(clone / ".claude" / "settings.json", hooks_file("claude-code", prompt_line(words)))
    else:
        mcp_settings(clone / ".mcp.json", sys.executable, [*words[1:], "mcp"])
    report = doctor.diagnose(places(clone, PYTHONPATH=f"{os.pathsep}{clone.parent / 'elsewhere'}"))
    assert not marker.exists()
    [said] = found(report, "search-path")
    assert said.status == PROBLEM and "PYTHONPATH has an empty entry" in said.message
    if check == "hook" or importlib.util.find_spec("mcp") is not None:
        ran = found(report, "hook-run") if check == "hook" else found(report, "mcp")
        assert ran[0].status == OK, ran


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's loader")
def test_an_empty_library_path_entry_loads_nothing_of_the_clones(clone: Path) -> None:
    """`LD_LIBRARY_PATH=:/x` makes the loader look in the working directory first: a
    `libc.so.6` the clone ships would be loaded into the hook (here one that cannot be)."""
    write(clone / "libc.so.6", "not a library\n")
    line = prompt_line([sys.executable, "-P", "-m", "sagemem"])
    write(clone / ".claude" / "settings.json", hooks_file("claude-code", line))
    report = doctor.diagnose(places(clone, LD_LIBRARY_PATH=f"{os.pathsep}/nonexistent"))
    [ran] = found(report, "hook-run")
    assert ran.status == OK, ran
    [said] = found(report, "search-path")
    assert said.status == PROBLEM and "LD_LIBRARY_PATH has an empty entry" in said.message


def test_a_relative_path_entry_is_told(clone: Path) -> None:
    """PATH's relative entries are common (`./node_modules/.bin`), and doctor checks the
    programs that matter to it: information, not a problem."""
    write(
        clone / ".claude" / "settings.json",
        hooks_file("claude-code", prompt_line(PYTHON_SAGEMEM[:1] + ["-P", "-m", "sagemem"])),
    )
    report = doctor.diagnose(places(clone, PATH=f"./node_modules/.bin{os.pathsep}/usr/bin"))
    [said] = found(report, "search-path")
    assert said.status == INFO and "`./node_modules/.bin`" in said.message and report.ok
    assert not found(doctor.diagnose(places(clone, PATH="/usr/bin")), "search-path")
