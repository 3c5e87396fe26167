"""`sagemem mcp`: the memory set as an MCP server over stdio (`mcp_protocol`: no SDK needed).

Each tool calls the `MemorySet` / `MemoryStore` facades, so every rule of the CLI holds here
too: one-segment names, no reserved files, size caps, version-guarded writes, conflicts
kept, secrets refused. The tools are made for a model: `memory_remember` builds the file
(frontmatter, the `<type>_<slug>.md` name) from fields, where a whole file and a name to
invent are what models get wrong, and answers with the memories that look like it, so the
next step can be an update instead of a duplicate. Every parameter is described. Nothing but
protocol goes to stdout. Each search brings the persisted indexes up to date first (a
listing of each directory when nothing changed), so what people, editors or git changed is
found at once.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any

from ..memory_set import MemorySet
from ..memory_store import MemoryStore
from ..search.inject import read_snippet
from ..store.config import Scope
from ..store.errors import SagememError, SagememWarning, VersionConflict
from ..store.names import TYPES
from ..store.secrets import shown
from .mcp_protocol import Field, Server, ToolError

INSTRUCTIONS = (
    "File-based memory of this user and project: Markdown notes of preferences, decisions, "
    "references and feedback, in scopes (the project's, the user's, Claude Code's own). Call "
    "memory_search before answering questions about past decisions, conventions or how things "
    "are done here. To keep something: memory_search first; if a memory covers it, "
    "memory_update it with the version you got; else memory_remember. Never store secrets. "
    "Cite what you used with memory_cite."
)

Name = Annotated[
    str,
    Field(description="A memory's file name as memory_search or memory_list gave it, e.g. user:user_cat.md"),
]
Version = Annotated[
    str, Field(description="The memory's version (64 hex digits) from memory_read or memory_search")
]


def _doc(text: str) -> str:
    """A tool description without the source's indentation."""
    return inspect.cleandoc(text)


def build(memories: MemorySet | MemoryStore, *, version: str = "") -> Server:
    """The server, with its tools bound to `memories` (a set, or one store); `version` is
    the one it gives in its answer to `initialize`."""
    if isinstance(memories, MemoryStore):
        memories = MemorySet([memories.as_scope()])
    server = Server("sagemem", version=version, instructions=INSTRUCTIONS)

    def hit_dict(hit: Any) -> dict[str, Any]:
        snippet = read_snippet(memories.snippet_dir(hit), hit.entry, hit.start, hit.end)
        return {
            "file": hit.file,
            "lines": [hit.start, hit.end],
            "score": round(hit.score, 4),
            "strong": hit.strong,
            "description": hit.description,
            "snippet": snippet.text if snippet else "",
            "version": hit.version,
        }

    @server.tool(
        description=_doc(
            """Find the memory snippets for a question, across every scope: first those
            relevant enough that sagemem shows such snippets unasked (`strong`), then weaker
            matches, to judge by their text; each with the file, the line range, the snippet
            text, the memory's version and its score. Empty when no memory shares a word
            with the question."""
        )
    )
    def memory_search(
        query: Annotated[str, Field(description="The question or topic, in the user's words")],
        limit: Annotated[int, Field(description="Snippets at most (1-20)")] = 5,
    ) -> list[dict[str, Any]]:
        if not any(store.memory_dir.is_dir() for store in memories.stores):
            return []  # nothing saved yet: the first memory_remember makes the directory
        hits = _call(lambda: memories.search(query, limit=max(1, min(limit, 20)), pull=True).hits)
        return [hit_dict(h) for h in hits]

    @server.tool(
        description=_doc(
            """Read one memory whole: its text and its version (pass the version to
            memory_update or memory_write to change it). Counts as a read."""
        )
    )
    def memory_read(file: Name) -> dict[str, Any]:
        store, own = _call(memories.find, file)
        read = _call(store.read, own)
        _call(store.record_use, "read", [read.file])
        name = memories.name(store, read.file)
        return {"file": name, "version": read.version, "text": read.text, "problem": read.problem}

    @server.tool(
        description=_doc(
            """The memories kept, one line each (file, type, description), optionally of one
            scope or one type."""
        )
    )
    def memory_list(
        scope: Annotated[str | None, Field(description="Only this scope: project, user or claude")] = None,
        type: Annotated[str | None, Field(description="Only this type: " + ", ".join(TYPES))] = None,  # noqa: A002
    ) -> list[dict[str, Any]]:
        found = _call(memories.memories, type=type)
        return [
            {"file": memories.name(store, m.file), "type": m.type, "description": shown(m.description)}
            for store, m in found
            if scope is None or store.scope == scope
        ]

    @server.tool(
        description=_doc(
            """Save a new memory from its fields; sagemem writes the file and its index line.
            Search first and update an existing memory rather than adding a second one on
            the same subject. A user memory goes to the user's own memory, never into the
            project's. Returns the file and version, where it was saved (tell the user), and
            the most similar memories already kept (update one of them next if it covers the
            same thing). Refused if the text holds a secret."""
        )
    )
    @_warnings_said
    def memory_remember(
        type: Annotated[  # noqa: A002 - the field's name in every memory file
            str,
            Field(
                description="user (who the user is, preferences), feedback (how to work, with why), "
                "project (goals, decisions, constraints), reference (where to find things)"
            ),
        ],
        name: Annotated[str, Field(description="A short name; it makes the file name")],
        description: Annotated[
            str, Field(description="One precise line saying what this memory answers; search relies on it")
        ],
        body: Annotated[
            str, Field(description="The memory itself, in Markdown; dates absolute (YYYY-MM-DD)")
        ],
        tags: Annotated[list[str] | None, Field(description="Optional tags")] = None,
        aliases: Annotated[
            list[str] | None,
            Field(description="Other wordings it should be found by, including the other language"),
        ] = None,
        scope: Annotated[
            str | None,
            Field(description="project or user; default: user memories to user, the others to project"),
        ] = None,
    ) -> dict[str, Any]:
        alike = _call(memories.similar, name, description, " ".join(aliases or []))
        store, memory = _call(
            lambda: memories.create(
                into=scope,
                type=type,
                name=name,
                description=description,
                body=body,
                tags=tags or (),
                aliases=aliases or (),
                writer="mcp memory_remember",
            )
        )
        shown = memories.name(store, memory.file)
        similar = [{"file": h.file, "description": h.description, "version": h.version} for h in alike]
        return {
            "file": shown,
            "version": memory.version,
            "scope": store.scope or "dir",
            "saved_to": memories.where(store),
            "similar": [s for s in similar if s["file"] != shown],
        }

    @server.tool(
        description=_doc(
            """Change a memory's fields in place; every other byte stays as it is. Give only
            what changes. If the file changed since your version, nothing is written and the
            error names a conflict id: read it again and redo the change."""
        )
    )
    @_warnings_said
    def memory_update(
        file: Name,
        expected_version: Version,
        description: Annotated[str | None, Field(description="A new one-line description")] = None,
        body: Annotated[str | None, Field(description="A new body (replaces the old one)")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the old ones)")] = None,
        aliases: Annotated[list[str] | None, Field(description="New aliases (replace the old ones)")] = None,
    ) -> dict[str, Any]:
        fields = {
            k: v for k, v in {"description": description, "tags": tags, "aliases": aliases}.items() if v
        }
        store, own = _call(memories.find, file)
        memory = _call(
            lambda: store.update(
                own, expected_version=expected_version, body=body, writer="mcp memory_update", **fields
            )
        )
        return {"file": memories.name(store, memory.file), "version": memory.version}

    @server.tool(
        description=_doc(
            """Replace a memory's whole content (Markdown with YAML frontmatter: name,
            description, type), or create one when expected_version is empty. memory_remember
            and memory_update are easier; use this for a change they cannot make."""
        )
    )
    @_warnings_said
    def memory_write(
        file: Name,
        content: Annotated[str, Field(description="The whole file: frontmatter, then the body")],
        expected_version: Annotated[
            str | None, Field(description="The version you read; empty to create a new memory")
        ] = None,
        reason: Annotated[str, Field(description="Why, kept with a conflict")] = "",
    ) -> dict[str, Any]:
        scope, own = memories.split(file)
        if scope is not None:
            store = _call(memories.store, scope)
        else:
            try:
                store, own = memories.find(file)
            except SagememError:
                store = memories.first
        memory = _call(
            store.write, own, content, expected_version=expected_version or None, writer="mcp", reason=reason
        )
        return {"file": memories.name(store, memory.file), "version": memory.version}

    @server.tool(
        description=_doc(
            """Retire a memory that is no longer true or useful: it moves to archive/ (never
            deleted) and is no longer found by search."""
        )
    )
    @_warnings_said
    def memory_archive(
        file: Name, reason: Annotated[str, Field(description="Why it is retired")]
    ) -> dict[str, Any]:
        store, own = _call(memories.find, file)
        memory = _call(store.archive, own, reason=reason)
        return {"file": memories.name(store, memory.file), "archived_at": memory.extra.get("archived_at")}

    @server.tool(
        description=_doc(
            """Health of every scope: broken links, index problems, invalid files, likely
            secrets and more, each with the file and what to do."""
        )
    )
    def memory_check() -> dict[str, Any]:
        findings, files, problems = [], 0, 0
        for store in memories.stores:
            if not store.memory_dir.is_dir():
                continue
            report = _call(store.check)
            files += report.files
            problems += report.problems
            findings += [
                {**f.to_dict(), "file": memories.name(store, f.file) if memories.named else f.file}
                for f in report.findings
            ]
        return {"ok": not problems, "files": files, "problems": problems, "findings": findings}

    @server.tool(
        description=_doc(
            """Record that your answer used these memories. Give a receipt id unique to this
            answer; sending the same receipt again counts once."""
        )
    )
    def memory_cite(
        files: Annotated[list[str], Field(description="The memories the answer used")],
        receipt: Annotated[str, Field(description="An id unique to this answer")],
    ) -> dict[str, Any]:
        counted = []
        for name in files:
            store, own = _call(memories.find, name)
            counted += [
                memories.name(store, f) for f in _call(store.cite, [own], receipt=f"{receipt}:{name}")
            ]
        return {"counted": counted}

    return server


# The warnings of the tool call running in this context (the SDK runs each sync tool in a
# worker thread of its own, with a copy of the caller's context): a process-wide recorder
# such as `warnings.catch_warnings` would hand one call's warning to another.
_HEARD: ContextVar[list[str] | None] = ContextVar("sagemem_mcp_warnings", default=None)


def _listen() -> None:
    """Route SagememWarnings raised inside a tool call to that call's list, once a process;
    every other warning goes where it went before."""
    if getattr(warnings.showwarning, "sagemem", False):
        return
    previous = warnings.showwarning

    def heard(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        said = _HEARD.get()
        if said is not None and issubclass(category, SagememWarning):
            said.append(str(message))
        else:
            previous(message, category, filename, lineno, file, line)

    heard.sagemem = True  # type: ignore[attr-defined]
    warnings.showwarning = heard
    warnings.simplefilter("always", SagememWarning)  # each call is told, not only the first


def _warnings_said(tool: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """`tool`, whose answer also carries what sagemem warned of while it ran (a memory saved
    whose MEMORY.md line could not be written): the model is the one to tell the person."""

    @functools.wraps(tool)
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        _listen()
        said: list[str] = []
        token = _HEARD.set(said)
        try:
            answer = tool(*args, **kwargs)
        finally:
            _HEARD.reset(token)
        return {**answer, "warnings": said} if said else answer

    return run


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a store call; its refusals come back to the model as tool errors it can act on."""
    try:
        return function(*args, **kwargs)
    except VersionConflict as exc:
        # A name taken: the model can act on that at once, whatever the person settles later.
        hint = ". Choose another name, or memory_read that memory and memory_update it." if exc.taken else ""
        raise ToolError(f"version_conflict: {exc}{hint} [conflict_id={exc.conflict_id}]") from None
    except SagememError as exc:
        raise ToolError(str(exc)) from None


def serve(scopes: list[Scope], *, version: str = "") -> None:
    """Run over stdio until the client closes it, answering each request in turn. Standard
    input is read through `mcp_input.Requests`, so that a line too long to read or holding a
    lone surrogate is still answered."""
    import io
    import os

    from .mcp_input import Requests
    from .mcp_protocol import serve as answer_each

    # The protocol goes through copies of fds 0 and 1; fd 0 is then the null device and fd 1
    # stderr, so what a tool or a child reads or prints is never the protocol.
    wire_in, wire_out = os.dup(0), os.dup(1)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    server = build(MemorySet.found(scopes), version=version)
    lines = io.BufferedReader(Requests(wire_in))

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(wire_out, view) :]

    answer_each(server, iter(lines.readline, b""), write)
