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
from sagemem.search import cache
from sagemem.store import forms
from sagemem.store import ledger as access
from sagemem.store.errors import VersionConflict
from tests.memories import DANCE, make

ROOT = Path(__file__).resolve().parent.parent

# Each form: the number it is written under, and its fields (optional ones marked `?`). A form
# whose fields change must change its number too, and this table with them.
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
}  # fmt: skip


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
