"""The UI's actions: what each page request reads and each change does, through
`MemorySet` and `MemoryStore`, with names taken apart by scope and checked by the name rule.
`server.py` serves them over HTTP; `App` knows nothing of HTTP beyond the status an error
maps to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

from .. import dream
from ..dream import report as dream_report
from ..memory_set import AmbiguousName, MemorySet, ScopeNotFound
from ..memory_store import MemoryStore
from ..store.archive import ARCHIVE_DIR
from ..store.config import Scope
from ..store.errors import MemoryNotFound, SagememError, VersionConflict
from ..store.files import read_bytes
from ..store.names import check_name, name_key


class Refused(Exception):
    """A request the server will not serve: (status, message)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Gone(Exception):
    """The client hung up while its request was being read."""


class Conflicted(Exception):
    """A write refused because the file changed (the refused text is in its scope's conflict
    queue): what the page needs to show both versions."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data["error"])
        self.data = data


class App:
    """The API: one method per route, each a call into the memory set or into the store of one
    of its scopes. Memories are named as the set names them (`user:user_cat.md` when it has
    several scopes, the plain file name with one), and so are the conflicts and snapshots,
    which each belong to one scope (`user:<id>`): what the page sends back goes to that scope."""

    def __init__(self, memories: MemorySet) -> None:
        self.memories = memories

    # -- reading ------------------------------------------------------------------------

    def overview(self, _query: dict[str, str]) -> dict[str, Any]:
        """Every memory of every scope (live and archived) with what the list, the chips and
        the star map need; the scopes; the header's counts."""
        memories = self.memories
        troubles: list[str] = []  # one damaged state file must not take the whole page down
        live: list[dict[str, Any]] = []
        archived: list[dict[str, Any]] = []
        broken: list[dict[str, str]] = []
        scopes: list[dict[str, Any]] = []
        problems = conflicts = 0
        now = time.time()
        for store, scope in self._scopes():
            where = store.scope if memories.named else ""
            # The first scope's failure is the page's (a missing directory says `sagemem init`);
            # another scope that cannot be listed is named in the troubles, the others shown.
            scan = store.scan() if store is memories.first else _or(store.scan, None, troubles, where)
            if scan is None:
                continue
            locked = _or(store.locked, set(), troubles, where)
            uses = _or(store.ledger, {}, troubles, where)
            items = [self._item(store, m, False, locked, uses, now) for m in scan.memories]
            live += items
            archived += [
                self._item(store, m, True, locked, uses, now)
                for m in _or(store.archived, [], troubles, where)
            ]
            broken += [{"file": memories.name(store, p.file), "rule": p.rule} for p in scan.problems]
            problems += _or(lambda s=store: s.check().problems, 0, troubles, where)
            conflicts += len(_or(store.conflicts, [], troubles, where))
            scopes.append(
                {
                    "name": store.scope,
                    "memory_dir": str(store.memory_dir),
                    "native": scope.native,
                    "memories": len(items),
                }
            )
        tags: dict[str, int] = {}
        types: dict[str, int] = {}
        for entry in live:
            types[entry["type"]] = types.get(entry["type"], 0) + 1
            for tag in entry["tags"]:
                tags[tag] = tags.get(tag, 0) + 1
        return {
            "memory_dir": str(memories.first.memory_dir),
            "named": memories.named,
            "scopes": scopes,
            "memories": live + archived,
            "broken": broken,
            "types": dict(sorted(types.items())),
            "tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
            "problems": problems,
            "conflicts": conflicts,
            "troubles": troubles,
        }

    def _item(
        self,
        store: MemoryStore,
        memory: Any,
        archived: bool,
        locked: set[str],
        uses: dict[str, Any],
        now: float,
    ) -> dict[str, Any]:
        record = uses.get(memory.file)
        last = record.last_used if record else None
        return {
            "file": self.memories.name(store, memory.file),
            "scope": store.scope,
            "name": memory.title,
            "description": memory.description,
            "type": memory.type,
            "tags": list(memory.tags),
            "updated": memory.updated,
            "bytes": memory.size,
            "version": memory.version,
            "locked": name_key(memory.file) in locked,
            "archived": archived,
            "archived_reason": str(memory.extra.get("archived_reason", "")) if archived else "",
            "archived_at": str(memory.extra.get("archived_at", "")) if archived else "",
            "idle_days": None if last is None else int((now - last) // 86400),
        }

    def search(self, query: dict[str, str]) -> dict[str, Any]:
        """The memories `sagemem search` ranks for `q` across every scope, best first, weak
        matches included, as a search asked for on purpose (the page ANDs them with its chips)."""
        text = query.get("q", "").strip()
        if not text:
            return {"files": []}
        result = self.memories.search(text, limit=30, pull=True)
        return {"files": list(dict.fromkeys(h.file for h in result.ranked))}

    def memory(self, query: dict[str, str]) -> dict[str, Any]:
        name = _name(query.get("file"))
        if query.get("archived") == "1":
            store, file = self._archived(name)
            found = next((m for m in store.archived() if m.file == file), None)
            if found is None:
                raise MemoryNotFound(file)
            data = read_bytes(store.memory_dir / ARCHIVE_DIR / found.file)  # links and size refused
            return {
                "file": self.memories.name(store, found.file),
                "archived": True,
                "version": found.version,
                "text": data.decode("utf-8"),
            }
        store, file = self._live(name)
        read = store.read(file)
        return {
            "file": self.memories.name(store, read.file),
            "archived": False,
            "version": read.version,
            "text": read.text,
            "problem": read.problem,
        }

    def candidates(self, _query: dict[str, str]) -> dict[str, Any]:
        """Every scope's archive candidates, the most idle first; a scope whose candidates
        cannot be judged (a damaged lock list) is named in `troubles`, the others shown."""
        troubles: list[str] = []
        found = [
            {**c.to_dict(), "file": self.memories.name(store, c.file), "scope": store.scope}
            for store, _ in self._scopes()
            for c in _or(store.candidates, [], troubles, store.scope if self.memories.named else "")
        ]
        return {"candidates": sorted(found, key=lambda c: -c["idle_days"]), "troubles": troubles}

    def health(self, _query: dict[str, str]) -> dict[str, Any]:
        """`sagemem check` over every scope, each finding named with its scope."""
        findings: list[dict[str, Any]] = []
        files = problems = 0
        for store, _ in self._scopes():
            report = store.check()
            files += report.files
            problems += report.problems
            findings += [
                {**f.to_dict(), "file": self._id(store, f.file), "scope": store.scope}
                for f in report.findings
            ]
        return {"ok": not problems, "files": files, "problems": problems, "findings": findings}

    def snapshots(self, _query: dict[str, str]) -> dict[str, Any]:
        return {
            "snapshots": [
                {**s.to_dict(), "id": self._id(store, s.id), "scope": store.scope}
                for store, _ in self._scopes()
                for s in store.snapshots()
            ]
        }

    def dreams(self, _query: dict[str, str]) -> dict[str, Any]:
        """Every dream run of every scope, oldest first, with what it did."""
        return {
            "runs": [
                {**m, "id": self._id(store, m["id"]), "scope": store.scope}
                for store, _ in self._scopes()
                for m in dream.summaries(store)
            ]
        }

    def dream_run(self, query: dict[str, str]) -> dict[str, Any]:
        """One run: its report, as a person reads it, and its manifest."""
        store, run_id = self._owner(query.get("id"), _holds_run)
        manifest = dream.show(store, run_id)
        return {"report": dream_report.text(manifest), "manifest": manifest}

    def conflicts(self, _query: dict[str, str]) -> dict[str, Any]:
        return {
            "conflicts": [
                self._conflict_dict(store, c) for store, _ in self._scopes() for c in store.conflicts()
            ]
        }

    # -- changing -----------------------------------------------------------------------

    def save(self, body: dict[str, Any]) -> dict[str, Any]:
        """Write the whole file, guarded by the version the page loaded (None: create)."""
        name = _name(body.get("file"))
        text = body.get("text")
        if not isinstance(text, str):
            raise Refused(HTTPStatus.BAD_REQUEST, "`text` must be the file's whole text")
        expected = body.get("expected_version")
        store, file = self._target(name, text)
        with self._guarded(store):
            memory = store.write(file, text, expected_version=expected, writer="sagemem ui")
        return {"file": self.memories.name(store, memory.file), "version": memory.version}

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """A new memory in the scope named, else where its type belongs (as `sagemem new`)."""
        into = body.get("scope") or None
        if into is not None and not isinstance(into, str):
            raise Refused(HTTPStatus.BAD_REQUEST, "`scope` must be the name of a scope")
        kind = str(body.get("type") or "")
        store = self.memories.route(kind, into)
        tags = body.get("tags") or []
        with self._guarded(store):
            memory = store.create(
                type=kind,
                name=str(body.get("name") or ""),
                description=str(body.get("description") or ""),
                body=str(body.get("body") or ""),
                tags=[str(t) for t in tags] if isinstance(tags, list) else [],
                writer="sagemem ui",
            )
        return {
            "file": self.memories.name(store, memory.file),
            "version": memory.version,
            "scope": store.scope,
        }

    def archive(self, body: dict[str, Any]) -> dict[str, Any]:
        store, file = self._live(_name(body.get("file")))
        memory = store.archive(file, reason=str(body.get("reason") or "archived in sagemem ui"))
        return {"file": self.memories.name(store, memory.file)}

    def restore(self, body: dict[str, Any]) -> dict[str, Any]:
        store, file = self._archived(_name(body.get("file")))
        return {"file": self.memories.name(store, store.restore(file).file)}

    def lock(self, body: dict[str, Any]) -> dict[str, Any]:
        store, file = self._live(_name(body.get("file")))
        return {"changed": store.lock(file)}

    def unlock(self, body: dict[str, Any]) -> dict[str, Any]:
        name = _name(body.get("file"))
        try:
            store, file = self._live(name)
        except MemoryNotFound:  # a lock outlives its memory: taken off the first scope, as the CLI does
            store, file = self.memories.first, name
        return {"changed": store.unlock(file)}

    def apply_candidates(self, body: dict[str, Any]) -> dict[str, Any]:
        """Archive the chosen candidates, each on its own (one refusal does not stop the rest),
        after a snapshot of each scope they are in."""
        files = body.get("files") or []
        if not isinstance(files, list):
            raise Refused(HTTPStatus.BAD_REQUEST, "`files` must be a list of file names")
        wanted = sorted({_name(f) for f in files})
        found = {
            self.memories.name(store, c.file): (store, c)
            for store, _ in self._scopes()
            for c in store.candidates()
        }
        done, refused, made = [], [], {}
        for name in wanted:
            if name not in found:
                refused.append({"file": name, "error": "no longer an archive candidate"})
                continue
            store, candidate = found[name]
            if store.scope not in made:
                label = "before archiving candidates in sagemem ui"
                made[store.scope] = self._id(store, store.snapshot(label=label, kind="auto").id)
            try:
                store.archive(candidate.file, reason=candidate.reason)
                done.append(name)
            except SagememError as exc:
                refused.append({"file": name, "error": str(exc)})
        snapshots = list(made.values())
        return {
            "archived": done,
            "refused": refused,
            "snapshot": snapshots[0] if snapshots else None,
            "snapshots": snapshots,
        }

    def fix(self, _body: dict[str, Any]) -> dict[str, Any]:
        """`sagemem check --fix` in every scope (each takes its own snapshot first)."""
        return {"changes": [self._id(store, c) for store, _ in self._scopes() for c in store.fix()]}

    def rollback(self, body: dict[str, Any]) -> dict[str, Any]:
        """Roll the snapshot's scope back to it; `parts`: which parts (files, all)."""
        mode = _parts(body)
        store, sid = self._owner(body.get("id"), _holds_snapshot)
        outcome = store.rollback(sid, scope=mode)
        for key in ("snapshot", "protection"):
            outcome[key] = self._id(store, outcome[key])
        for key in ("restored", "retired", "kept"):
            outcome[key] = [self.memories.name(store, f) for f in outcome[key]]
        return outcome

    def dream_rollback(self, body: dict[str, Any]) -> dict[str, Any]:
        """Undo a dream run, once: `parts` `files` (only what it changed) or `all` (its snapshot)."""
        mode = _parts(body)
        store, run_id = self._owner(body.get("id"), _holds_run)
        done = dream.rollback(store, run_id, scope=mode)
        for key in ("restored", "archived", "retired", "kept"):
            if key in done:
                done[key] = [self.memories.name(store, f) if f != "MEMORY.md" else f for f in done[key]]
        done["protection"] = self._id(store, done["protection"])
        return done

    def dream_apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """Carry out a report run's proposals, as reviewed (no model is asked)."""
        store, run_id = self._owner(body.get("id"), _holds_run)
        manifest = dream.apply_proposals(store, run_id)
        return {
            "id": self._id(store, manifest["id"]),
            "status": manifest["status"],
            "stop": manifest["stop"],
            "changes": [self.memories.name(store, c["file"]) for c in manifest["changes"]],
            "refused": [r["why"] for r in manifest["refused"]],
        }

    def resolve(self, body: dict[str, Any]) -> dict[str, Any]:
        keep = str(body.get("keep") or "")
        if keep not in ("disk", "proposed"):
            raise Refused(HTTPStatus.BAD_REQUEST, "keep must be disk or proposed")
        store, cid = self._owner(body.get("id"), _holds_conflict)
        with self._guarded(store):
            settled = store.resolve_conflict(cid, keep, writer="sagemem ui")
        return self._conflict_dict(store, settled)

    # -- where a name or an id points -----------------------------------------------------

    def _scopes(self) -> list[tuple[MemoryStore, Scope]]:
        """The scopes whose folder exists, in order (and the first always, so that a missing
        directory is reported rather than shown as empty)."""
        memories = self.memories
        pairs = zip(memories.stores, memories.scopes, strict=True)
        return [(s, c) for s, c in pairs if s is memories.first or s.memory_dir.is_dir()]

    def _id(self, store: MemoryStore, text: str) -> str:
        """An id (or a finding's subject) of one scope, as the page gets it: `scope:` in front
        when the set has several scopes."""
        return f"{store.scope}:{text}" if self.memories.named else text

    def _live(self, name: str) -> tuple[MemoryStore, str]:
        """The store and the file a live memory's name means (`MemorySet.find`); the store
        itself resolves a name in a scope named or in the only scope, as it did before sets."""
        scope, file = self.memories.split(name)
        if scope is not None:
            return self.memories.store(scope), file
        if not self.memories.named:
            return self.memories.first, file
        return self.memories.find(file)

    def _archived(self, name: str) -> tuple[MemoryStore, str]:
        """The store whose `archive/` holds `name`: the scope named, else the one scope that
        has it archived (the first when none has, whose refusal then names it)."""
        scope, file = self.memories.split(name)
        if scope is not None:
            return self.memories.store(scope), file
        holders = [store for store, _ in self._scopes() if self.memories.named and _has_archived(store, file)]
        if len(holders) > 1:
            names = ", ".join(self.memories.name(s, file) for s in holders)
            raise AmbiguousName(
                f"{file}: more than one scope has it archived ({names}); name the one you mean"
            )
        return (holders[0] if holders else self.memories.first), file

    def _target(self, name: str, text: str) -> tuple[MemoryStore, str]:
        """Where a save goes: the scope named, the scope holding the memory, else (a new one)
        where `sagemem new` would put a memory of its type."""
        try:
            return self._live(name)
        except MemoryNotFound:
            pass  # new, or deleted meanwhile: the write itself says which
        from ..store.memory import parse_memory

        try:
            kind = parse_memory(name, text.encode("utf-8")).type
        except (SagememError, ValueError):
            kind = ""
        return self.memories.route(kind), name

    def _owner(self, raw: Any, holds: Callable[[MemoryStore, str], bool]) -> tuple[MemoryStore, str]:
        """The store a conflict's or a snapshot's id belongs to: `scope:<id>`, else the one
        scope that `holds` it (the first when none does, whose refusal then names it)."""
        if not isinstance(raw, str):
            raise Refused(HTTPStatus.BAD_REQUEST, "`id` must be a conflict's or a snapshot's id")
        scope, own = self.memories.split(raw)
        if scope is not None:
            return self.memories.store(scope), own
        holders = [s for s, _ in self._scopes() if self.memories.named and holds(s, own)]
        if len(holders) > 1:
            names = ", ".join(self._id(s, own) for s in holders)
            raise AmbiguousName(f"{own}: more than one scope has it ({names}); name the one you mean")
        return (holders[0] if holders else self.memories.first), own

    @contextmanager
    def _guarded(self, store: MemoryStore) -> Iterator[None]:
        """A stale write of `store` becomes the page's 409: the error, the conflict's id in the
        set, and the file on disk now to show beside the page's text."""
        try:
            yield
        except VersionConflict as exc:
            data: dict[str, Any] = {
                "error": str(exc),
                "conflict_id": self._id(store, exc.conflict_id),
                "file": self.memories.name(store, exc.file),
            }
            try:
                current = store.read(exc.file)
                data.update(theirs=current.text, theirs_version=current.version)
            except (SagememError, OSError, ValueError):
                data.update(theirs=None, theirs_version=None)  # gone, or not text: the queue has it
            raise Conflicted(data) from exc

    def _conflict_dict(self, store: MemoryStore, conflict: Any) -> dict[str, Any]:
        return {
            **conflict.to_dict(),
            "id": self._id(store, conflict.id),
            "file": self.memories.name(store, conflict.file),
            "scope": store.scope,
        }


GET_ROUTES = {
    "/api/overview": App.overview,
    "/api/search": App.search,
    "/api/memory": App.memory,
    "/api/candidates": App.candidates,
    "/api/health": App.health,
    "/api/snapshots": App.snapshots,
    "/api/conflicts": App.conflicts,
    "/api/dream": App.dreams,
    "/api/dream/run": App.dream_run,
}
POST_ROUTES = {
    "/api/save": App.save,
    "/api/create": App.create,
    "/api/archive": App.archive,
    "/api/restore": App.restore,
    "/api/lock": App.lock,
    "/api/unlock": App.unlock,
    "/api/candidates/apply": App.apply_candidates,
    "/api/fix": App.fix,
    "/api/rollback": App.rollback,
    "/api/conflicts/resolve": App.resolve,
    "/api/dream/rollback": App.dream_rollback,
    "/api/dream/apply": App.dream_apply,
}


def _or(read: Any, fallback: Any, troubles: list[str], where: str) -> Any:
    """`read()`, or `fallback` with what went wrong noted in `troubles` (named with the scope
    `where` it happened in, when the set has several)."""
    try:
        return read()
    except (SagememError, OSError, ValueError) as exc:
        troubles.append(f"{where}: {exc}" if where else str(exc))
        return fallback


def _has_archived(store: MemoryStore, file: str) -> bool:
    try:
        return any(name_key(m.file) == name_key(file) for m in store.archived())
    except (SagememError, OSError):
        return False  # a damaged archive/ holds nothing one can restore


def _holds_conflict(store: MemoryStore, conflict_id: str) -> bool:
    return any(c.id == conflict_id for c in store.conflicts())


def _holds_run(store: MemoryStore, run_id: str) -> bool:
    return any(m["id"] == run_id for m in dream.runs(store))


def _parts(body: dict[str, Any]) -> str:
    """Which parts a rollback puts back: `parts` (files, all); a page of an earlier version
    sends it as `scope`."""
    mode = str(body.get("parts") or body.get("scope") or "files")
    if mode not in ("files", "all"):
        raise Refused(HTTPStatus.BAD_REQUEST, "parts must be files or all")
    return mode


def _holds_snapshot(store: MemoryStore, snapshot_id: str) -> bool:
    return any(s.id == snapshot_id for s in store.snapshots())


def _name(raw: Any) -> str:
    """A memory's name from the page: a file name, or `scope:file`, its file part checked by
    the library's own rule (no paths). The scope part is only ever compared with the names of
    the set's scopes, never used as a path."""
    if not isinstance(raw, str):
        raise Refused(HTTPStatus.BAD_REQUEST, "`file` must be a memory file name")
    scope, file = MemorySet.split(raw)
    if scope == "":
        raise Refused(HTTPStatus.BAD_REQUEST, "a scope's name must come before the `:`")
    check_name(file)
    return raw


def status_of(exc: Exception) -> HTTPStatus:
    if isinstance(exc, Refused):
        return exc.status
    if isinstance(exc, VersionConflict):
        return HTTPStatus.CONFLICT
    if isinstance(exc, (MemoryNotFound, ScopeNotFound, KeyError)):
        return HTTPStatus.NOT_FOUND
    return HTTPStatus.BAD_REQUEST


def as_set(memories: MemorySet | MemoryStore) -> MemorySet:
    """A store given on its own is a set of that one scope, whose names stay plain."""
    if isinstance(memories, MemorySet):
        return memories
    return MemorySet([memories.as_scope()])
