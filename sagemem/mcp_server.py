"""`sagemem mcp`: the memory store as an MCP server over stdio (needs `sagemem[mcp]`).

Each tool calls the `MemoryStore` facade directly, so every rule of the CLI holds here too:
one-segment names, no reserved files, size caps, version-guarded writes, conflicts kept.
Nothing but protocol goes to stdout. Each search brings the persisted index up to date first
(a listing of the directory when nothing changed), so what people, editors or git changed
is found at once and nothing needs a restart; no read snapshot is held between calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from mcp.server import MCPServer as _Server  # mcp >= 2
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

from .errors import SagememError, VersionConflict
from .store import MemoryStore

INSTRUCTIONS = (
    "File-based memory of this user and project: Markdown notes of preferences, decisions, "
    "references and feedback. Call memory_search before answering questions about past "
    "decisions, conventions or how things are done here; memory_read to see a whole memory "
    "and its version; memory_write to record something worth keeping (pass the version you "
    "read; a conflict means someone changed it: read again). Cite what you used with memory_cite."
)


def build(store: MemoryStore) -> Any:
    """The server, with its tools bound to `store`."""
    server = _Server("sagemem", instructions=INSTRUCTIONS)

    @server.tool()
    def memory_search(query: str, limit: int = 5) -> list[dict[str, Any]]:
        """Find the memory snippets relevant to a question. Returns ranked hits with the
        file, the line range, the snippet text and the memory's version. Empty when nothing
        is relevant."""
        from .inject import read_snippet

        hits = store.search(query, limit=max(1, min(limit, 20))).hits
        found = []
        for hit in hits:
            snippet = read_snippet(store.memory_dir, hit.entry, hit.start, hit.end)
            found.append(
                {
                    "file": hit.file,
                    "lines": [hit.start, hit.end],
                    "score": round(hit.score, 4),
                    "description": hit.description,
                    "snippet": snippet.text if snippet else "",
                    "version": hit.version,
                }
            )
        return found

    @server.tool()
    def memory_read(file: str) -> dict[str, Any]:
        """Read one memory file whole: its text and its version (pass the version back to
        memory_write to change it). Counts as a read."""
        read = _call(store.read, file)
        _call(store.record_use, "read", [read.file])
        return {"file": read.file, "version": read.version, "text": read.text, "problem": read.problem}

    @server.tool()
    def memory_write(
        file: str, content: str, expected_version: str | None = None, reason: str = ""
    ) -> dict[str, Any]:
        """Create a memory (leave expected_version empty) or replace one whose version you
        read. Content is Markdown with YAML frontmatter (name, description, type:
        user|feedback|project|reference). If the file changed since your version, nothing is
        written and the error names a conflict id: read the file again and redo the change."""
        memory = _call(
            store.write, file, content, expected_version=expected_version or None, writer="mcp", reason=reason
        )
        return {"file": memory.file, "version": memory.version}

    @server.tool()
    def memory_archive(file: str, reason: str) -> dict[str, Any]:
        """Retire a memory that is no longer true or useful: it moves to archive/ (never
        deleted) and is no longer found by search."""
        memory = _call(store.archive, file, reason=reason)
        return {"file": memory.file, "archived_at": memory.extra.get("archived_at")}

    @server.tool()
    def memory_check() -> dict[str, Any]:
        """Health of the memory directory: broken links, index problems, invalid files,
        likely secrets and more, each with the file and what to do."""
        return _call(store.check).to_dict()

    @server.tool()
    def memory_cite(files: list[str], receipt: str) -> dict[str, Any]:
        """Record that your answer used these memories. Give a receipt id unique to this
        answer; sending the same receipt again counts once."""
        counted = _call(store.cite, files, receipt=receipt)
        return {"counted": counted}

    return server


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a store call; its refusals come back to the model as tool errors it can act on."""
    try:
        return function(*args, **kwargs)
    except VersionConflict as exc:
        raise ToolError(f"version_conflict: {exc} [conflict_id={exc.conflict_id}]") from None
    except SagememError as exc:
        raise ToolError(str(exc)) from None


def serve(memory_dir: Path, state_dir: Path) -> None:
    """Run over stdio until the client closes it."""
    build(MemoryStore(memory_dir, state_dir)).run()
