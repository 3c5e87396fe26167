"""`MemoryStore`: the one facade over a memory directory. The CLI, the MCP server, the
hooks, the UI and dream call it.

It is the store's `Directory` (the files and every change to them) with the other parts
wired on: search and injection, and care (health checks, fixes, archive candidates,
snapshots and rollback). The parts do the work; this class holds no rule of its own beyond
the order of steps (a snapshot before every bulk change). See docs/architecture.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from .care import candidates, checkup, health
from .care import snapshot as snapshot_module
from .care.candidates import Candidate
from .search import corpus as corpus_module
from .search import inject as inject_module
from .search import lexicon, retrieve
from .search import session as session_module
from .search.cache import Progress
from .search.corpus import Corpus
from .search.inject import Injection
from .store import guard, index
from .store.archive import ARCHIVE_DIR
from .store.directory import Directory
from .store.errors import SagememError
from .store.files import MAX_COPY_BYTES, read_bytes, safe_folder
from .store.locking import exclusive
from .store.memory import Memory, decode
from .store.names import INDEX_NAME, name_key


class MemoryStore(Directory):
    """A memory directory: `MemoryStore(path)`; the state dir defaults to `<path>/.sagemem`."""

    progress: Progress | None = None

    # -- care -------------------------------------------------------------------------------

    def candidates(self, *, now: float | None = None) -> list[Candidate]:
        """Memories idle for at least their type's threshold, most idle first. Feedback,
        baseline and locked memories never are. Idle counts from the latest use of any kind
        in the ledger, else `updated:`, else the file's mtime."""
        settings = self.settings()
        return candidates.idle(
            self.memories(),
            limits={
                "project": settings.archive_project_days,
                "reference": settings.archive_reference_days,
                "user": settings.archive_user_days,
            },
            uses=self.ledger(),
            locked=self.locked(),
            mtime=lambda file: os.stat(self.memory_dir / file).st_mtime,
            now=time.time() if now is None else now,
        )

    def archive_candidates(self, *, now: float | None = None) -> list[tuple[str, str | None]]:
        """Archive every current candidate, after a snapshot. Each is tried on its own: returns
        (file, None) for each one archived and (file, why) for each one refused."""
        found = self.candidates(now=now)
        if not found:
            return []
        self.snapshot(label=f"before archiving {len(found)} candidate(s)", kind="auto")
        outcome: list[tuple[str, str | None]] = []
        for c in found:
            try:
                self.archive(c.file, reason=f"idle {c.idle_days} days (threshold {c.threshold} for {c.type})")
                outcome.append((c.file, None))
            except SagememError as exc:
                outcome.append((c.file, str(exc)))
        return outcome

    def check(self) -> health.HealthReport:
        """Every health check over the directory; reads only (the search index, derived data,
        is rebuilt when found damaged), and reports what it cannot read, every record of the
        state directory included (dream's too: care finds them by their place)."""
        scan = self.scan()
        texts: dict[str, str] = {}
        unreadable = [(p.file, p.rule) for p in scan.problems]
        for file in scan.files:
            try:
                texts[file] = decode(file, read_bytes(self.memory_dir / file))
            except SagememError:
                continue  # already among the scan's problems
        index_path = self.index_path()
        index_name = index_path.name if index_path else INDEX_NAME
        try:
            index_text = self.index_text()
        except SagememError as exc:
            unreadable.append((index_name, getattr(exc, "rule", str(exc))))
            index_text = ""
        try:
            archived = self.archived()
            changed = checkup.archived_in_detail(self.memory_dir, self.archived_changes(), archived)
        except SagememError as exc:
            unreadable.append((ARCHIVE_DIR + "/", str(exc)))
            archived, changed = [], []
        return health.check(
            texts=texts,
            memories={m.file: m for m in scan.memories},
            unreadable=unreadable,
            index_report=self.check_index()
            if self.native
            else index.check(index_text, scan.files, _by_key(scan.memories)),
            index_text=index_text,
            index_name=index_name,
            archived=archived,
            archived_changed=changed,
            copies=checkup.kept_copies(self.memory_dir, self.state_dir, self._kept_archived_names()),
            state=checkup.state_findings(
                self.memory_dir, self.state_dir, repairing=session_module.damaged(self.state_dir)
            ),
            search_index=corpus_module.verify(self.memory_dir, self.state_dir),
        )

    def purge_secrets(self) -> list[str]:
        """Redact every likely secret in the copies `check` scans besides the live memories:
        archived memories (resealed, when they were as archived), snapshot copies (their
        manifest updated) and conflict records. No snapshot first, on purpose: it would keep a
        copy of the secrets. Live memories are the person's to edit. Returns what changed; a
        copy that cannot be read (or an `archive/` that is refused) does not stop the rest,
        and is named in the error raised at the end."""
        failed = []
        try:
            names = self.archived_names()
        except SagememError as exc:
            names, failed = [], [str(exc)]
        changes, unread = checkup.purge_copies(
            self.memory_dir,
            self.state_dir,
            names,
            lock=self.write_lock,
            snapshots_locked=self._snapshots_locked,
        )
        failed += unread
        if failed:
            done = f"{len(changes)} other cop{'y' if len(changes) == 1 else 'ies'} redacted"
            raise SagememError(f"not redacted: {'; '.join(failed)} ({done})")
        return changes

    def _kept_archived_names(self) -> list[str]:
        """The archived copies' names, none when `archive/` is refused (`check` says why)."""
        try:
            return self.archived_names()
        except SagememError:
            return []

    def fix(self) -> list[str]:
        """Apply the safe, mechanical repairs (CRLF to LF, index lines) after a snapshot, each
        through the version-guarded write path; returns what was changed and what could not be."""
        report = self.check()
        fixable = [f for f in report.findings if f.check in health.FIXABLE]
        if not fixable:
            return []
        made = self.snapshot(label="before check --fix", kind="auto")
        changes = [f"snapshot {made.id} taken first{made.left_out()}"]
        for file in sorted({f.file for f in fixable if f.check == "crlf"}, key=name_key):
            try:
                self.convert_to_lf(file, writer="sagemem check --fix")
                changes.append(f"{file}: CRLF line endings converted to LF")
            except SagememError as exc:
                changes.append(f"{file}: not fixed ({exc})")
        if self.rewrite_index():
            changes.append(
                f"{INDEX_NAME}: dangling, duplicate and stale lines fixed, missing memories listed"
            )
        return changes

    def rebuild_index(self) -> bool:
        """Fix the index deterministically; True if MEMORY.md changed (it is rewritten only then,
        after a snapshot). The snapshot comes before the index's lock is taken: a rollback
        holds the snapshots' lock while it takes the index's, so the other order would make
        each wait for the other."""
        if not self.index_outdated():
            return False
        self.snapshot(label="before index --rebuild", kind="auto")
        return self.rewrite_index()

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self, *, label: str = "", kind: str = "manual") -> snapshot_module.Snapshot:
        """Copy every memory and MEMORY.md into a new snapshot, then keep only the newest."""
        with self._snapshots_locked():
            made = self._take_snapshot(label, kind)
            snapshot_module.prune(self.state_dir, self.settings().snapshot_keep, keep_ids={made.id})
        return made

    def snapshots(self) -> list[snapshot_module.Snapshot]:
        return snapshot_module.listing(self.state_dir)

    def rollback(self, snapshot_id: str, *, scope: str = "files") -> dict[str, Any]:
        """Put the snapshot's files back, after verifying it and snapshotting the present.
        `scope` is which parts are rolled back (the command line's `--parts`): `files`, the
        snapshot's files, while memories made since stay and keep their MEMORY.md lines; `all`
        also moves memories the snapshot did not have to `archive/`. Nothing is deleted;
        returns what was restored, retired and kept."""
        if scope not in ("files", "all"):
            raise SagememError(f"scope must be 'files' or 'all' (got {scope!r})")
        with self._snapshots_locked():
            chosen = snapshot_module.load(self.state_dir, snapshot_id)
            wanted = {
                item["name"]: read_bytes(chosen.path / "files" / item["name"], limit=MAX_COPY_BYTES)
                for item in chosen.files
            }
            targets = {name: self.put_back_target(name) for name in wanted}  # refuses before any write
            protection = self._take_snapshot(f"before rollback to {snapshot_id}", "protection")
            restored: list[str] = []
            outcome: dict[str, Any] = {"snapshot": snapshot_id, "scope": scope, "protection": protection.id}
            staying = self._staying(chosen, scope)
            index_lines = functools.partial(snapshot_module.keep_index_lines, names=staying)
            try:
                for name, data in wanted.items():
                    if self.put_back_copy(targets[name], data, index_lines=index_lines):
                        restored.append(name)
            except (OSError, SagememError) as exc:
                outcome.update(restored=restored, error=str(exc))
                snapshot_module.record_rollback(self.state_dir, outcome)
                raise SagememError(
                    f"rollback to {snapshot_id} stopped after {len(restored)} file(s): {exc}; the state "
                    f"before it is snapshot {protection.id}"
                ) from exc
            snapshot_module.prune(
                self.state_dir, self.settings().snapshot_keep, keep_ids={snapshot_id, protection.id}
            )
        retired, kept = [], []
        if scope == "all":
            keys = {name_key(name) for name in wanted}
            for name in self.files():
                if name_key(name) in keys:
                    continue
                if any(name_key(item["name"]) == name_key(name) for item in chosen.skipped):
                    kept.append(name)  # the snapshot left it out (too large to copy): not "made since"
                    continue
                try:
                    self.archive(name, reason=f"not in snapshot {snapshot_id} (rollback)")
                    retired.append(name)
                except SagememError:
                    kept.append(name)  # locked, or already in archive/: left where it is
        outcome.update(
            restored=restored,
            retired=retired,
            kept=kept,
            at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        )
        snapshot_module.record_rollback(self.state_dir, outcome)
        return outcome

    def _staying(self, chosen: snapshot_module.Snapshot, scope: str) -> set[str]:
        """The live memories a rollback leaves where they are, whose MEMORY.md lines it keeps:
        with `files`, every memory the snapshot does not hold (made since, or left out of it);
        with `all`, only those it will not move to `archive/` (left out of it, or locked)."""
        held = {name_key(item["name"]) for item in chosen.files}
        since = [name for name in self.files() if name_key(name) not in held]
        if scope == "files":
            return set(since)
        try:
            stays = {name_key(item["name"]) for item in chosen.skipped} | self.locked()
        except SagememError:
            return set(since)  # locks that cannot be read refuse every archive: all of them stay
        return {name for name in since if name_key(name) in stays}

    def _take_snapshot(self, label: str, kind: str) -> snapshot_module.Snapshot:
        names = self.files() + ([index_path.name] if (index_path := self.index_path()) else [])
        return snapshot_module.create(self.memory_dir, self.state_dir, names, label=label, kind=kind)

    def _snapshots_locked(self) -> Any:
        return exclusive(safe_folder(self.state_dir) / "snapshots.lock", guard.LOCK_TIMEOUT)

    # -- search -----------------------------------------------------------------------------

    def corpus(self) -> Corpus:
        """The searchable form of the directory, brought up to date from the cache."""
        self.require()
        return corpus_module.load(self.memory_dir, self.state_dir, progress=self.progress)

    def search(
        self, query: str, *, limit: int | None = None, corpus: Corpus | None = None, pull: bool = False
    ) -> retrieve.Result:
        """What the injection gives for `query` (`retrieve.recall`), or with `pull` every match,
        those it gives marked `strong` (`retrieve.pull`); no session, nothing recorded. A
        long-running caller may pass the corpus it keeps warm."""
        settings = self.settings()
        if limit is not None:
            settings = settings._replace(limit=max(1, limit))
        find = retrieve.pull if pull else retrieve.recall
        with lexicon.opened() as words:
            if corpus is not None:
                return find(corpus, query, settings, words)
            self.require()
            # Results carry their entries: nothing reads the corpus once the search is done.
            return corpus_module.using(
                self.memory_dir,
                self.state_dir,
                lambda own: find(own, query, settings, words),
                progress=self.progress,
            )

    def inject(
        self,
        query: str,
        *,
        session: str | None = None,
        reset: bool = False,
        task: str | None = None,
        care: Sequence[tuple[str, str]] = (),
    ) -> Injection:
        """The text to put into the agent's prompt for `query` ("" when nothing qualifies);
        `care`: (check, file) findings to tell the session at its start, as the SessionStart
        hook passes `archived_changes`."""
        self.require()
        return inject_module.inject(
            self.memory_dir,
            self.state_dir,
            query,
            self.settings(),
            session=session,
            reset=reset,
            task=task,
            care=care,
        )


def _by_key(memories: Iterable[Memory]) -> dict[str, Memory]:
    return {name_key(m.file): m for m in memories}
