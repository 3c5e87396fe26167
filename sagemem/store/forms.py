"""Every form sagemem serializes, named in one place, each with its format number or none.

A form is what a file (or an index row) holds once written: the keys, and the type of each.
Its number changes whenever the form does, so that a reader knows what it reads: the search
index is named after its number and built again under a new one; the other records say
theirs (a record written before the numbers existed holds none and is of format 1).
`tests/test_forms.py` keeps each form's fields beside its number and fails when one changes
without the other, and checks that what the writers write is the form named here.

A form has no number when no reader needs to tell it from another form: its keys are read
one by one and a key whose meaning changed would take a new name (the settings a person
writes, the dream lock's note, which only names a run in a message, and the dream trigger's
two times). Such a form that must change in a way an older reader would misread gets a
number then, 2, and says it; a file without one is of format 1.

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
SESSION = 1  # `<state>/sessions/<key>.json` (`SessionForm`)
INSTALL = 1  # `install-record.json` in install's backup folder (`InstallForm`)
# With no number: `<state>/settings.json` (`SettingsForm`), `<state>/dream/lock.json`
# (`DreamLockForm`), `<state>/dream/auto.json` (`DreamTriggerForm`).

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

    class SessionForm(TypedDict):
        """What one session has received (`search/session.py`'s `Ledger`): its budget spent,
        the paragraphs and gap cards it was given, the versions of the memories it read (the
        write guard's record)."""

        format: NotRequired[int]
        session: str
        used: int  # bytes of memory text injected
        reserve_used: int  # bytes of gap cards injected
        injected: dict[str, str]  # "file:start-end" -> the paragraph's content hash
        last_query: str  # the previous message's signature
        baseline_done: bool
        cards: list[str]  # hashes of the gap cards shown
        reads: dict[str, str]  # memory file -> the version the agent last saw

    class InstallCreatedForm(TypedDict):
        folders: list[str]  # the folders install made for the file, deepest first

    class InstallSettingForm(TypedDict):
        was: NotRequired[Any]  # the value before install set the key; absent: there was none

    class InstallForm(TypedDict):
        """What `install` did that `uninstall` takes back (`agents/install.py`): the files it
        created, the settings it set, the backups it kept. Paths are any text (ASCII JSON)."""

        format: NotRequired[int]
        created: dict[str, InstallCreatedForm]  # file -> the folders made for it
        settings: NotRequired[dict[str, dict[str, InstallSettingForm]]]  # file -> key -> what was there
        backups: NotRequired[dict[str, str]]  # the copy's name -> the file it copies

    class SettingsForm(TypedDict):
        """`<state>/settings.json`, written by a person (`store/config.py` reads it): each
        setting on its own, a wrong one ignored. A number may be written as its text too. The
        settings the environment alone gives (`dream_auto`, `dream_sessions`, `debug`, `task`)
        are not read from it: the file may come with a clone."""

        budget: NotRequired[int]
        gate: NotRequired[float]
        body_gate: NotRequired[float]
        candidates: NotRequired[int]
        limit: NotRequired[int]
        cut: NotRequired[float]
        min_query_chars: NotRequired[int]
        lang: NotRequired[str]  # en or zh
        scopes: NotRequired[list[str] | str]  # a list, or names joined by commas
        rules: NotRequired[bool | str]
        archive_project_days: NotRequired[int]
        archive_reference_days: NotRequired[int]
        archive_user_days: NotRequired[int]
        snapshot_keep: NotRequired[int]
        dream_base_url: NotRequired[str]
        dream_model: NotRequired[str]
        dream_max_rounds: NotRequired[int]
        dream_max_tokens: NotRequired[int]
        dream_min_hours: NotRequired[int]
        dream_min_sessions: NotRequired[int]

    class DreamLockForm(TypedDict):
        """Who holds the one-run-at-a-time lock (`dream/record.py`): named in the refusal a
        second run meets, nothing more (the lock itself is an `flock`)."""

        run: str
        pid: int
        at: str  # ISO time, UTC

    class DreamTriggerForm(TypedDict):
        """The automatic trigger's times (`dream/auto.py`), in epoch seconds."""

        last: NotRequired[float]  # when the last run ended
        started: NotRequired[float]  # when the trigger last started one
