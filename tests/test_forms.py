"""The serialized forms named in `store/forms.py`: each keeps its fields beside its format
number (a form that changes changes its number), and what the writers write is that form."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.agents import install
from sagemem.care import dream_state
from sagemem.dream import auto
from sagemem.dream import record as dream_record
from sagemem.search import cache, session
from sagemem.store import config, forms, shape
from sagemem.store import ledger as access
from sagemem.store.errors import SagememWarning, VersionConflict
from tests.memories import DANCE, make, make_project

ROOT = Path(__file__).resolve().parent.parent

# Each form: the number it is written under, and its fields (optional ones marked `?`). A form
# whose fields change must change its number too, and this table with them. A form with no
# number (None) is read key by key: a key whose meaning changes takes a new name, or the form
# takes a number (2) and says it (store/forms.py).
FORMS = {
    "EntryForm": ("INDEX", 14, "file version name description type updated mtime baseline "
                  "baseline_priority body_start body_end paragraphs contexts? secrets"),
    "UseForm": ("LEDGER", 1, "last count"),
    "ReceiptForm": ("LEDGER", 1, "at files"),
    "LedgerForm": ("LEDGER", 1, "format? files receipts"),
    "LogLineForm": ("LEDGER", 1, "kind at files"),
    "ConflictForm": ("CONFLICT", 1, "format? id file kind expected_version disk_version proposed_version "
                     "created writer reason resolution resolved_at disk? disk_base64? proposed? "
                     "proposed_base64?"),
    "SnapshotFileForm": ("SNAPSHOT", 1, "name bytes sha256"),
    "SnapshotForm": ("SNAPSHOT", 1, "schema id kind label created files skipped? redacted?"),
    "DreamForm": ("DREAM", 1, "schema id mode status rounds tokens changes proposals refused stop? model? "
                  "base_url? model_checked? started? finished? snapshot? summary? report_error? source? "
                  "applied_by? sessions? memory_dir? index? audit_before? audit_after? rollbacks?"),
    "SessionForm": ("SESSION", 1, "format? session used reserve_used injected last_query baseline_done cards "
                    "reads"),
    "InstallForm": ("INSTALL", 1, "format? created settings? backups?"),
    "InstallCreatedForm": ("INSTALL", 1, "folders"),
    "InstallSettingForm": ("INSTALL", 1, "was?"),
    "SettingsForm": (None, None, "budget? gate? body_gate? candidates? limit? cut? min_query_chars? lang? "
                     "scopes? rules? archive_project_days? archive_reference_days? archive_user_days? "
                     "snapshot_keep? dream_base_url? dream_model? dream_max_rounds? dream_max_tokens? "
                     "dream_min_hours? dream_min_sessions?"),
    "DreamLockForm": (None, None, "run pid at"),
    "DreamTriggerForm": (None, None, "last? started?"),
}  # fmt: skip
# The settings the environment alone gives: a settings file may come with a clone.
ENVIRONMENT_ONLY = {"dream_auto", "dream_sessions", "debug", "task"}


def declared() -> dict[str, tuple[set[str], set[str]]]:
    """Each TypedDict of store/forms.py: (required fields, optional fields), read from its
    source (the classes exist for the type checker only)."""
    tree = ast.parse((ROOT / "sagemem" / "store" / "forms.py").read_text(encoding="utf-8"))
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "TypedDict" for b in node.bases):
            required, optional = set(), set()
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    text = ast.unparse(item.annotation)
                    (optional if text.startswith("NotRequired[") else required).add(item.target.id)
            found[node.name] = (required, optional)
    return found


def test_each_form_keeps_its_fields_under_its_number() -> None:
    forms_now = declared()
    assert set(forms_now) == set(FORMS)
    for name, (constant, number, fields) in FORMS.items():
        required = {f for f in fields.split() if not f.endswith("?")}
        optional = {f[:-1] for f in fields.split() if f.endswith("?")}
        if constant is not None:
            assert getattr(forms, constant) == number, f"{constant} changed: check {name} and this table"
        assert forms_now[name] == (required, optional), (
            f"{name} changed: change {constant} in store/forms.py and this table together"
        )
    assert cache.FORMAT == forms.INDEX


def written(form: str, value: dict[str, object]) -> None:
    required, optional = declared()[form]
    assert required <= set(value) <= required | optional, (form, sorted(value))


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", DANCE)


def test_the_index_stores_entries_of_the_entry_form(store: MemoryStore) -> None:
    store.search("studio lease")
    db = store.state_dir / "cache" / cache.db_name(store.memory_dir)
    with sqlite3.connect(db) as conn:
        entries = [json.loads(e) for (e,) in conn.execute("SELECT entry FROM files WHERE entry IS NOT NULL")]
    conn.close()
    assert entries
    for entry in entries:
        written("EntryForm", entry)


def test_the_ledger_and_its_log_are_of_their_forms(store: MemoryStore) -> None:
    name = sorted(DANCE)[0]
    access.record(store.state_dir, "injected", [name])  # a hook's use: a line in the log
    (line,) = (store.state_dir / access.LOG).read_text(encoding="utf-8").splitlines()
    written("LogLineForm", json.loads(line))
    access.record(store.state_dir, "cited", [name], receipt="r1")  # counted under the lock: folded in
    data = json.loads(access.path_for(store.state_dir).read_text(encoding="utf-8"))
    written("LedgerForm", data)
    assert data["format"] == forms.LEDGER
    for uses in data["files"].values():
        for use in uses.values():
            written("UseForm", use)
    for receipt in data["receipts"].values():
        written("ReceiptForm", receipt)
    assert access.load(store.state_dir)[name].injected.count == 1


def test_a_ledger_of_another_format_is_set_aside_and_written_anew(store: MemoryStore) -> None:
    name = sorted(DANCE)[0]
    path = access.path_for(store.state_dir)
    uses = {name: {"cited": {"last": 1.0, "count": 5}}}
    future = {"format": forms.LEDGER + 1, "files": uses, "receipts": {}}
    path.write_text(json.dumps(future), encoding="utf-8")
    assert access.load(store.state_dir) == {}  # not read as this format
    access.record(store.state_dir, "cited", [name], receipt="r2")
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == forms.LEDGER
    kept = [p for p in store.state_dir.iterdir() if p.name.startswith("access.json.damaged")]
    assert len(kept) == 1 and json.loads(kept[0].read_text(encoding="utf-8")) == future


def test_a_conflict_record_is_of_the_conflict_form(store: MemoryStore) -> None:
    name = sorted(DANCE)[0]
    with pytest.raises(VersionConflict):
        store.write(name, "---\ndescription: new\n---\n\nnew\n", expected_version="0" * 64)
    (record,) = (store.state_dir / "conflicts").glob("*.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    written("ConflictForm", data)
    assert data["format"] == forms.CONFLICT
    assert [c.file for c in store.conflicts()] == [name]  # read back


def test_a_snapshot_manifest_is_of_the_snapshot_form(store: MemoryStore) -> None:
    made = store.snapshot(label="before")
    data = json.loads((made.path / "MANIFEST.json").read_text(encoding="utf-8"))
    written("SnapshotForm", data)
    assert data["schema"] == forms.SNAPSHOT
    for item in data["files"]:
        written("SnapshotFileForm", item)


def test_every_key_a_dream_manifest_is_given_is_a_field_of_its_form() -> None:
    """The dream's manifest is built across several modules: every key they write or read by
    name (a literal key of `manifest`, `m` or `source`, or of the dict that starts it) is one
    the form names."""
    required, optional = declared()["DreamForm"]
    keys: set[str] = set()
    for path in [*(ROOT / "sagemem" / "dream").glob("*.py"), ROOT / "sagemem" / "care" / "dream_state.py"]:
        text = path.read_text(encoding="utf-8")
        keys |= set(re.findall(r"\b(?:manifest|m|source)\[\"([a-z_]+)\"\]", text))
        keys |= set(re.findall(r"\b(?:manifest|m|source)\.(?:get|setdefault)\(\"([a-z_]+)\"", text))
    start = (ROOT / "sagemem" / "dream" / "run.py").read_text(encoding="utf-8")
    opening = start.split("manifest: dict[str, Any] = {", 1)[1].split("\n    }", 1)[0]
    keys |= set(re.findall(r'^\s+"([a-z_]+)":', opening, re.MULTILINE))
    assert "rounds" in keys and "audit_before" in keys  # the scan found the manifest's keys
    assert keys <= required | optional, sorted(keys - required - optional)


def test_a_session_ledger_is_of_the_session_form(store: MemoryStore) -> None:
    store.inject("when does the studio lease start?", session="s1")
    path = session.path_for(store.state_dir, "s1")
    data = json.loads(path.read_text(encoding="utf-8"))
    written("SessionForm", data)
    assert data["format"] == forms.SESSION and data["session"] == "s1"
    assert data["used"] > 0 and shape.problem(data, session.RECORD) == ""


def test_a_session_ledger_without_a_format_is_of_format_1_and_another_starts_afresh(tmp_path: Path) -> None:
    path = session.path_for(tmp_path, "s1")
    path.parent.mkdir()
    before = {"session": "s1", "used": 700, "reads": {"a.md": "v1"}}  # written before the number
    path.write_text(json.dumps(before), encoding="utf-8")
    with session.open_ledger(tmp_path, "s1") as ledger:
        assert (ledger.used, ledger.reads) == (700, {"a.md": "v1"})
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == forms.SESSION
    path.write_text(json.dumps({**before, "format": forms.SESSION + 1}), encoding="utf-8")
    assert [why for _, why in session.damaged(tmp_path)] != []  # `check`'s hint
    with session.open_ledger(tmp_path, "s1") as ledger:
        assert (ledger.used, ledger.reads) == (0, {})  # not read as this format
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == forms.SESSION


def test_the_install_record_is_of_the_install_form(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"autoMemoryEnabled": true}\n', encoding="utf-8")
    install.apply("claude-code", "project", add=True, cwd=project, memory="sagemem")
    path = project / ".sagemem" / "memory" / ".sagemem" / "backups" / install.RECORD
    data = json.loads(path.read_text(encoding="ascii"))
    written("InstallForm", data)
    assert data["format"] == forms.INSTALL and list(data)[0] == "format"
    assert set(data) == {"format", "created", "settings", "backups"}  # each part written here
    for entry in data["created"].values():
        written("InstallCreatedForm", entry)
    for keys in data["settings"].values():
        for setting in keys.values():
            written("InstallSettingForm", setting)
    assert data["settings"][str(settings)] == {"autoMemoryEnabled": {"was": True}}
    assert list(data["backups"].values()) == [str(settings)]


def test_an_install_record_of_another_format_is_read_as_none_and_set_aside(tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    claude = tmp_path / "p" / ".claude" / "settings.json"
    future = {"format": forms.INSTALL + 1, "created": {str(claude): {"folders": [str(claude.parent)]}}}
    (folder / install.RECORD).write_text(json.dumps(future), encoding="utf-8")
    backups = install.Backups(folder, [])
    assert backups.created(claude) is None  # uninstall would leave the file: not read as this format
    with pytest.warns(SagememWarning, match="set aside as .*, nothing of it read$"):
        backups.keep(claude, b"{}")
    data = json.loads((folder / install.RECORD).read_text(encoding="ascii"))
    assert data["format"] == forms.INSTALL and data["created"] == {}
    (kept,) = folder.glob(f"{install.RECORD}.damaged-*")
    assert json.loads(kept.read_text(encoding="utf-8")) == future


def test_the_dream_lock_note_is_of_its_form(tmp_path: Path) -> None:
    run_id = dream_record.new_id()
    with dream_record.running(tmp_path, run_id):
        data = json.loads((tmp_path / "dream" / dream_state.HOLDER_NAME).read_text(encoding="utf-8"))
    written("DreamLockForm", data)
    assert data["run"] == run_id and shape.problem(data, dream_state.HOLDER) == ""


def test_the_dream_triggers_times_are_of_their_form(tmp_path: Path) -> None:
    auto.record_run(tmp_path, when=1_800_000_000.5)
    data = json.loads((tmp_path / "dream" / dream_state.TRIGGER_NAME).read_text(encoding="utf-8"))
    written("DreamTriggerForm", data)
    assert data == {"last": 1_800_000_000.5} and shape.problem(data, dream_state.TRIGGER) == ""
    # Every time the trigger keeps, by its key: `state["..."] = ...` in dream/auto.py.
    text = (ROOT / "sagemem" / "dream" / "auto.py").read_text(encoding="utf-8")
    keys = set(re.findall(r'\bstate\["([a-z_]+)"\] =', text))
    assert keys == {"last", "started"}
    assert keys <= set().union(*declared()["DreamTriggerForm"])


def test_the_settings_file_is_read_by_the_fields_of_its_form(tmp_path: Path) -> None:
    """No sagemem command writes settings.json (a person does): what `load_settings` reads
    from it is the form, each field with a value it takes, and a value of the wrong type is
    named by `check` (`settings_problems`). The settings only the environment gives are not."""
    required, optional = declared()["SettingsForm"]
    assert not required
    assert set(config.Settings._fields) == optional | ENVIRONMENT_ONLY  # a new setting is one or the other
    given: dict[str, list[object]] = {
        "lang": ["zh"],
        "scopes": [["project"]],
        "rules": [False],
        "dream_base_url": ["http://127.0.0.1:9/v1"],
        "dream_model": ["a-model"],
        **{name: [low, high] for name, (_, low, high) in config._RANGES.items()},
    }
    assert set(given) == optional
    settings = tmp_path / "settings.json"
    default = config.load_settings(tmp_path, env={})
    for name, values in given.items():
        taken = []
        for value in values:
            settings.write_text(json.dumps({name: value}), encoding="utf-8")
            taken.append(config.load_settings(tmp_path, env={}) != default)
            assert config.settings_problems(tmp_path) == [], name
        assert any(taken), f"{name}: settings.json is not read for it"
        settings.write_text(json.dumps({name: {}}), encoding="utf-8")
        (problem,) = config.settings_problems(tmp_path)
        assert name in problem[1]
    only = {"dream_auto": "apply", "dream_sessions": True, "debug": True, "task": "t"}
    settings.write_text(json.dumps(only), encoding="utf-8")
    assert config.load_settings(tmp_path, env={}) == default
