"""Every form sagemem serializes, named in one place, each with its format number.

A form is what a file (or an index row) holds once written: the keys, and the type of each.
Its number changes whenever the form does, so that a reader knows what it reads: the search
index is named after its number and built again under a new one; the other records say
theirs (a record written before the numbers existed holds none and is of format 1).
`tests/test_forms.py` keeps each form's fields beside its number and fails when one changes
without the other, and checks that what the writers write is the form named here.

The forms are TypedDicts for the type checker only: the prompt hook reads several of them
and must not import `typing` to do so. What checks a form when it is read (a state dir may
come with a clone) stays beside its reader, in `store/shape.py`'s terms.
"""

from __future__ import annotations

from .records import TYPE_CHECKING

INDEX = 14  # the search index (`search/cache.py`), its entries (`EntryForm`) included
LEDGER = 1  # `<state>/access.json` (`LedgerForm`) and the lines of `access.log` (`LogLineForm`)
CONFLICT = 1  # `<state>/conflicts/<id>.json` (`ConflictForm`)
SNAPSHOT = 1  # `<state>/snapshots/<id>/MANIFEST.json` (`SnapshotForm`), its `schema`
DREAM = 1  # `<state>/dream/<run>/manifest.json` (`DreamForm`), its `schema`

if TYPE_CHECKING:
    from typing import Any, NotRequired, TypedDict

    class EntryForm(TypedDict):
        """One memory in the search index, as retrieval and injection read it."""

        file: str
        version: str
        name: str
        description: str
        type: str
        updated: str | None
        mtime: float
        baseline: bool
        baseline_priority: float
        body_start: int
        body_end: int
        paragraphs: list[list[int]]  # [start, end] lines of each unit
        contexts: NotRequired[list[list[int]]]  # [heading, lead, lead end] of each, when any has one
        secrets: list[list[int]]  # [start, end] offsets in the file's text

    class UseForm(TypedDict):
        last: float | None  # epoch seconds
        count: int

    class ReceiptForm(TypedDict):
        at: float
        files: list[str]

    class LedgerForm(TypedDict):
        format: NotRequired[int]
        files: dict[str, dict[str, UseForm]]  # file -> kind (injected, read, cited) -> use
        receipts: dict[str, ReceiptForm]  # citation id -> when and what it counted

    class LogLineForm(TypedDict):
        kind: str  # injected or read
        at: float
        files: list[str]

    class ConflictForm(TypedDict):
        format: NotRequired[int]
        id: str
        file: str
        kind: str
        expected_version: str | None
        disk_version: str | None
        proposed_version: str | None
        created: str
        writer: str
        reason: str
        resolution: str | None
        resolved_at: str | None
        disk: NotRequired[str | None]  # the side as text, or
        disk_base64: NotRequired[str | None]  # as base64 when it is not UTF-8
        proposed: NotRequired[str | None]
        proposed_base64: NotRequired[str | None]

    class SnapshotFileForm(TypedDict):
        name: str
        bytes: int
        sha256: str

    class SnapshotForm(TypedDict):
        schema: int
        id: str
        kind: str
        label: str
        created: str
        files: list[SnapshotFileForm]
        skipped: NotRequired[list[dict[str, str]]]  # {name, why}
        redacted: NotRequired[list[str]]

    class DreamForm(TypedDict):
        """A dream run's manifest (`care/dream_state.py` checks each field as it is read)."""

        schema: int
        id: str
        mode: str
        status: str
        rounds: int
        tokens: int
        changes: list[dict[str, Any]]
        proposals: list[dict[str, Any]]
        refused: list[dict[str, Any]]
        stop: NotRequired[str]
        model: NotRequired[str | None]
        base_url: NotRequired[str | None]
        model_checked: NotRequired[bool]
        started: NotRequired[str]
        finished: NotRequired[str | None]
        snapshot: NotRequired[str | None]
        summary: NotRequired[str]
        report_error: NotRequired[str]
        source: NotRequired[str | None]
        applied_by: NotRequired[str | None]
        sessions: NotRequired[bool]
        memory_dir: NotRequired[str]
        index: NotRequired[dict[str, Any] | None]
        audit_before: NotRequired[dict[str, Any] | None]
        audit_after: NotRequired[dict[str, Any] | None]
        rollbacks: NotRequired[list[dict[str, Any]]]
