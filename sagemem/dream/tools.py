"""The tools a dream run gives the model, each a call into `MemoryStore`.

Always: `list_memory`, `read_memory`, `audit_memory`. A report run adds `propose_write` and
`propose_archive`, which only record a proposal; an apply run adds `write_memory` and
`archive_memory`. There is no delete. Every argument passes the same name and size rules as
the command line; a refused call is answered with the reason and recorded.

A write or archive is guarded by the version the run last read of that file: a file the run
never read is refused, and a file someone changed after the run read it is a conflict,
recorded by the store's version guard, never overwritten. A new file (a name no memory has)
needs no earlier read: creating it cannot lose anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import MemoryNotFound, SagememError, VersionConflict
from ..files import read_bytes
from ..names import INDEX_NAME, check_name, is_reserved, name_key
from ..store import MemoryStore
from . import record

MAX_READ_CHARS = 20_000
MAX_WRITE_BYTES = 256 * 1024
MAX_REASON_CHARS = 500


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_FILE = {"type": "string", "description": "the memory's file name, e.g. project_deploy.md"}
_REASON = {"type": "string", "description": "why, in one short sentence"}
_CONTENT = {"type": "string", "description": "the whole new file: frontmatter and body"}

READ_TOOLS = [
    _tool("list_memory", "Every memory: file, type, size, updated date, description.", {}, []),
    _tool(
        "read_memory", "One memory's whole text (or MEMORY.md), with its version.", {"file": _FILE}, ["file"]
    ),
    _tool("audit_memory", "The health report of the directory: broken links, bad frontmatter ...", {}, []),
]
SESSIONS_TOOL = _tool(
    "search_sessions",
    "Search what the person and the agent said in this project's past sessions (newest first): "
    "facts said but never saved as a memory.",
    {"query": {"type": "string", "description": "words that must all appear"}},
    ["query"],
)
REPORT_TOOLS = [
    _tool(
        "propose_write",
        "Propose replacing a memory you read (or creating a new one) with this content.",
        {"file": _FILE, "content": _CONTENT, "reason": _REASON},
        ["file", "content", "reason"],
    ),
    _tool(
        "propose_archive",
        "Propose moving a memory you read to archive/.",
        {"file": _FILE, "reason": _REASON},
        ["file", "reason"],
    ),
]
APPLY_TOOLS = [
    _tool(
        "write_memory",
        "Replace a memory you read (or create a new one) with this content.",
        {"file": _FILE, "content": _CONTENT, "reason": _REASON},
        ["file", "content", "reason"],
    ),
    _tool(
        "archive_memory",
        "Move a memory you read to archive/ (a person can restore it). The reason is required.",
        {"file": _FILE, "reason": _REASON},
        ["file", "reason"],
    ),
]


class Refused(SagememError):
    """A tool call that is not carried out; the model is told why."""


class Toolbox:
    """The tools of one run over one store, and what they did: `changes`, `proposals`,
    `refused`. `before_write` is called once, before the first change (the snapshot)."""

    def __init__(
        self,
        store: MemoryStore,
        run_id: str,
        mode: str,
        before_write: Callable[[], None],
        sessions: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.mode = mode
        self.writer = f"sagemem dream {run_id}"
        self._before_write = before_write
        self._sessions = sessions
        self._wrote = False
        self.read: dict[str, str] = {}  # name key -> the version last read (or written)
        self.changes: list[dict[str, Any]] = []
        self.proposals: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.index: dict[str, Any] | None = None  # MEMORY.md before the first change

    @property
    def schemas(self) -> list[dict[str, Any]]:
        extra = [SESSIONS_TOOL] if self._sessions else []
        return READ_TOOLS + extra + (APPLY_TOOLS if self.mode == "apply" else REPORT_TOOLS)

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Carry out one call; the text is the model's answer, a refusal included."""
        handler = {
            "list_memory": self._list,
            "read_memory": self._read,
            "audit_memory": self._audit,
            **({"search_sessions": self._search_sessions} if self._sessions else {}),
            **(
                {"write_memory": self._write, "archive_memory": self._archive}
                if self.mode == "apply"
                else {"propose_write": self._propose_write, "propose_archive": self._propose_archive}
            ),
        }.get(name)
        try:
            if handler is None:
                raise Refused(f"there is no tool {name!r} in this run")
            return handler(**_known(args, handler))
        except (Refused, SagememError, OSError) as exc:
            self.refused.append({"tool": name, "args": _summary(args), "why": str(exc), "at": record.now()})
            return f"refused: {exc}"

    # -- reading ---------------------------------------------------------------------------

    def _list(self) -> str:
        lines = []
        scan = self.store.scan()
        for memory in sorted(scan.memories, key=lambda m: name_key(m.file)):
            lines.append(
                f"- {memory.file} · {memory.type or '?'} · {memory.size} bytes"
                f" · updated {memory.updated or '?'} · {' '.join(memory.description.split())[:160]}"
            )
        for problem in scan.problems:
            lines.append(f"- {problem.file} · unreadable: {problem.rule}")
        archived = len(self.store.archived())
        lines.append(f"({len(scan.memories)} memories; {archived} in archive/)")
        return "\n".join(lines)

    def _read(self, file: str) -> str:
        if _is_index(file):
            return self.store._index_text()[:MAX_READ_CHARS]
        found = self.store.read(_name(file))
        self.read[name_key(found.file)] = found.version
        text = found.text
        cut = (
            f"\n[... cut at {MAX_READ_CHARS} characters of {len(text)}]" if len(text) > MAX_READ_CHARS else ""
        )
        return f"file: {found.file}\nversion: {found.version}\n\n{text[:MAX_READ_CHARS]}{cut}"

    def _audit(self) -> str:
        report = self.store.check()
        if not report.findings:
            return f"no findings in {report.files} files"
        lines = [f"{report.problems} problem(s) in {report.files} files:"]
        for f in report.findings:
            where = f"{f.file}:{f.line}" if f.line else f.file
            lines.append(f"- [{f.severity}] {f.check} {where}: {f.message}")
        return "\n".join(lines)

    def _search_sessions(self, query: str) -> str:
        assert self._sessions is not None
        if not isinstance(query, str) or len(query.strip()) < 2:
            raise Refused("the query needs at least two characters")
        return self._sessions(query[:200])

    # -- changing --------------------------------------------------------------------------

    def _expected(self, file: str) -> tuple[str, str | None]:
        """The file's name as it is on disk and the version to guard with (None: a new file);
        `Refused` for a file that exists but was not read in this run."""
        file = _name(file)
        try:
            existing = self.store.resolve(file)
        except MemoryNotFound:
            return file, None
        version = self.read.get(name_key(existing))
        if version is None:
            raise Refused(f"{existing}: read it (read_memory) before changing it")
        return existing, version

    def _write(self, file: str, content: str, reason: str = "") -> str:
        file, expected = self._expected(file)
        data = _content(file, content)
        self._begin()
        before = _on_disk(self.store, file)
        try:
            written = self.store.write(
                file, data, expected_version=expected, writer=self.writer, reason=_reason(reason)
            )
        except VersionConflict as exc:
            raise Refused(
                f"{file}: changed since you read it ({exc}); not written, recorded as a conflict"
            ) from None
        after = _on_disk(self.store, written.file)
        self._change("create" if before is None else "write", written.file, reason, before, after)
        self.read[name_key(written.file)] = written.version
        return f"written: {written.file} (version {written.version})"

    def _archive(self, file: str, reason: str = "") -> str:
        if not " ".join(str(reason).split()):
            raise Refused("archive_memory needs a reason")
        file, expected = self._expected(file)
        if expected is None:
            raise Refused(f"{file}: no such memory")
        self._begin()
        before = _on_disk(self.store, file)
        try:
            self.store.archive(
                file, reason=f"dream {self.run_id}: {_reason(reason)}", expected_version=expected
            )
        except VersionConflict as exc:
            raise Refused(
                f"{file}: changed since you read it ({exc}); not archived, recorded as a conflict"
            ) from None
        self._change("archive", file, reason, before, None)
        self.read.pop(name_key(file), None)
        return f"archived: {file} (now in archive/)"

    def _propose_write(self, file: str, content: str, reason: str = "") -> str:
        file, expected = self._expected(file)
        data = _content(file, content)
        self.proposals.append(
            {"op": "write", "file": file, "version": expected, "content": data, "reason": _reason(reason)}
        )
        return f"proposed: write {file}"

    def _propose_archive(self, file: str, reason: str = "") -> str:
        if not " ".join(str(reason).split()):
            raise Refused("propose_archive needs a reason")
        file, expected = self._expected(file)
        if expected is None:
            raise Refused(f"{file}: no such memory")
        self.proposals.append({"op": "archive", "file": file, "version": expected, "reason": _reason(reason)})
        return f"proposed: archive {file}"

    def _begin(self) -> None:
        if not self._wrote:
            self._before_write()
            self._wrote = True
            index = self.store.index_bytes()
            self.index = {
                "before": record.stamp(index),
                "before_blob": None
                if index is None
                else record.keep_blob(self.store.state_dir, self.run_id, index),
            }

    def _change(self, op: str, file: str, reason: str, before: bytes | None, after: bytes | None) -> None:
        self.changes.append(
            {
                "seq": len(self.changes) + 1,
                "op": op,
                "file": file,
                "reason": _reason(reason),
                "no_reason": not " ".join(str(reason).split()),
                "before": record.stamp(before),
                "after": record.stamp(after),
                "before_blob": None
                if before is None
                else record.keep_blob(self.store.state_dir, self.run_id, before),
                "at": record.now(),
            }
        )


def replay(toolbox: Toolbox, proposals: list[dict[str, Any]]) -> None:
    """Carry out reviewed proposals (`sagemem dream apply`), each guarded by the version its
    file had when it was proposed: a file changed since is a conflict, skipped."""
    for proposal in proposals:
        file, version = str(proposal.get("file", "")), proposal.get("version")
        if version is not None:
            toolbox.read[name_key(file)] = str(version)
        if proposal.get("op") == "write":
            toolbox.call(
                "write_memory",
                {"file": file, "content": proposal.get("content", ""), "reason": proposal.get("reason", "")},
            )
        elif proposal.get("op") == "archive":
            toolbox.call("archive_memory", {"file": file, "reason": proposal.get("reason", "")})
        else:
            toolbox.refused.append(
                {"tool": "apply", "args": _summary(proposal), "why": "unknown operation", "at": record.now()}
            )


def _name(file: object) -> str:
    if _is_index(file):
        raise Refused(
            f"{INDEX_NAME} is kept by sagemem from each memory's description; change the description"
        )
    name = check_name(file)
    if is_reserved(name):
        raise Refused(f"{name}: is reserved, not a memory")
    return name


def _is_index(file: object) -> bool:
    return isinstance(file, str) and file.lower() == INDEX_NAME.lower()


def _content(file: str, content: object) -> str:
    if not isinstance(content, str):
        raise Refused(f"{file}: content must be text")
    if len(content.encode("utf-8")) > MAX_WRITE_BYTES:
        raise Refused(f"{file}: content over {MAX_WRITE_BYTES // 1024} KiB")
    return content


def _reason(reason: object) -> str:
    return " ".join(str(reason or "").split())[:MAX_REASON_CHARS]


def _on_disk(store: MemoryStore, file: str) -> bytes | None:
    try:
        return read_bytes(store.memory_dir / file)
    except MemoryNotFound:
        return None


def _known(args: dict[str, Any], handler: Callable[..., str]) -> dict[str, Any]:
    """The arguments the handler takes; a missing required one is refused by name."""
    names = handler.__code__.co_varnames[1 : handler.__code__.co_argcount]
    defaults = len(handler.__defaults__ or ())
    required = names[: len(names) - defaults]
    missing = [n for n in required if n not in args]
    if missing:
        raise Refused(f"missing argument(s): {', '.join(missing)}")
    return {n: args[n] for n in names if n in args}


def _summary(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as recorded: long text cut, with its size and sha256."""
    out: dict[str, Any] = {}
    for key, value in list(args.items())[:8]:
        text = value if isinstance(value, str) else repr(value)
        if len(text) > 200:
            data = text.encode("utf-8", "replace")
            out[key] = {"cut": text[:200], "bytes": len(data), "sha256": record.sha256(data)}
        else:
            out[key] = text
    return out
