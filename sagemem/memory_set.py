"""`MemorySet`: the scopes a person's agent works with, as one memory.

A set is the project's memory, the user's and a harness's own folder (`config.locate_scopes`),
each a whole `MemoryStore` with its own index, locks and conflicts. Reading spans them:
search and injection rank every scope as one collection, listings show them all. Writing
goes to one scope: the one named (`into`), else by type: `user` memories to the user scope,
the other types to the project scope where there is one, else the user scope; a harness's
own folder is written only when named (what its harness saves there is its business). With
more than one scope a memory is named with its scope, `user:user_profile.md`, wherever a
name is shown or taken; a plain name is the memory of that name in whichever scope holds
it, and an error when several do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .memory_store import MemoryStore
from .search import corpus as corpus_module
from .search import lexicon, retrieve
from .search.inject import Injection, inject_set
from .store.config import Scope, Settings, locate_scopes, user_scope
from .store.errors import MemoryNotFound, SagememError
from .store.memory import Memory
from .store.names import check_name

PROJECT_TYPES = ("feedback", "project", "reference")


class ScopeNotFound(SagememError):
    """No scope of that name is in the set (or it does not exist on disk yet)."""


class UserScopeUnavailable(SagememError):
    """A memory could not be saved where it belongs (the user scope left out or unwritable),
    and is not put anywhere else."""


class AmbiguousName(SagememError):
    """A plain file name that more than one scope holds: name the scope."""


class MemorySet:
    """The scopes of a memory set, in order; the first holds the session's ledger and the
    settings."""

    def __init__(self, scopes: Sequence[Scope], *, user: Scope | None = None) -> None:
        """`user`: where the user scope would be when the set has none yet (it is made by the
        first user memory saved); None where there is no such place (a directory chosen by
        hand, a set that leaves the user scope out)."""
        if not scopes:
            raise SagememError("a memory set needs at least one scope")
        self.scopes = list(scopes)
        self.stores = [MemoryStore.of(scope) for scope in self.scopes]
        self.user_place = user

    @classmethod
    def locate(
        cls,
        memory_dir: str | os.PathLike[str] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        only: str | None = None,
    ) -> MemorySet:
        """The set for `cwd` (see `config.locate_scopes`); `only` keeps one scope of it."""
        scopes = locate_scopes(memory_dir, state_dir, env=env, cwd=cwd)
        if only is not None:
            kept = [s for s in scopes if s.name == only]
            if not kept:
                names = ", ".join(s.name for s in scopes)
                raise ScopeNotFound(f"{only!r}: no such scope here (the scopes: {names}; see `sagemem path`)")
            scopes = kept
        return cls(scopes) if only is not None else cls.found(scopes, env=env)

    @classmethod
    def found(cls, scopes: Sequence[Scope], *, env: Mapping[str, str] | None = None) -> MemorySet:
        """The set of the scopes `locate_scopes` found, knowing where the user scope would be
        when it is not made yet (a user scope that exists and is not among them was left out
        by the settings, and stays out)."""
        user = None
        if not any(s.name in ("user", "dir") for s in scopes):
            place = user_scope(env)
            user = None if place.memory_dir.exists() else place
        return cls(scopes, user=user)

    def __repr__(self) -> str:
        return f"MemorySet({', '.join(s.name for s in self.scopes)})"

    @property
    def first(self) -> MemoryStore:
        return self.stores[0]

    @property
    def named(self) -> bool:
        """Whether memories are named with their scope (more than one scope)."""
        return len(self.stores) > 1

    def settings(self) -> Settings:
        return self.first.settings()

    # -- names ----------------------------------------------------------------------------

    def store(self, scope: str) -> MemoryStore:
        for store in self.stores:
            if store.scope == scope:
                return store
        raise ScopeNotFound(
            f"{scope!r}: no such scope here (the scopes: {self._names()}; see `sagemem path`)"
        )

    def name(self, store: MemoryStore, file: str) -> str:
        """How `file` of `store` is shown: with its scope when the set has several."""
        return f"{store.scope}:{file}" if self.named else file

    def find(self, name: str) -> tuple[MemoryStore, str]:
        """The scope and the file a name means: `scope:file`, or a plain name that one scope
        holds (`AmbiguousName` when several do; `MemoryNotFound` when none does)."""
        scope, file = self.split(name)
        if scope is not None:
            store = self.store(scope)
            return store, store.resolve(file)
        holders = []
        for store in self.stores:
            try:
                holders.append((store, store.resolve(file)))
            except MemoryNotFound:
                continue
        if not holders:
            raise MemoryNotFound(file)
        if len(holders) > 1:
            names = ", ".join(self.name(s, f) for s, f in holders)
            raise AmbiguousName(f"{file}: more than one scope holds it ({names}); name the one you mean")
        return holders[0]

    @staticmethod
    def split(name: str) -> tuple[str | None, str]:
        """(`scope`, `file`) of `scope:file`, or (None, `name`). File names hold no `:`."""
        if isinstance(name, str) and ":" in name:
            scope, _, file = name.partition(":")
            return scope, file
        return None, name

    # -- reading --------------------------------------------------------------------------

    def memories(
        self, *, type: str | None = None, tag: str | None = None
    ) -> list[tuple[MemoryStore, Memory]]:
        """Every scope's live memories that parse, scope by scope, in name order."""
        found = []
        for store in self.stores:
            if store.memory_dir.is_dir():
                found += [(store, m) for m in store.scan().select(type=type, tag=tag)]
        return found

    def search(
        self, query: str, *, limit: int | None = None, settings: Settings | None = None, pull: bool = False
    ) -> retrieve.Result:
        """Ranked snippets for `query` across every scope; nothing recorded. `pull`: asked for
        on purpose (the CLI, MCP, the UI), so weaker matches come back too, each hit marked
        `strong` when the injection would give it (`retrieve.pull`)."""
        settings = settings or self.settings()
        if limit is not None:
            settings = settings._replace(limit=max(1, limit))
        live = self._live()
        find = retrieve.pull if pull else retrieve.recall

        def work(corpora: list[corpus_module.Corpus]) -> retrieve.Result:
            shelves = [retrieve.Shelf(self._shelf(s), c) for s, c in zip(live, corpora, strict=True)]
            with lexicon.opened() as words:
                return find(shelves, query, settings, words)

        return corpus_module.using_all([(s.memory_dir, s.state_dir) for s in live], work)

    def similar(self, *texts: str, limit: int = 3) -> list[retrieve.Hit]:
        """Memories that look like the one described by `texts`: a pull search, so an agent
        about to save sees what it could update instead. None before the first memory is kept."""
        if not any(scope.memory_dir.is_dir() for scope in self.scopes):
            return []
        seen, found = set(), []
        settings = self.settings()._replace(candidates=limit, limit=limit)
        for hit in self.search(" ".join(t for t in texts if t), settings=settings, pull=True).ranked:
            if hit.file not in seen:
                seen.add(hit.file)
                found.append(hit)
        return found[:limit]

    def inject(
        self,
        query: str,
        *,
        session: str | None = None,
        reset: bool = False,
        task: str | None = None,
        care: Sequence[tuple[str, str]] = (),
        max_bytes: int | None = None,
        deadline: float | None = None,
    ) -> Injection:
        """The text to put into the agent's prompt for `query`, from every scope."""
        return inject_set(
            self._live(),
            query,
            self.settings(),
            session=session,
            reset=reset,
            task=task,
            care=care,
            max_bytes=max_bytes,
            deadline=deadline,
        )

    def snippet_dir(self, hit: retrieve.Hit) -> Path:
        """The folder a hit's file is in."""
        return self.store(hit.scope).memory_dir if hit.scope else self.first.memory_dir

    # -- writing --------------------------------------------------------------------------

    def route(self, type_: str, into: str | None = None) -> MemoryStore:
        """Where a new memory of `type_` goes: the scope named; else a `user` memory to the
        user scope, made for it when there is none yet, and never to a project (a project's
        memory is committed, and a person's own facts would go with it: `UserScopeUnavailable`
        when the user scope cannot be had); the other types to the project scope where there
        is one, else the user scope, else the first scope that is not a harness's own folder.
        A directory chosen by hand (`--dir`) takes every type."""
        if into is not None:
            if into == "user" and self.user_place is not None:
                return self._user_store()
            return self.store(into)
        if type_ == "user":
            for store in self.stores:
                if store.scope in ("user", "dir"):
                    return store
            return self._user_store()
        for scope in ("project", "user"):
            for store in self.stores:
                if store.scope == scope and store.memory_dir.is_dir():
                    return store
        own = [s for s, scope in zip(self.stores, self.scopes, strict=True) if not scope.native]
        return own[0] if own else self.first

    def create(self, *, into: str | None = None, **fields: Any) -> tuple[MemoryStore, Memory]:
        """`MemoryStore.create` in the scope `route` picks; the first memory saved to a
        scope not made yet makes it (`init`)."""
        store = self.route(str(fields.get("type", "")), into)
        if not store.memory_dir.is_dir():
            self._make(store)
        return store, store.create(**fields)

    def where(self, store: MemoryStore) -> str:
        """Where `store` is, in words, for the answer to a save."""
        path = store.memory_dir
        if store.scope == "user":
            return f"your user memory ({path}): yours alone, not in any project"
        if store.scope == "project":
            return f"the project's memory ({path}): committed and shared with the project"
        if store.scope == "claude":
            return f"Claude Code's auto memory for this project ({path})"
        return f"the memory directory {path}"

    def move(self, name: str, to: str, *, writer: str = "", reason: str = "") -> tuple[MemoryStore, Memory]:
        """Move a memory to another scope: created there (refused if that scope has the name),
        then taken out of its old scope only if it is still the version that was copied.
        When that fails (the source was edited, archived or deleted meanwhile), the new copy
        is taken back out, if it is still as written: a failed move leaves one copy, where
        it was. Both indexes follow."""
        source, file = self.find(name)
        target = self.store(to)
        if target is source:
            raise SagememError(f"{name}: is in {to} already")
        check_name(file)
        read = source.read(file)
        writer = writer or "sagemem move"
        moved = target.write(file, read.text, expected_version=None, writer=writer, reason=reason)
        try:
            source.take_out(file, expected_version=read.version, writer=writer)
        except (SagememError, OSError):
            with contextlib.suppress(SagememError, OSError):  # changed there meanwhile: both stay
                target.take_out(moved.file, expected_version=moved.version, writer=f"{writer} (undone)")
            raise
        return target, moved

    # -- internals ------------------------------------------------------------------------

    def _user_store(self) -> MemoryStore:
        """The user scope for a user memory, added to the set (made on disk by the save)."""
        place = self.user_place
        if place is None:
            raise UserScopeUnavailable(
                "a user memory is personal and goes to the user scope, which this project's "
                "settings leave out (`scopes` in settings.json); it is not put into the project's "
                "memory instead: add `--in project` to keep it there"
            )
        self.scopes.append(place)
        self.stores.append(MemoryStore.of(place))
        self.user_place = None
        return self.stores[-1]

    def _make(self, store: MemoryStore) -> None:
        try:
            store.init()
        except OSError as exc:
            why = exc.strerror or str(exc)
            if store.scope != "user":
                made = f"{store.memory_dir}: the memory directory could not be made ({why})"
                raise SagememError(made) from None
            raise UserScopeUnavailable(
                f"{store.memory_dir}: the user's memory could not be made ({why}); a user memory is "
                "personal and is not put into the project's memory instead: add `--in project` to "
                "keep it there"
            ) from None

    def _live(self) -> list[Scope]:
        live = [scope for scope in self.scopes if scope.memory_dir.is_dir()]
        if not live:
            self.first.require()  # the usual message: run `sagemem init`
        return live

    def _shelf(self, scope: Scope) -> str:
        return scope.name if self.named else ""

    def _names(self) -> str:
        return ", ".join(s.scope for s in self.stores)
