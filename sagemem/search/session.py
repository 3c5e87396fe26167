"""Per-session injection ledger: what a session has already received, and how much.

Each CLI call is a new process, so a session's memory of what it injected lives in
`<state>/sessions/<key>.json`, read and written under that session's lock so two calls for
one session (a hook firing twice) take turns. Ledgers untouched for a week are pruned. A
ledger says its format (`forms.SESSION`; one without it is of format 1): one of another
format is not read as this one, and the session starts afresh, as after a damaged one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..store import forms, shape
from ..store.digests import sha256_hex
from ..store.errors import SagememError
from ..store.files import safe_folder, write_atomic
from ..store.locking import exclusive
from ..store.records import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.forms import SessionForm

MAX_AGE_SECONDS = 7 * 24 * 3600
LOCK_TIMEOUT = 10.0
MAX_LEDGER_BYTES = 1024 * 1024
# A session's ledger as `Ledger.to_dict` writes it (`forms.SessionForm`; ASCII JSON: any code
# point survives).
_FIELDS = {
    "used": shape.count,
    "reserve_used": shape.count,
    "injected": shape.table(shape.any_text, key=shape.any_text),
    "last_query": shape.any_text,
    "baseline_done": shape.flag,
    "cards": shape.each(shape.any_text),
    "reads": shape.table(shape.any_text, key=shape.any_text),
}
RECORD = shape.obj({}, {"format": shape.one_of(forms.SESSION), "session": shape.any_text, **_FIELDS})


class Ledger:
    """What one session has received. Mutable: `inject` updates it, `session` saves it. (A
    plain class: the dataclasses module would cost the hook its import on every prompt.)"""

    def __init__(
        self,
        session: str,
        used: int = 0,
        reserve_used: int = 0,
        injected: dict[str, str] | None = None,
        last_query: str = "",
        baseline_done: bool = False,
        cards: list[str] | None = None,
        reads: dict[str, str] | None = None,
    ) -> None:
        self.session = session
        self.used = used  # bytes of memory text injected (the body pool)
        self.reserve_used = reserve_used  # bytes of gap cards injected (the reserve)
        self.injected = injected if injected is not None else {}  # "file:start-end" -> content hash
        self.last_query = last_query  # signature of the previous message
        self.baseline_done = baseline_done
        self.cards = cards if cards is not None else []  # hashes of the gap cards shown
        self.reads = reads if reads is not None else {}  # memory file -> version the agent last saw

    def to_dict(self) -> SessionForm:
        return {
            "format": forms.SESSION,
            "session": self.session,
            "used": self.used,
            "reserve_used": self.reserve_used,
            "injected": self.injected,
            "last_query": self.last_query,
            "baseline_done": self.baseline_done,
            "cards": self.cards,
            "reads": self.reads,
        }


PRUNE_EVERY_SECONDS = 3600


def path_for(state_dir: Path, session: str) -> Path:
    key = sha256_hex(session.encode("utf-8", "surrogatepass"))[:24]
    return state_dir / "sessions" / f"{key}.json"


@contextmanager
def open_ledger(state_dir: Path, session: str, *, reset: bool = False) -> Iterator[Ledger]:
    """The session's ledger, locked for the block and saved after it (fresh after `reset`)."""
    safe_folder(state_dir, "sessions")
    path = path_for(state_dir, session)
    with exclusive(path.with_suffix(".lock"), LOCK_TIMEOUT):
        # A reset (compaction, /clear) starts the budget and repeats afresh; the versions the
        # agent has read stay, so its next edit is not refused as unread.
        found, damaged = _load(path, session)
        ledger = Ledger(session, reads=found.reads) if reset else found
        yield ledger
        if damaged:
            shape.clear_folder(path)  # a file is replaced by the write; a folder is set aside
        fresh = not os.path.lexists(path)
        # ASCII JSON: a session id with a lone surrogate (valid JSON, not UTF-8) still saves.
        # Not durable: a power cut may cost the session its budget and repeats, nothing more.
        write_atomic(path, (json.dumps(ledger.to_dict()) + "\n").encode("ascii"), durable=False)
    if fresh:
        prune(path.parent)


def prune(folder: Path, now: float | None = None) -> None:
    """Remove session ledgers untouched for `MAX_AGE_SECONDS`, each under its own lock, taken
    without waiting (a session in use is left alone), at most once per `PRUNE_EVERY_SECONDS`
    (`.pruned` keeps the time): a new session's first prompt need not read the whole folder.
    Lock files stay: removing one another process may be about to lock would let two
    processes hold "the" lock."""
    now = now or time.time()
    marker = folder / ".pruned"
    with contextlib.suppress(OSError):
        if 0 <= now - os.lstat(marker).st_mtime < PRUNE_EVERY_SECONDS:  # a future time is none
            return
    with contextlib.suppress(OSError):
        # Never through a link, and never waiting on a FIFO a cloned state dir put there.
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
        os.close(os.open(marker, flags, 0o600))
        os.utime(marker, (now, now), follow_symlinks=False)
    cutoff = now - MAX_AGE_SECONDS
    with contextlib.suppress(OSError), os.scandir(folder) as items:
        for item in items:
            if not item.name.endswith(".json"):
                continue
            with contextlib.suppress(OSError, SagememError):
                if item.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue
                path = Path(item.path)
                with exclusive(path.with_suffix(".lock"), 0):
                    if os.lstat(path).st_mtime < cutoff:
                        os.unlink(path)


def _load(path: Path, session: str) -> tuple[Ledger, bool]:
    """The ledger at `path`, and whether it was damaged. A missing one, or one that cannot be
    used as it stands (a link, a FIFO, a folder, too large, not JSON, a field of the wrong
    type), starts afresh and is replaced on save: it holds one session's budget and repeats,
    nothing a person wrote."""
    try:
        data = shape.load(path, MAX_LEDGER_BYTES, RECORD)
    except shape.Damaged:
        return Ledger(session), True
    if data is None:
        return Ledger(session), False
    return Ledger(session, **{key: data[key] for key in _FIELDS if key in data}), False


def damaged(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for each session ledger that cannot be used as it stands."""
    found = []
    try:
        folder = safe_folder(state_dir, "sessions", create=False)
        names = sorted(os.listdir(folder))
    except (OSError, SagememError):
        return []  # a folder that is a link is `check`'s state-link finding
    for name in names:
        if name.endswith(".json"):
            try:
                shape.load(folder / name, MAX_LEDGER_BYTES, RECORD, under=state_dir)
            except shape.Damaged as exc:
                found.append((exc.path, f"{exc.why}; that session starts afresh (its budget and repeats)"))
    return found
