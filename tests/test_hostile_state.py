"""Forged records in a state directory: every JSON file sagemem reads there, every field of
each, every wrong type.

A state directory can come with a clone (`git add -f`), so each of its records is a
stranger's. A record of the right shape with the wrong types must never become a traceback:
`check` names it as a `state-record` finding, the prompt hook still injects (a real hook
process), the commands and the UI's actions that read it answer with a clear message, and no
read rewrites it. Each case starts from a sound record, then puts one wrong value in one
field (or damages the whole file).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sagemem import MemoryStore, SagememError
from sagemem.agents import hooks
from sagemem.agents.install import RECORD, Backups
from sagemem.cli import cli
from sagemem.dream import DreamBusy, auto, record
from sagemem.search import session
from sagemem.store import locking, shape
from sagemem.store.config import Settings
from sagemem.store.errors import SagememWarning, VersionConflict
from sagemem.ui.app import App, as_set

QUESTION = "how do we deploy to production?"
RUN = "20261201-000000-beef"
FORGED = "0123456789abcdef"  # the id of the forged conflict record, next to the real one
SHA = "a" * 64
WHEN = 1_790_000_000.5
TIMEOUT = 60


@pytest.fixture(autouse=True)
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))


# -- the wrong values, and which kind of field each is wrong for -------------------------------

INF = object()  # written as `1e400`: JSON that Python reads as an infinite float
GARBAGE = {"x": [[{"y": None}], "\x1b[2J"]}
WRONG: dict[str, Any] = {
    "text": "3",
    "number": 7,
    "list": [],
    "object": {},
    "null": None,
    "bool": True,
    "huge": 10**30,
    "infinite": INF,
    "negative": -5,
    "garbage": GARBAGE,
}


def valid(kind: str, value: Any) -> bool:
    """Whether `value` is right for a field of `kind` (the test's own rule, not sagemem's)."""
    if kind.endswith("?"):
        return value is None or valid(kind[:-1], value)
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and value is not INF
    rules: dict[str, Callable[[Any], bool]] = {
        "count": lambda v: number and isinstance(v, int) and 0 <= v <= 2**53,
        "time": lambda v: number and 0 <= v <= 32_503_680_000,
        "text": lambda v: isinstance(v, str),
        "id": lambda v: False,  # text of a pattern none of the wrong values has
        "const": lambda v: False,
        "flag": lambda v: isinstance(v, bool),
        "true": lambda v: v is True,
        "flag-or-text": lambda v: isinstance(v, (bool, str)),
        "list": lambda v: isinstance(v, list) and v == [],
        "table": lambda v: isinstance(v, dict) and v == {},  # its entries are checked too
        "object+": lambda v: isinstance(v, dict),  # other keys are left alone
        "object!": lambda v: False,  # an object with required keys
    }
    return rules[kind](value)


# -- the state files --------------------------------------------------------------------------


@dataclass
class StateFile:
    """One file sagemem reads from a state dir: where it is, a sound record of it, its fields
    (a path into the record -> the kind of value it holds), and whether the prompt hook
    reads it."""

    name: str
    where: Callable[[Path], Path]
    sound: Callable[[Template], Any]
    fields: dict[tuple[Any, ...], str]
    hook: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Template:
    root: Path  # the project; its memory dir is root/.sagemem/memory
    conflict: dict[str, Any]  # the real conflict's record
    snapshot: str  # the id of the real snapshot
    manifest: dict[str, Any]  # its MANIFEST.json

    @property
    def memory_dir(self) -> Path:
        return self.root / ".sagemem" / "memory"

    @property
    def state_dir(self) -> Path:
        return self.memory_dir / ".sagemem"


def _dream_manifest(_: Template) -> dict[str, Any]:
    stamp = {"bytes": 10, "sha256": SHA}
    return {
        "schema": 1,
        "id": RUN,
        "mode": "report",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "model_checked": True,
        "started": "2026-12-01T00:00:00+00:00",
        "finished": "2026-12-01T00:01:00+00:00",
        "status": "done",
        "stop": "",
        "rounds": 2,
        "tokens": 300,
        "snapshot": None,
        "summary": "tidied",
        "changes": [
            {
                "seq": 1,
                "op": "write",
                "file": "project_deploy.md",
                "reason": "merged",
                "no_reason": False,
                "before": stamp,
                "after": {"bytes": 12, "sha256": "b" * 64},
                "before_blob": SHA,
                "at": "2026-12-01T00:00:30+00:00",
            }
        ],
        "proposals": [
            {"op": "write", "file": "project_deploy.md", "version": None, "content": "c", "reason": "r"}
        ],
        "refused": [{"tool": "write_memory", "args": {"file": "x.md"}, "why": "no", "at": "t"}],
        "audit_before": {"ok": True, "files": 1, "problems": 0, "findings": []},
        "audit_after": None,
        "index": {"before": stamp, "before_blob": SHA, "files": ["project_deploy.md"], "after": stamp},
        "rollbacks": [{"at": "2026-12-02", "scope": "files", "restored": ["project_deploy.md"]}],
    }


def _with_id(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "id": FORGED}


FILES = [
    StateFile(
        "conflict",
        lambda s: s / "conflicts" / f"{FORGED}.json",
        lambda t: _with_id(t.conflict),
        {
            ("id",): "id",
            ("file",): "id",
            ("expected_version",): "id?",
            ("disk_version",): "id?",
            ("proposed_version",): "id?",
            ("created",): "text",
            ("writer",): "text",
            ("reason",): "text",
            ("resolution",): "id?",
            ("resolved_at",): "text?",
            ("disk",): "text?",
            ("proposed",): "text?",
            ("disk_base64",): "id?",
            (): "object!",
        },
    ),
    StateFile(
        "access-ledger",
        lambda s: s / "access.json",
        lambda t: {
            "files": {
                "project_deploy.md": {
                    "injected": {"last": WHEN, "count": 3},
                    "read": {"last": None, "count": 0},
                }
            },
            "receipts": {"r1": {"at": WHEN, "files": ["project_deploy.md"]}},
        },
        {
            ("files",): "table",
            ("files", "project_deploy.md"): "object+",
            ("files", "project_deploy.md", "injected"): "object!",
            ("files", "project_deploy.md", "injected", "last"): "time?",
            ("files", "project_deploy.md", "injected", "count"): "count",
            ("receipts",): "table",
            ("receipts", "r1"): "object!",
            ("receipts", "r1", "at"): "time",
            ("receipts", "r1", "files"): "list",
            (): "object+",
        },
        hook=True,
    ),
    StateFile(
        "session-ledger",
        lambda s: session.path_for(s, "s1"),
        lambda t: {
            "session": "s1",
            "used": 10,
            "reserve_used": 0,
            "injected": {"other.md:1-2": "abcd"},
            "last_query": "q",
            "baseline_done": False,
            "cards": ["c1"],
            "reads": {"other.md": "v"},
        },
        {
            ("session",): "text",
            ("used",): "count",
            ("reserve_used",): "count",
            ("injected",): "table",
            ("injected", "other.md:1-2"): "text",
            ("last_query",): "text",
            ("baseline_done",): "flag",
            ("cards",): "list",
            ("cards", 0): "text",
            ("reads",): "table",
            ("reads", "other.md"): "text",
            (): "object+",
        },
        hook=True,
    ),
    StateFile(
        "settings",
        lambda s: s / "settings.json",
        lambda t: {"budget": 60000, "gate": 0.3, "lang": "en", "scopes": ["project"], "rules": True},
        {
            ("budget",): "const",
            ("gate",): "const",
            ("lang",): "const",
            ("scopes",): "list",
            ("rules",): "flag-or-text",
            ("dream_model",): "text",
            (): "object+",
        },
        hook=True,
    ),
    StateFile(
        "lock-list",
        lambda s: s / "locked.json",
        lambda t: {"project_deploy.md": True},
        {("project_deploy.md",): "true", (): "table"},
    ),
    StateFile(
        "snapshot-manifest",
        lambda s: s / "snapshots" / "SNAPSHOT" / "MANIFEST.json",
        lambda t: t.manifest,
        {
            ("id",): "id",
            ("kind",): "id",
            ("created",): "text",
            ("label",): "text",
            ("schema",): "const",
            ("files",): "list",
            ("files", 0): "object!",
            ("files", 0, "name"): "id",
            ("files", 0, "bytes"): "count",
            ("files", 0, "sha256"): "id",
            ("redacted",): "list",
            ("skipped",): "list",
            (): "object!",
        },
    ),
    StateFile(
        "rollback-history",
        lambda s: s / "snapshots" / "rollbacks.json",
        lambda t: [{"snapshot": t.snapshot, "scope": "files", "restored": []}],
        {(0,): "object+", (): "list"},
    ),
    StateFile(
        "dream-manifest",
        lambda s: s / "dream" / RUN / "manifest.json",
        _dream_manifest,
        {
            ("schema",): "const",
            ("id",): "id",
            ("mode",): "id",
            ("status",): "text",
            ("stop",): "text",
            ("model",): "text?",
            ("started",): "text",
            ("finished",): "text?",
            ("rounds",): "count",
            ("tokens",): "count",
            ("snapshot",): "id?",
            ("source",): "id?",
            ("summary",): "text",
            ("changes",): "list",
            ("changes", 0): "object!",
            ("changes", 0, "seq"): "count",
            ("changes", 0, "op"): "id",
            ("changes", 0, "file"): "text",
            ("changes", 0, "reason"): "text",
            ("changes", 0, "before"): "object!?",
            ("changes", 0, "before", "bytes"): "count",
            ("changes", 0, "before_blob"): "id",
            ("proposals",): "list",
            ("proposals", 0): "object!",
            ("proposals", 0, "reason"): "text",
            ("proposals", 0, "content"): "text",
            ("refused",): "list",
            ("refused", 0, "args"): "table",
            ("refused", 0, "why"): "text",
            ("audit_before",): "object!?",
            ("audit_before", "findings"): "list",
            ("index",): "object+?",
            ("index", "after"): "object!?",
            ("rollbacks",): "list",
            ("rollbacks", 0, "scope"): "id",
            ("rollbacks", 0, "restored"): "list",
            (): "object!",
        },
    ),
    StateFile(
        "dream-lock-holder",
        lambda s: s / "dream" / "lock.json",
        lambda t: {"run": RUN, "pid": 12, "at": "2026-12-01T00:00:00+00:00"},
        {("run",): "text", ("pid",): "count", ("at",): "text", (): "object+"},
    ),
    StateFile(
        "dream-trigger",
        lambda s: s / "dream" / "auto.json",
        lambda t: {"last": WHEN, "started": WHEN},
        {("last",): "time", ("started",): "time", (): "object+"},
    ),
]
BY_NAME = {f.name: f for f in FILES}


NUMERIC = ("count", "time", "const")  # fields where a huge, infinite or negative number differs


def wrong_for(kind: str) -> list[str]:
    """The wrong values for a field of `kind`; a field of no number tells numbers apart by no
    more than "a number", so it gets that one."""
    numeric = kind.rstrip("?!+") in NUMERIC
    skip = () if numeric else ("huge", "infinite", "negative")
    return [wrong for wrong, value in WRONG.items() if wrong not in skip and not valid(kind, value)]


def cases() -> list[Any]:
    found = []
    for state_file in FILES:
        for path, kind in state_file.fields.items():
            for wrong in wrong_for(kind):
                where = ".".join(map(str, path)) or "whole"
                name = f"{state_file.name}-{where}-{wrong}"
                found.append(pytest.param(state_file.name, path, wrong, id=name))
        for damage in ("non-UTF-8", "truncated"):
            found.append(pytest.param(state_file.name, None, damage, id=f"{state_file.name}-{damage}"))
    return found


# -- building a project and its forged state ---------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("template") / "project"
    store = MemoryStore(root / ".sagemem" / "memory")
    store.init()
    memory = store.create(
        type="project",
        name="deploy",
        description="How we deploy to production",
        body="Run make deploy-prod from the release tag.",
    )
    with pytest.raises(VersionConflict) as refused:
        store.update(memory.file, expected_version="0" * 64, description="How we ship to production")
    conflict = json.loads((store.state_dir / "conflicts" / f"{refused.value.conflict_id}.json").read_text())
    made = store.snapshot(label="sound")
    manifest = json.loads((made.path / "MANIFEST.json").read_text())
    return Template(root, conflict, made.id, manifest)


@pytest.fixture
def project(template: Template, tmp_path: Path) -> Template:
    root = tmp_path / "project"
    shutil.copytree(template.root, root, symlinks=True)
    return Template(root, template.conflict, template.snapshot, template.manifest)


def place(state_file: StateFile, project: Template) -> Path:
    path = Path(str(state_file.where(project.state_dir)).replace("SNAPSHOT", project.snapshot))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def set_at(record: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    record = copy.deepcopy(record)
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return record


def forge(state_file: StateFile, project: Template, path: tuple[Any, ...] | None, wrong: str) -> Path:
    """Write the file of `state_file` with one wrong value at `path` (None: the whole file
    damaged as `wrong` says); returns where."""
    target = place(state_file, project)
    sound = state_file.sound(project)
    if path is None:
        text = json.dumps(sound)
        data = text.encode()[: len(text) // 2] if wrong == "truncated" else b'{"x": "\xff\xfe"}'
    else:
        value = WRONG[wrong]
        forged = set_at(sound, path, "__INF__" if value is INF else value)
        data = json.dumps(forged).replace('"__INF__"', "1e400").encode()
    target.write_bytes(data)
    return target


def run_cli(*args: str) -> Any:
    """A `sagemem` command in this process; any exception but a clear refusal fails the test."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def prompt(root: Path, sid: str) -> str:
    event = {"session_id": sid, "cwd": str(root), "hook_event_name": "UserPromptSubmit", "prompt": QUESTION}
    done = subprocess.run(
        [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "sagemem"]
        + ["hook", "claude-code", "UserPromptSubmit"],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd=root,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout else ""


def hook_here(root: Path, sid: str) -> str:
    event = {"session_id": sid, "cwd": str(root), "hook_event_name": "UserPromptSubmit", "prompt": QUESTION}
    output = hooks.handle("claude-code", "UserPromptSubmit", json.dumps(event))
    return "" if output is None else str(output["hookSpecificOutput"]["additionalContext"])


# Records that repair themselves on their next write (they hold nothing a person wrote): a
# damaged one is a hint, and `check` does not fail for it.
REPAIRING = {"session-ledger", "dream-trigger"}


def aside(path: Path) -> list[Path]:
    """The copies of `path` set aside as damaged (`<name>.damaged-<UTC time>`), oldest first."""
    return sorted(path.parent.glob(f"{path.name}.damaged-*"))


def findings(project: Template) -> tuple[int, list[str]]:
    done = run_cli("--dir", str(project.memory_dir), "check")
    return done.exit_code, [line for line in done.stdout.splitlines() if line.startswith("state-record:")]


# -- the sound records are sound --------------------------------------------------------------


@pytest.mark.parametrize("name", list(BY_NAME))
def test_each_sound_record_passes(project: Template, name: str) -> None:
    """The test's sound records are what sagemem writes: none of them is a finding."""
    state_file = BY_NAME[name]
    target = place(state_file, project)
    target.write_text(json.dumps(state_file.sound(project)))
    code, lines = findings(project)
    assert (code, lines) == (0, []), lines
    if state_file.hook:
        assert "deploy-prod" in prompt(project.root, "s1" if name == "session-ledger" else "fresh")


# -- every field, every wrong type ------------------------------------------------------------


@pytest.mark.parametrize(("name", "path", "wrong"), cases())
def test_a_forged_record_is_a_finding_and_breaks_nothing(
    project: Template, name: str, path: tuple[Any, ...] | None, wrong: str
) -> None:
    state_file = BY_NAME[name]
    target = forge(state_file, project, path, wrong)
    before = target.read_bytes()
    code, lines = findings(project)
    ours = [line for line in lines if str(target) in line]
    assert code == (0 if name in REPAIRING else 1) and ours, lines
    assert all(line.endswith(" (hint)") == (name in REPAIRING) for line in ours), ours
    READERS[name](project, App(as_set(MemoryStore(project.memory_dir))))
    assert target.read_bytes() == before  # no read rewrote it
    if state_file.hook:  # the hook's own code, in this process (a real one: the test below)
        assert "deploy-prod" in hook_here(project.root, "s1" if name == "session-ledger" else "fresh")
    if name == "access-ledger":
        # What `check` said the next write would do, it did: the injection's line in the log,
        # folded in by a read's count, set the damaged ledger aside, whole, and started a sound
        # one. A damaged receipt is carried over as it is until a citation looks one up; that
        # citation sets it aside.
        store = MemoryStore(project.memory_dir)
        if "the next citation" in ours[0]:
            assert aside(target) == [] and findings(project)[1] == ours
            before = target.read_bytes()
            store.cite(["project_deploy.md"], receipt="r2")
        else:
            assert "the next write of the ledger" in ours[0]
            assert target.read_bytes() == before  # the hook appended its use to the log
            store.record_use("read", ["project_deploy.md"])
        assert [copy.read_bytes() for copy in aside(target)] == [before]
        assert store.ledger()["project_deploy.md"].injected.count >= 1
        assert findings(project) == (0, [])


# For each file the prompt hook reads, the field a forgery is likeliest to aim at.
HOOK_FIELDS = {
    "access-ledger": ("files", "project_deploy.md", "injected", "count"),
    "session-ledger": ("used",),
    "settings": ("budget",),
}


@pytest.mark.parametrize(
    ("name", "path", "wrong"),
    [(name, None, damage) for name in HOOK_FIELDS for damage in ("non-UTF-8", "truncated")]
    + [("access-ledger", ("files",), "list")]
    + [
        (name, path, wrong)
        for name, path in HOOK_FIELDS.items()
        for wrong, value in WRONG.items()
        if not valid(BY_NAME[name].fields[path], value)
    ],
)
def test_the_prompt_hook_process_injects_whatever_its_state_holds(
    project: Template, name: str, path: tuple[Any, ...] | None, wrong: str
) -> None:
    forge(BY_NAME[name], project, path, wrong)
    assert "deploy-prod" in prompt(project.root, "s1" if name == "session-ledger" else "fresh")
    assert not (project.state_dir / "hook.log").exists()


@pytest.mark.parametrize("name", list(BY_NAME))
@pytest.mark.parametrize("wrong", ["truncated", "null"])
def test_every_reader_answers_whatever_the_state_holds(project: Template, name: str, wrong: str) -> None:
    """Each command and UI action that reads the state dir, for each damaged file."""
    state_file = BY_NAME[name]
    forge(state_file, project, None if wrong == "truncated" else next(iter(state_file.fields)), wrong)
    memory = str(project.memory_dir)
    app = App(as_set(MemoryStore(project.memory_dir)))
    overview = app.overview({})
    assert (overview["problems"] >= 1) == (name not in REPAIRING)
    assert overview["troubles"] == [] or name == "lock-list"
    target = str(place(state_file, project))
    assert any(f["check"] == "state-record" and f["file"] == target for f in app.health({})["findings"])
    assert [c["id"] for c in app.conflicts({})["conflicts"]] == [project.conflict["id"]]
    app.snapshots({})
    app.dreams({})
    assert app.candidates({})["troubles"] == [] or name == "lock-list"
    for args in (["conflicts"], ["ledger"], ["snapshot"], ["dream", "list"], ["list"], ["search", "deploy"]):
        done = run_cli("--dir", memory, *args)
        assert done.exit_code == 0, (args, done.stderr)
    if name == "conflict":
        with pytest.raises(SagememError, match="conflict record is damaged"):
            app.resolve({"id": FORGED, "keep": "proposed"})
    if name == "dream-manifest":
        with pytest.raises(SagememError, match="not a dream manifest"):
            app.dream_run({"id": RUN})


def _conflicts(project: Template, app: App) -> None:
    memory = str(project.memory_dir)
    listed = run_cli("--dir", memory, "conflicts", "--json")
    assert listed.exit_code == 0 and [c["id"] for c in json.loads(listed.stdout)] == [project.conflict["id"]]
    # The record left out may hold a person's refused write: one line says so, and where to look.
    hint = "sagemem: hint: left out, as it cannot be read: 1 conflict record; `sagemem check` says why\n"
    assert listed.stderr == hint
    assert run_cli("--dir", memory, "conflicts", "list", "--resolved").stderr == ""
    deploy = (project.memory_dir / "project_deploy.md").read_bytes()
    for args in (["show", FORGED], ["resolve", FORGED, "--keep", "proposed"]):
        refused = run_cli("--dir", memory, "conflicts", *args)
        assert refused.exit_code == 1 and "conflict record is damaged" in refused.stderr, refused.stderr
    assert (project.memory_dir / "project_deploy.md").read_bytes() == deploy


def _uses(project: Template, app: App) -> None:
    memory = str(project.memory_dir)
    for args in (["candidates"], ["ledger"], ["ledger", "project_deploy.md"]):
        done = run_cli("--dir", memory, *args)
        assert done.exit_code == 0, done.stderr
    assert app.candidates({})["troubles"] == [] and app.overview({})["troubles"] == []


def _locks(project: Template, app: App) -> None:
    """Unknown locks: no candidate may be judged, nor archived; each refusal names the file."""
    done = run_cli("--dir", str(project.memory_dir), "candidates")
    assert done.exit_code == 1 and "locked.json" in done.stderr
    assert "locked.json" in app.candidates({})["troubles"][0]
    assert "locked.json" in app.overview({})["troubles"][0]
    with pytest.raises(SagememError, match="locked.json"):
        MemoryStore(project.memory_dir).archive("project_deploy.md")
    assert (project.memory_dir / "project_deploy.md").exists()


def _snapshots(project: Template, app: App) -> None:
    memory = str(project.memory_dir)
    listed = run_cli("--dir", memory, "snapshot", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []
    refused = run_cli("--dir", memory, "snapshot", "rollback", project.snapshot)
    assert refused.exit_code == 1 and "MANIFEST.json" in refused.stderr


def _rollbacks(project: Template, app: App) -> None:
    """Only a rollback reads the history: it goes on, and sets the damaged one aside first."""
    history = project.state_dir / "snapshots" / "rollbacks.json"
    before = history.read_bytes()
    MemoryStore(project.memory_dir).rollback(project.snapshot)
    assert [copy.read_bytes() for copy in aside(history)] == [before]
    assert [entry["snapshot"] for entry in json.loads(history.read_text())] == [project.snapshot]
    history.write_bytes(before)  # as the test found it


def _dream_runs(project: Template, app: App) -> None:
    refused = run_cli("--dir", str(project.memory_dir), "dream", "show", RUN)
    assert refused.exit_code == 1 and "not a dream manifest" in refused.stderr
    assert app.dreams({})["runs"] == []


def _lock_holder(project: Template, app: App) -> None:
    """The holder's note is read when a second run finds the lock taken."""
    held = locking.exclusive(project.state_dir / "dream" / "lock", 1)
    with held, pytest.raises(DreamBusy, match="process"), record.running(project.state_dir, RUN):
        pass
    assert run_cli("--dir", str(project.memory_dir), "dream", "list").exit_code == 0


def _trigger(project: Template, app: App) -> None:
    settings = Settings(dream_auto="report", dream_min_sessions=1)
    auto.due(project.state_dir, settings)


READERS: dict[str, Callable[[Template, App], None]] = {
    "conflict": _conflicts,
    "access-ledger": _uses,
    "session-ledger": lambda project, app: None,  # the prompt hook alone reads it
    "settings": _uses,
    "lock-list": _locks,
    "snapshot-manifest": _snapshots,
    "rollback-history": _rollbacks,
    "dream-manifest": _dream_runs,
    "dream-lock-holder": _lock_holder,
    "dream-trigger": _trigger,
}


def test_a_ledger_entry_under_a_name_no_memory_can_have_is_dropped(project: Template) -> None:
    target = project.state_dir / "access.json"
    sound = BY_NAME["access-ledger"].sound(project)
    target.write_text(json.dumps({"files": {**sound["files"], "../../escape.md": {}}}))
    code, lines = findings(project)
    assert code == 1 and "escape.md" in lines[0] and "not a memory file name" in lines[0]
    assert list(MemoryStore(project.memory_dir).ledger()) == ["project_deploy.md"]
    assert "deploy-prod" in prompt(project.root, "fresh")  # its use appended to the log
    MemoryStore(project.memory_dir).record_use("read", ["project_deploy.md"])  # the log folded in
    kept = json.loads(target.read_text())["files"]
    assert list(kept) == ["project_deploy.md"] and kept["project_deploy.md"]["injected"]["count"] == 4


def test_a_conflict_record_under_another_records_name_is_refused(project: Template) -> None:
    """A record holding the real conflict's id under a forged name would be resolved, and
    moved, as the real one."""
    (project.state_dir / "conflicts" / f"{FORGED}.json").write_text(json.dumps(project.conflict))
    code, lines = findings(project)
    assert code == 1 and "not the one its name says" in lines[0]
    done = run_cli("--dir", str(project.memory_dir), "conflicts", "resolve", FORGED, "--keep", "disk")
    assert done.exit_code == 1 and "conflict record is damaged" in done.stderr
    assert (project.state_dir / "conflicts" / f"{project.conflict['id']}.json").exists()


# -- install's record (read by install and uninstall, outside the memory's state) ----------------


def _install_record(folder: Path) -> dict[str, Any]:
    claude = str(folder / "p" / ".claude" / "settings.json")
    return {
        "created": {claude: {"folders": [str(folder / "p" / ".claude")]}},
        "settings": {claude: {"autoMemoryEnabled": {"was": True}}},
        "backups": {"20261201-000000-000000-claude-settings.json": claude},
    }


INSTALL_FIELDS = {
    ("created",): "table",
    ("created", "CLAUDE"): "object+",
    ("created", "CLAUDE", "folders"): "list",
    ("settings",): "table",
    ("settings", "CLAUDE"): "table",
    ("backups",): "table",
    ("backups", "20261201-000000-000000-claude-settings.json"): "text",
    (): "object+",
}


@pytest.mark.parametrize(
    ("path", "wrong"),
    [(p, w) for p, kind in INSTALL_FIELDS.items() for w in wrong_for(kind)]
    + [(None, "non-UTF-8"), (None, "truncated")],
)
def test_a_forged_install_record_is_set_aside_and_install_goes_on(
    tmp_path: Path, path: tuple[Any, ...] | None, wrong: str
) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    claude = folder / "p" / ".claude" / "settings.json"
    sound = _install_record(folder)
    if path is None:
        text = json.dumps(sound)
        data = text.encode()[: len(text) // 2] if wrong == "truncated" else b'{"x": "\xff\xfe"}'
    else:
        where = tuple(str(claude) if key == "CLAUDE" else key for key in path)
        value = WRONG[wrong]
        data = (
            json.dumps(set_at(sound, where, "__INF__" if value is INF else value))
            .replace('"__INF__"', "1e400")
            .encode()
        )
    (folder / RECORD).write_bytes(data)
    backups = Backups(folder, [])
    backups.created(claude)  # reads answer, whatever the record holds
    backups.setting(claude, "autoMemoryEnabled")
    assert (folder / RECORD).read_bytes() == data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backups.keep(claude, b"{}")
    said = [str(w.message) for w in caught if issubclass(w.category, SagememWarning)]
    whole = path is None or path == ()
    assert said and said[0].endswith(", nothing of it read" if whole else ", its sound parts kept"), said
    assert [copy.read_bytes() for copy in aside(folder / RECORD)] == [data]
    record = json.loads((folder / RECORD).read_text())
    assert any(name.endswith("settings.json") for name in record["backups"])
    if path and path[0] != "created":  # the sound parts carry on
        assert backups.created(claude) == [folder / "p" / ".claude"]


def test_the_sound_install_record_is_read_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    claude = folder / "p" / ".claude" / "settings.json"
    (folder / RECORD).write_text(json.dumps(_install_record(folder)))
    backups = Backups(folder, [])
    assert backups.created(claude) == [folder / "p" / ".claude"]
    assert backups.setting(claude, "autoMemoryEnabled") == {"was": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backups.keep(claude, b"{}")
    assert aside(folder / RECORD) == []


# Every module that reads JSON or a state file, and how many times it calls each reader: a state
# file is read by `shape.load` (and has its cases in FILES above); any other read says here what
# it reads, and why it is no record of the state dir (or how it is checked). A new call anywhere
# changes a count: add its cases above, or its reason here.
READS = ("shape.load(", "read_state(", "json.load")
JSON_READS: dict[str, dict[str, int]] = {
    # state files, by shape: the cases above
    "agents/install.py": {"shape.load(": 1, "json.load": 2},  # + a harness's settings (`_plan`, `_read_json`)
    "care/dream_state.py": {"shape.load(": 3},  # dream's manifest, lock note, trigger
    "care/snapshot.py": {"shape.load(": 3},  # manifests, the rollback history
    "dream/auto.py": {"shape.load(": 1},
    "dream/record.py": {"shape.load(": 1, "read_state(": 1},  # + a blob, checked by its sha256
    "search/session.py": {"shape.load(": 2},
    "store/archive.py": {"shape.load(": 2},
    "store/config.py": {"shape.load(": 1},
    "store/guard.py": {"shape.load(": 1, "read_state(": 1},  # + a damaged record's text, to redact
    "store/ledger.py": {"shape.load(": 1, "read_state(": 1, "json.load": 1},  # + the log, each line by shape
    "store/shape.py": {"read_state(": 1, "json.load": 1},  # the reader itself
    # read as text, never as a record
    "care/checkup.py": {"read_state(": 4, "json.load": 3},  # copies scanned and redacted as strings
    "store/directory.py": {"read_state(": 1},  # a dotfile's text
    "store/log.py": {"read_state(": 1},  # the log's lines
    # not the state dir
    "agents/hooks.py": {"json.load": 1},  # the harness's event
    "agents/mcp_input.py": {"json.load": 1},  # a client's request, mended
    "agents/mcp_protocol.py": {"json.load": 1},  # a client's request
    "agents/dsh.py": {"json.load": 1},  # dsh's package.json
    "agents/doctor/dsh.py": {"json.load": 1},  # dsh's own output
    "agents/doctor/probes.py": {"json.load": 1},  # a hook's output
    "agents/doctor/process.py": {"json.load": 1},  # a server's reply
    "agents/doctor/settings.py": {"json.load": 1},  # a harness's settings
    "store/native.py": {"json.load": 1},  # Claude Code's settings, each value's type checked
    "dream/model.py": {"json.load": 1},  # the model's tool arguments
    "dream/sessions.py": {"json.load": 2},  # transcripts
    "search/cache.py": {"json.load": 2},  # index rows: a wrong one is `CacheDamaged`, rebuilt
    "search/corpus.py": {"json.load": 1},  # an index entry, checked by `_entry`
    "search/evaluate.py": {"json.load": 1},  # a question set
    "search/bench.py": {"json.load": 1},  # `sagemem daemon status --json`, its own child's
    "ui/server.py": {"json.load": 1},  # a request body
}


def test_every_state_file_sagemem_reads_is_covered() -> None:
    """The modules that read JSON or a state file are those above, each reader called as
    often as it says: a new one (a `json.loads` of a state file, say) fails here until it is
    covered."""
    package = Path(__file__).resolve().parent.parent / "sagemem"
    found = {}
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if "def read_state(" not in line]
        counts = {call: sum(call in line for line in lines) for call in READS}
        if any(counts.values()):
            found[path.relative_to(package).as_posix()] = {call: n for call, n in counts.items() if n}
    assert found == JSON_READS


# -- setting a damaged record aside: never over an older copy, never a reason to stop -----------


def test_a_copy_set_aside_earlier_is_never_replaced(project: Template) -> None:
    """Each damaged ledger is kept under a name of its own: the older copy may be the only
    one of a ledger's counts."""
    target = project.state_dir / "access.json"
    store = MemoryStore(project.memory_dir)
    damaged = [b"[not a ledger", b'{"files": []}']
    for data in damaged:
        target.write_bytes(data)
        store.record_use("read", ["project_deploy.md"])
    assert [copy.read_bytes() for copy in aside(target)] == damaged
    assert store.ledger()["project_deploy.md"].read.count == 1  # each copy counted afresh


def _a_folder(path: Path) -> bytes:
    """A folder at `path` holding one file: what a clone may carry where a record belongs."""
    path.mkdir(parents=True)
    (path / "note").write_bytes(b"kept")
    return b"kept"


@pytest.mark.parametrize("where", ["the ledger", "an older copy's name"])
def test_a_folder_in_the_ledgers_place_never_stops_the_counting(project: Template, where: str) -> None:
    """A folder at `access.json` (or at `access.json.damaged`, where older versions put the
    copy) is moved aside whole: `cite` counts, and `check`'s words come true."""
    target = project.state_dir / "access.json"
    if where == "the ledger":
        _a_folder(target)
    else:
        _a_folder(project.state_dir / "access.json.damaged")
        target.write_text('{"files": []}')
    code, lines = findings(project)
    assert code == 1 and "the next write of the ledger sets it aside" in lines[0]
    done = run_cli("--dir", str(project.memory_dir), "cite", "project_deploy.md", "--receipt", "r9")
    assert done.exit_code == 0 and done.stderr == "", done.stderr
    assert MemoryStore(project.memory_dir).ledger()["project_deploy.md"].cited.count == 1
    assert findings(project) == (0, [])
    if where == "the ledger":
        [copy] = aside(target)
        assert (copy / "note").read_bytes() == b"kept"
    else:
        assert (project.state_dir / "access.json.damaged" / "note").read_bytes() == b"kept"
        assert [copy.read_bytes() for copy in aside(target)] == [b'{"files": []}']


def test_a_ledger_that_cannot_be_set_aside_costs_a_warning_and_counting_goes_on(
    project: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = project.state_dir / "access.json"
    target.write_text('{"files": []}')

    def refuse(path: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(shape, "set_aside", refuse)
    with pytest.warns(SagememWarning, match="could not be set aside .*Permission denied"):
        MemoryStore(project.memory_dir).record_use("read", ["project_deploy.md"])
    assert MemoryStore(project.memory_dir).ledger()["project_deploy.md"].read.count == 1


@pytest.mark.parametrize("where", ["rollbacks.json", "rollbacks.json.damaged"])
def test_a_folder_in_the_rollback_historys_place_never_fails_a_rollback(
    project: Template, where: str
) -> None:
    history = project.state_dir / "snapshots" / "rollbacks.json"
    _a_folder(history.parent / where)
    if where != "rollbacks.json":
        history.write_text('{"not": "a list"}')
    code, lines = findings(project)
    assert code == 1 and "the next rollback sets it aside" in lines[0]
    done = run_cli("--dir", str(project.memory_dir), "snapshot", "rollback", project.snapshot)
    assert done.exit_code == 0 and done.stderr == "", done.stderr
    assert [entry["snapshot"] for entry in json.loads(history.read_text())] == [project.snapshot]
    assert findings(project) == (0, [])
    [copy] = aside(history) if where == "rollbacks.json" else [history.parent / where]
    assert (copy / "note").read_bytes() == b"kept"


def test_a_rollback_done_is_not_failed_by_its_history(
    project: Template, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files are back by the time the history is written: a history that cannot be
    written is a warning, and the rollback exits 0."""
    from sagemem.care import snapshot as snapshot_module

    deploy = project.memory_dir / "project_deploy.md"
    sound = deploy.read_bytes()
    deploy.write_text(sound.decode().replace("deploy-prod", "deploy-staging"))
    written = snapshot_module.write_atomic

    def write(path: Path, data: bytes, **kw: Any) -> None:
        if path.name == "rollbacks.json":
            raise OSError(28, "No space left on device", str(path))
        written(path, data, **kw)

    monkeypatch.setattr(snapshot_module, "write_atomic", write)
    done = run_cli("--dir", str(project.memory_dir), "snapshot", "rollback", project.snapshot)
    assert done.exit_code == 0, done.stderr
    assert "the rollback is done, but it is not in the history" in done.stderr
    assert deploy.read_bytes() == sound


@pytest.mark.parametrize("name", sorted(REPAIRING))
def test_a_record_that_repairs_itself_does_even_when_a_folder_is_in_its_place(
    project: Template, name: str
) -> None:
    """A session's ledger and dream's trigger times hold nothing a person wrote: `check`
    names a folder in their place as a hint, and their next write moves it aside."""
    target = place(BY_NAME[name], project)
    _a_folder(target)
    code, lines = findings(project)
    assert code == 0 and len(lines) == 1 and lines[0].endswith(" (hint)")
    if name == "session-ledger":
        assert "deploy-prod" in prompt(project.root, "s1")
        assert not (project.state_dir / "hook.log").exists()
    else:
        auto.record_run(project.state_dir, when=WHEN)
        assert json.loads(target.read_text()) == {"last": WHEN}
    assert target.is_file() and (aside(target)[0] / "note").read_bytes() == b"kept"
    assert findings(project) == (0, [])


def test_install_edits_its_record_under_a_lock(tmp_path: Path) -> None:
    """Two installs at once must not set aside each other's sound record: the second waits."""
    import threading

    from sagemem.agents.install import RECORD_LOCK

    folder = tmp_path / "backups"
    folder.mkdir()
    claude = folder / "p" / ".claude" / "settings.json"
    backups = Backups(folder, [])
    done = threading.Event()
    with locking.exclusive(folder / RECORD_LOCK, 1):
        worker = threading.Thread(target=lambda: (backups.remember(claude, []), done.set()))
        worker.start()
        assert not done.wait(0.5)  # held off while another install edits the record
    worker.join(30)
    assert done.is_set() and str(claude) in json.loads((folder / RECORD).read_text())["created"]


# -- what `check` reads, whoever asks ---------------------------------------------------------


def test_every_caller_of_check_sees_dreams_records(project: Template) -> None:
    """The facade's `check` (the UI, `watch`, `fix`, the MCP tool, dream's own audit) finds a
    damaged dream manifest by its place: no caller has to pass it."""
    from sagemem.dream.tools import Toolbox

    forge(BY_NAME["dream-manifest"], project, ("changes",), "text")
    store = MemoryStore(project.memory_dir)
    target = str(place(BY_NAME["dream-manifest"], project))
    assert [f.file for f in store.check().findings if f.check == "state-record"] == [target]
    audit = Toolbox(store, RUN, "report", lambda: None).call("audit_memory", {})
    assert f"state-record {target}" in audit


def test_a_state_dir_refused_as_a_link_has_no_record_findings(project: Template, tmp_path: Path) -> None:
    """Nothing is read through a linked state dir: its one finding says so, and no record
    finding claims that a next use would set something aside."""
    elsewhere = tmp_path / "elsewhere"
    project.state_dir.rename(elsewhere)
    project.state_dir.symlink_to(elsewhere)
    (elsewhere / "access.json").write_text('{"files": []}')
    done = run_cli("--dir", str(project.memory_dir), "check")
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("state-")] == ["state-link"], lines
    assert (elsewhere / "access.json").read_text() == '{"files": []}'
