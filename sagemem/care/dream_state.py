"""The records a dream run keeps in the state directory, by place and by shape.

`<state>/dream/<run id>/manifest.json` (what a run did), `<state>/dream/lock.json` (who holds
the lock) and `<state>/dream/auto.json` (the automatic trigger's times). Dream writes them
(`dream/record.py`, `dream/auto.py`) and reads them by these shapes; `check` judges them here,
below dream, so every caller of `check` (the command, the UI, `watch`, `fix`, the MCP tool,
dream's own audit) sees a damaged one without being told where to look.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..store import forms, shape
from ..store.errors import SagememError
from ..store.files import safe_folder
from ..store.names import check_stored_name

SCHEMA = forms.DREAM
DREAM_DIR = "dream"
MANIFEST_NAME = "manifest.json"
HOLDER_NAME = "lock.json"
TRIGGER_NAME = "auto.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_SMALL_BYTES = 4096  # the lock holder's note, the trigger's times
RUN_ID = re.compile(r"\A\d{8}-\d{6}-[0-9a-f]{4}\Z")

# The manifest as `dream/run.py` writes it (`forms.DreamForm`). The model's text may hold any
# code point (the file is ASCII JSON), so its strings are `any_text`. Every field a report, a
# listing, an apply or a rollback reads is here, so none of them meets a wrong type. A file a
# change or a proposal names is a memory's name by the path rule (it passed the rules for new
# names when the run made it): a rollback reads and writes it in the memory directory.
_TEXT = shape.any_text
_FILE = shape.passes(check_stored_name, "a memory file name")
_SHA = shape.matching(re.compile(r"[0-9a-f]{64}"), "a sha256")
_STAMP = shape.nothing_or(shape.obj({"bytes": shape.count, "sha256": _SHA}))
_RUN = shape.nothing_or(shape.matching(RUN_ID, "a dream run id"))
_NAMES = shape.each(_TEXT)
_FINDINGS = shape.each(shape.obj({"check": _TEXT}))
_AUDIT = shape.nothing_or(shape.obj({"files": shape.count, "problems": shape.count, "findings": _FINDINGS}))
_BLOB = shape.nothing_or(_SHA)
_INDEX = shape.obj({}, {"before": _STAMP, "after": _STAMP, "before_blob": _BLOB, "files": _NAMES})


def _argument(value: Any) -> str:
    """A refused call's argument as recorded: text, or a long one by its start and size."""
    return "" if isinstance(value, str) else shape.obj({"cut": _TEXT})(value)


MANIFEST = shape.obj(
    {
        "schema": shape.one_of(SCHEMA),
        "id": shape.matching(RUN_ID, "a dream run id"),
        "mode": shape.one_of("report", "apply"),
        "status": _TEXT,
        "rounds": shape.count,
        "tokens": shape.count,
        "changes": shape.each(
            shape.obj(
                {
                    "seq": shape.count,
                    "op": shape.one_of("write", "create", "archive"),
                    "file": _FILE,
                    "reason": _TEXT,
                    "before": _STAMP,
                    "after": _STAMP,
                },
                {"archived": _STAMP, "before_blob": _BLOB, "no_reason": shape.flag},
            )
        ),
        "proposals": shape.each(
            shape.obj(
                {"op": shape.one_of("write", "archive"), "file": _FILE, "reason": _TEXT},
                {"content": _TEXT, "version": shape.nothing_or(_TEXT)},
            )
        ),
        "refused": shape.each(shape.obj({"tool": _TEXT, "why": _TEXT, "args": shape.table(_argument)})),
    },
    {
        "stop": _TEXT,
        "model": shape.nothing_or(_TEXT),
        "base_url": shape.nothing_or(_TEXT),
        "model_checked": shape.flag,
        "started": _TEXT,
        "finished": shape.nothing_or(_TEXT),
        "snapshot": shape.nothing_or(shape.matching(re.compile(r"\d{8}-\d{6}-\d{6}"), "a snapshot id")),
        "summary": _TEXT,
        "report_error": _TEXT,
        "source": _RUN,
        "applied_by": _RUN,
        "sessions": shape.flag,
        "index": shape.nothing_or(_INDEX),
        "audit_before": _AUDIT,
        "audit_after": _AUDIT,
        "rollbacks": shape.each(
            shape.obj(
                {"at": _TEXT, "scope": shape.one_of("files", "all")},
                {key: _NAMES for key in ("restored", "archived", "conflicts", "retired", "kept")},
            )
        ),
    },
)
# The lock holder's note (`forms.DreamLockForm`) and the trigger's times (`forms.DreamTriggerForm`):
# forms with no number, each key read on its own.
HOLDER = shape.obj({}, {"run": _TEXT, "pid": shape.count, "at": _TEXT})
TRIGGER = shape.obj({}, {"last": shape.moment, "started": shape.moment})


def read_manifest(state_dir: Path, run_id: str) -> tuple[Path, Any, str]:
    """The manifest of run `run_id` (an id of `RUN_ID`'s pattern): its path, what it holds
    (None: no such file) and what is wrong with it ("" when nothing). `SagememError` when the
    run's folder is a link."""
    path = safe_folder(state_dir, DREAM_DIR, run_id, create=False) / MANIFEST_NAME
    try:
        manifest = shape.load(path, MAX_MANIFEST_BYTES, shape.anything, under=state_dir)
    except shape.Damaged as exc:
        return path, None, f"not a dream manifest ({exc.why})"
    problem = "" if manifest is None else _problem(manifest, run_id)
    return path, manifest, problem and f"not a dream manifest of schema {SCHEMA}: {problem}"


def _problem(manifest: Any, run_id: str) -> str:
    """What is wrong with a manifest ("" when nothing): its shape, and what the shape alone
    cannot say (its id is its folder's; a change that replaced bytes kept them)."""
    problem = shape.problem(manifest, MANIFEST)
    if problem:
        return problem
    if manifest["id"] != run_id:
        return "id: is not the run's own"
    for change in manifest["changes"]:
        if change["op"] != "create" and not isinstance(change.get("before_blob"), str):
            return "changes: a write or an archive without the bytes it replaced"
    for proposal in manifest["proposals"]:
        if proposal["op"] == "write" and not isinstance(proposal.get("content"), str):
            return "proposals: a write without its content"
    return ""


def damaged(state_dir: Path) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """(path, what is wrong and what sagemem does instead) for each file of `<state>/dream/`
    that does not fit: first those that stay until a person fixes them (a run's manifest, the
    lock holder's note), then those the next write replaces (the trigger's times)."""
    try:
        place = safe_folder(state_dir, DREAM_DIR, create=False)
        names = sorted(os.listdir(place)) if place.is_dir() else []
    except (SagememError, OSError):
        return [], []  # a link is `check`'s state-link finding
    found = []
    for name in filter(RUN_ID.match, names):
        try:
            path, _, why = read_manifest(state_dir, name)
        except SagememError as exc:  # the run's folder is a link
            path, why = place / name, str(exc)
        if why:
            found.append((path, f"{why}; the run is not listed, shown or undone"))
    try:
        shape.load(place / HOLDER_NAME, MAX_SMALL_BYTES, HOLDER, under=state_dir)
    except shape.Damaged as exc:
        found.append((exc.path, f"{exc.why}; it only names the run that holds the lock"))
    try:
        shape.load(place / TRIGGER_NAME, MAX_SMALL_BYTES, TRIGGER, under=state_dir)
    except shape.Damaged as exc:
        effect = "the automatic trigger reads no time from it, and its next save replaces it"
        return found, [(exc.path, f"{exc.why}; {effect}")]
    return found, []
