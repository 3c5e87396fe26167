"""Small upkeep items: the progress bar drawn by click, the command groups that run a command
when named alone, `filelock` on Windows only, detect-secrets pinned, the umask learned without
being changed, the secret scanner's spec kept in the docs."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement

from sagemem.cli import cli
from sagemem.cli.base import _DefaultGroup
from sagemem.cli.progress import Bar
from sagemem.store import files, secrets
from sagemem.store.files import write_atomic

ROOT = Path(__file__).resolve().parent.parent
HIDE, SHOW = "\x1b[?25l", "\x1b[?25h"  # click hides the cursor while it draws (not on Windows)


def requirements() -> dict[str, Requirement]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the same module under its old name
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [Requirement(line) for line in project["dependencies"]]
    return {r.name: r for r in found}


# --- the progress bar ---------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_clicks_once_its_delay_is_over() -> None:
    stream = Terminal()
    bar = Bar("indexing", stream, delay=0)
    bar(6, 24)
    assert stream.getvalue().replace(HIDE, "") == "\rindexing [######..................] 6/24"
    bar(12, 48)  # the same step, a new total: the same line, drawn again
    bar(48, 48)
    assert stream.getvalue().endswith("] 48/48" + (SHOW if os.name != "nt" else "") + "\n")
    assert stream.getvalue().count("\n") == 1


def test_quick_work_and_non_terminals_see_no_bar() -> None:
    stream = Terminal()
    bar = Bar("indexing", stream, delay=60)
    for done in range(11):
        bar(done, 10)
    assert stream.getvalue() == ""


def test_an_interrupted_bar_gives_the_cursor_back_at_exit() -> None:
    """Ctrl-C in the middle of an index build: the cursor click hid is shown again."""
    code = (
        "import io, sys\n"
        "from sagemem.cli.progress import Bar\n"
        "class T(io.TextIOWrapper):\n"
        "    def isatty(self): return True\n"
        "out = T(sys.stderr.buffer, write_through=True)\n"
        "Bar('indexing', out, delay=0)(3, 10)\n"
        "raise KeyboardInterrupt\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "indexing [" in done.stderr and "3/10" in done.stderr
    if os.name != "nt":
        assert done.stderr.index(HIDE) < done.stderr.rindex(SHOW + "\n")


def test_a_bar_is_finished_at_exit_only_while_it_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from sagemem.cli import progress

    pending: list[object] = []

    class Exit:
        register, unregister = pending.append, pending.remove

    monkeypatch.setattr(progress, "atexit", Exit)
    bar = Bar("indexing", Terminal(), delay=0)
    bar(1, 2)
    assert pending == [bar._finish]
    bar(2, 2)
    assert pending == [] and bar.shown is None
    bar(1, 3, "timing")
    bar(1, 3, "another step")  # the first line ends, the second begins
    assert pending == [bar._finish]


# --- groups that run a command when named alone -------------------------------------------


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_a_default_group_runs_its_default_with_its_options_and_a_command_alone() -> None:
    calls: list[tuple[str, dict[str, object]]] = []

    @click.group(cls=_DefaultGroup, default="list")
    @click.option("--json", "as_json", is_flag=True)
    def things(as_json: bool) -> None:
        calls.append(("group", {"as_json": as_json}))  # never run: `list` is run instead

    @things.command("list")
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--all", "every", is_flag=True)
    def things_list(as_json: bool, every: bool) -> None:
        calls.append(("list", {"as_json": as_json, "every": every}))

    @things.command("add")
    def things_add() -> None:
        calls.append(("add", {}))

    runner = CliRunner()
    assert runner.invoke(things, ["--json"]).exit_code == 0
    assert runner.invoke(things, []).exit_code == 0
    assert runner.invoke(things, ["list", "--all"]).exit_code == 0
    assert runner.invoke(things, ["add"]).exit_code == 0
    assert calls == [
        ("list", {"as_json": True, "every": False}),
        ("list", {"as_json": False, "every": False}),
        ("list", {"as_json": False, "every": True}),
        ("add", {}),
    ]


def test_a_default_group_without_a_default_runs_its_own_function_only_alone() -> None:
    calls: list[str] = []

    @click.group(cls=_DefaultGroup)
    @click.option("--apply", is_flag=True)
    def tidy(apply: bool) -> None:
        calls.append(f"tidy apply={apply}")

    @tidy.command("list")
    def tidy_list() -> None:
        calls.append("list")

    runner = CliRunner()
    assert runner.invoke(tidy, ["--apply"]).exit_code == 0
    assert runner.invoke(tidy, ["--apply", "list"]).exit_code == 0
    assert calls == ["tidy apply=True", "list"]


def test_every_group_that_runs_alone_is_a_default_group() -> None:
    def groups(group: click.Group) -> list[tuple[str, click.Group]]:
        found = []
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                found += [(name, command), *groups(command)]
        return found

    alone = {name: g for name, g in groups(cli) if g.invoke_without_command}
    assert {"snapshot", "conflicts", "dream"} <= set(alone)
    # `daemon` (cli/integrate.py) defaults to `status` by hand, until it is moved over.
    assert [name for name, g in alone.items() if not isinstance(g, _DefaultGroup)] in ([], ["daemon"])
    for name in ("snapshot", "conflicts"):
        group = alone[name]
        assert isinstance(group, _DefaultGroup) and group.default == "list"


def test_snapshot_and_conflicts_named_alone_list(tmp_path: Path) -> None:
    memory = str(tmp_path / "mem")
    assert run(["--dir", memory, "init"])[0] == 0
    assert run(["--dir", memory, "snapshot", "create", "--label", "here"])[0] == 0
    for group in ("snapshot", "conflicts"):
        for extra in ([], ["--json"]):
            alone = run(["--dir", memory, group, *extra])
            assert alone == run(["--dir", memory, group, "list", *extra])
    assert "here" in run(["--dir", memory, "snapshot"])[1]
    code, _, err = run(["--dir", memory, "snapshot", "--label", "x"])
    assert code == 2 and "No such option '--label'" in err  # the group's options are its own


# --- filelock only on Windows -------------------------------------------------------------


def test_filelock_is_required_on_windows_only() -> None:
    filelock = requirements()["filelock"]
    assert filelock.marker is not None
    assert filelock.marker.evaluate({"sys_platform": "win32"})
    assert not filelock.marker.evaluate({"sys_platform": "linux"})
    assert not filelock.marker.evaluate({"sys_platform": "darwin"})


@pytest.mark.skipif(sys.platform == "win32", reason="filelock is the lock there")
def test_every_module_imports_and_locks_without_filelock(tmp_path: Path) -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        "class Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'filelock':\n"
        "            raise ImportError('filelock is not installed here')\n"
        "sys.meta_path.insert(0, Blocker())\n"
        "try:\n"
        "    import filelock\n"
        "    sys.exit('the blocker let filelock in')\n"
        "except ImportError:\n"
        "    pass\n"
        "import sagemem\n"
        "names = [m.name for m in pkgutil.walk_packages(sagemem.__path__, 'sagemem.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "from pathlib import Path\n"
        "from sagemem.store import locking\n"
        f"with locking.exclusive(Path({str(tmp_path / 'x.lock')!r}), timeout=1):\n"
        "    pass\n"
        "from sagemem import MemoryStore\n"
        f"store = MemoryStore(Path({str(tmp_path / 'mem')!r}))\n"
        "store.init()\n"
        "store.create(type='user', name='x', description='d', body='b')\n"
        "print(len(names), 'filelock' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.split()
    assert int(count) > 50 and loaded == "False"


# --- detect-secrets pinned ----------------------------------------------------------------


def test_detect_secrets_is_pinned_to_the_minor_version_tested() -> None:
    """The scanner reads detect-secrets' internals (docs/decisions.md): the installed version
    is in the range pyproject.toml allows, and the range ends before the next minor version."""
    from importlib.metadata import version

    pinned = requirements()["detect-secrets"]
    installed = version("detect-secrets")
    assert pinned.specifier.contains(installed)
    major, minor = (int(part) for part in installed.split(".")[:2])
    assert not pinned.specifier.contains(f"{major}.{minor + 1}.0")


# --- the umask ----------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o027, 0o002, 0o000])
@pytest.mark.parametrize("proc", [True, False], ids=["proc-status", "set-and-restore"])
def test_the_umask_is_learned_as_it_is(mask: int, proc: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_PROC_STATUS", proc and files._PROC_STATUS)
    old = os.umask(mask)
    try:
        assert files._umask() == mask
        assert os.umask(mask) == mask  # and left as it was
    finally:
        os.umask(old)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")
def test_on_linux_the_umask_is_read_never_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert files._status_umask() is not None
    old = os.umask(0o027)
    try:

        def refuse(_mask: int) -> int:
            raise AssertionError("os.umask called")

        monkeypatch.setattr(os, "umask", refuse)
        write_atomic(tmp_path / "new.md", b"x")
        monkeypatch.undo()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == 0o640


@pytest.mark.parametrize("proc", [True, False], ids=["proc-status", "set-and-restore"])
def test_threads_making_files_never_see_another_umask(
    proc: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The UI server writes from threads: while some learn the umask, a file another makes
    is never made under a looser one, and the umask is the person's at the end. (Setting it
    to learn it and putting it back, most of these files came out 0o644, and the umask was
    sometimes left at 0o022.)"""
    monkeypatch.setattr(files, "_PROC_STATUS", proc and files._PROC_STATUS)
    folder = tmp_path / "made"
    folder.mkdir()
    old = os.umask(0o077)
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between any two steps
    learned: list[int] = []
    try:

        def learn() -> None:
            learned.extend({files._umask() for _ in range(20000)})

        def make(n: int) -> None:
            for i in range(400):
                with open(folder / f"o{n}-{i}.txt", "w") as handle:  # a plain open: the umask applies
                    handle.write("x")
            for i in range(20):
                write_atomic(folder / f"w{n}-{i}.md", b"x", durable=False)

        threads = [threading.Thread(target=learn) for _ in range(2)]
        threads += [threading.Thread(target=make, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert os.umask(0o077) == 0o077
    finally:
        sys.setswitchinterval(switching)
        os.umask(old)
    assert learned == [0o077, 0o077]
    made = list(folder.iterdir())
    assert len(made) == 2 * 420 and {stat.S_IMODE(p.stat().st_mode) for p in made} == {0o600}


# --- the secret scanner's spec is in the docs ---------------------------------------------


def test_the_secret_spec_in_the_docs_names_what_the_code_does() -> None:
    text = (ROOT / "docs" / "maintenance.md").read_text(encoding="utf-8")
    spec = text[text.index("## What the secret check finds") :]
    for plugin in secrets._LEFT_OUT:
        assert f"`{plugin}`" in spec
    from sagemem.store.secret_shapes import CHINESE_WORDS, SEPARATORS

    how = spec[spec.index("**How a line is read.**") : spec.index("**Where a value begins")]
    named = [c for c in re.findall(r"`([^`]*)`", how) if re.fullmatch(r"[^\w]{1,3}|[\u4e00-\u9fff]{1,3}", c)]
    assert len(named) >= 10
    for separator in named:
        assert separator in SEPARATORS or any(w.pattern == separator for w in CHINESE_WORDS), separator
    assert "docs/maintenance.md" in (secrets.__doc__ or "")
