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

import contextlib
from collections.abc import Callable
from typing import Any

from ..memory_store import MemoryStore
from ..store import guard
from ..store.errors import MemoryNotFound, SagememError, VersionConflict
from ..store.files import MAX_FILE_BYTES, read_bytes
from ..store.names import INDEX_NAME, check_name, name_key
from . import record

MAX_READ_CHARS = 20_000
MAX_WRITE_BYTES = 256 * 1024
MAX_REASON_CHARS = 500
MAX_LIST_CHARS = 64_000


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
    `refused`. `before_write` is called once, before the first change (the snapshot);
    `changed` after every change (the manifest is saved then, so a run killed mid-way can
    still be rolled back)."""

    def __init__(
        self,
        store: MemoryStore,
        run_id: str,
        mode: str,
        before_write: Callable[[], None],
        sessions: Callable[[str], str] | None = None,
        changed: Callable[[Toolbox], None] = lambda _box: None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.mode = mode
        self.writer = f"sagemem dream {run_id}"
        self._before_write = before_write
        self._sessions = sessions
        self._changed = changed
        self._wrote = False
        self.read: dict[str, str] = {}  # name key -> the version last read (or written)
        self.cut: set[str] = set()  # name keys read only in part: never rewritten whole
        self.archived_here: set[str] = set()  # name keys this run archived
        self.changes: list[dict[str, Any]] = []
        self.proposals: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.index: dict[str, Any] | None = None  # MEMORY.md before the first change

    @property
    def schemas(self) -> list[dict[str, Any]]:
        extra = [SESSIONS_TOOL] if self._sessions else []
        return READ_TOOLS + extra + (APPLY_TOOLS if self.mode == "apply" else REPORT_TOOLS)

    def call(self, name: object, args: dict[str, Any]) -> str:
        """Carry out one call; the text is the model's answer, a refusal included."""
        handlers: dict[str, Callable[..., str]] = {
            "list_memory": self._list,
            "read_memory": self._read,
            "audit_memory": self._audit,
            **({"search_sessions": self._search_sessions} if self._sessions else {}),
            **(
                {"write_memory": self._write, "archive_memory": self._archive}
                if self.mode == "apply"
                else {"propose_write": self._propose_write, "propose_archive": self._propose_archive}
            ),
        }
        handler = handlers.get(name if isinstance(name, str) else "")
        try:
            if handler is None:
                raise Refused(f"there is no tool {name!r} in this run")
            return handler(**_known(args, handler))
        except (Refused, SagememError, OSError, ValueError, TypeError) as exc:
            self.refuse(str(name), args, str(exc))
            return f"refused: {exc}"

    def refuse(self, tool: str, args: dict[str, Any], why: str) -> None:
        self.refused.append({"tool": tool, "args": _summary(args), "why": clean(why), "at": record.now()})

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
        text = "\n".join(lines)
        if len(text) > MAX_LIST_CHARS:
            text = text[:MAX_LIST_CHARS].rsplit("\n", 1)[0] + "\n(... the list is cut)"
        return f"{text}\n({len(scan.memories)} memories; {archived} in archive/)"

    def _read(self, file: str) -> str:
        if _is_index(file):
            return self.store.index_text()[:MAX_READ_CHARS]
        found = self.store.read(_name(file))
        key = name_key(found.file)
        self.read[key] = found.version
        text = found.text
        if len(text) > MAX_READ_CHARS:
            self.cut.add(key)
            return (
                f"file: {found.file}\nversion: {found.version}\n\n{text[:MAX_READ_CHARS]}\n"
                f"[... cut at {MAX_READ_CHARS} characters of {len(text)}: too long to rewrite here;"
                " you may archive it or leave it]"
            )
        self.cut.discard(key)
        return f"file: {found.file}\nversion: {found.version}\n\n{text}"

    def _audit(self) -> str:
        report = self.store.check()
        if not report.findings:
            return f"no findings in {report.files} files"
        lines = [f"{report.problems} problem(s) in {report.files} files:"]
        for f in report.findings:
            where = f"{f.file}:{f.line}" if f.line else f.file
            lines.append(f"- [{f.severity}] {f.check} {where}: {f.message}")
        return "\n".join(lines)[:MAX_LIST_CHARS]

    def _search_sessions(self, query: str) -> str:
        assert self._sessions is not None
        if not isinstance(query, str) or len(query.strip()) < 2:
            raise Refused("the query needs at least two characters")
        return self._sessions(query[:200])

    # -- changing --------------------------------------------------------------------------

    def _expected(self, file: object, *, whole: bool) -> tuple[str, str | None]:
        """The file's name as it is on disk and the version to guard with (None: a new file).
        Refused: a file not read in this run, read only in part (for a whole rewrite), gone
        since it was read (a conflict: a person archived or deleted it), archived by this run,
        or a new name that a memory in `archive/` has."""
        name = _name(file)
        key = name_key(name)
        if key in self.archived_here:
            raise Refused(f"{name}: archived in this run; it is not written again")
        existing = _resolved(self.store, name)
        if existing is None:
            if key in self.read:
                with contextlib.suppress(VersionConflict):  # records the conflict
                    path = self.store.memory_dir / name
                    guard.refuse_if_changed(path, self.read[key], self.store.state_dir, self.writer, "dream")
                raise Refused(f"{name}: gone since you read it (archived or deleted); recorded as a conflict")
            if key in {name_key(m.file) for m in self.store.archived()}:
                raise Refused(f"{name}: a memory of that name is in archive/; choose another name")
            return name, None
        version = self.read.get(name_key(existing))
        if version is None:
            raise Refused(f"{existing}: read it (read_memory) before changing it")
        if whole and name_key(existing) in self.cut:
            raise Refused(f"{existing}: you read it only in part; it is not rewritten whole")
        return existing, version

    def _write(self, file: str, content: str, reason: str = "") -> str:
        file, expected = self._expected(file, whole=True)
        data = _content(file, content)
        self._begin()
        before = on_disk(self.store, file)
        kept = None if before is None else record.keep_blob(self.store.state_dir, self.run_id, before)
        try:
            written = self.store.write(
                file, data, expected_version=expected, writer=self.writer, reason=_reason(reason)
            )
        except VersionConflict as exc:
            raise Refused(
                f"{file}: changed since you read it ({exc}); not written, recorded as a conflict"
            ) from None
        after = {"bytes": written.size, "sha256": written.version}
        self._change("create" if before is None else "write", written.file, reason, before, kept, after)
        self.read[name_key(written.file)] = written.version
        return f"written: {written.file} (version {written.version})"

    def _archive(self, file: str, reason: str = "") -> str:
        if not " ".join(str(reason).split()):
            raise Refused("archive_memory needs a reason")
        file, expected = self._expected(file, whole=False)
        if expected is None:
            raise Refused(f"{file}: no such memory")
        self._begin()
        before = on_disk(self.store, file)
        kept = None if before is None else record.keep_blob(self.store.state_dir, self.run_id, before)
        try:
            moved = self.store.archive(
                file,
                reason=f"dream {self.run_id}: {_reason(reason)}",
                expected_version=expected,
                writer=self.writer,
            )
        except VersionConflict as exc:
            raise Refused(
                f"{file}: changed since you read it ({exc}); not archived, recorded as a conflict"
            ) from None
        self._change(
            "archive",
            file,
            reason,
            before,
            kept,
            None,
            archived={"bytes": moved.size, "sha256": moved.version},
        )
        self.read.pop(name_key(file), None)
        self.archived_here.add(name_key(file))
        return f"archived: {file} (now in archive/)"

    def _propose_write(self, file: str, content: str, reason: str = "") -> str:
        file, expected = self._expected(file, whole=True)
        data = _content(file, content)
        self.store.refuse_new_secrets(file, data)  # a proposal lands in a report a person may commit
        self.proposals.append(
            {"op": "write", "file": file, "version": expected, "content": data, "reason": _reason(reason)}
        )
        return f"proposed: write {file}"

    def _propose_archive(self, file: str, reason: str = "") -> str:
        if not " ".join(str(reason).split()):
            raise Refused("propose_archive needs a reason")
        file, expected = self._expected(file, whole=False)
        if expected is None:
            raise Refused(f"{file}: no such memory")
        self.proposals.append({"op": "archive", "file": file, "version": expected, "reason": _reason(reason)})
        return f"proposed: archive {file}"

    def _begin(self) -> None:
        if self._wrote:
            return
        self._before_write()
        index = self.store.index_bytes()
        kept = None if index is None else record.keep_blob(self.store.state_dir, self.run_id, index)
        # The memories there were: those that come while the run goes on keep their index line
        # when a rollback puts the old MEMORY.md back.
        self.index = {"before": record.stamp(index), "before_blob": kept, "files": sorted(self.store.files())}
        self._wrote = True

    def _change(
        self,
        op: str,
        file: str,
        reason: str,
        before: bytes | None,
        kept: str | None,
        after: dict[str, Any] | None,
        **extra: Any,
    ) -> None:
        self.changes.append(
            {
                "seq": len(self.changes) + 1,
                "op": op,
                "file": file,
                "reason": _reason(reason),
                "no_reason": not " ".join(str(reason).split()),
                "before": record.stamp(before),
                "after": after,
                "before_blob": kept,
                "at": record.now(),
                **extra,
            }
        )
        self._changed(self)


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
            toolbox.refuse("apply", proposal, "unknown operation")


def _name(file: object) -> str:
    if _is_index(file):
        raise Refused(
            f"{INDEX_NAME} is kept by sagemem from each memory's description; change the description"
        )
    return check_name(file)  # also refuses the reserved names


def _is_index(file: object) -> bool:
    return isinstance(file, str) and name_key(file) == name_key(INDEX_NAME)


def _content(file: str, content: object) -> str:
    if not isinstance(content, str):
        raise Refused(f"{file}: content must be text")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise Refused(f"{file}: content is not valid Unicode text") from None
    if size > MAX_WRITE_BYTES:
        raise Refused(f"{file}: content over {MAX_WRITE_BYTES // 1024} KiB")
    return content


def _reason(reason: object) -> str:
    return clean(" ".join(str(reason or "").split())[:MAX_REASON_CHARS])


def clean(text: object) -> str:
    """Text as recorded (a manifest, a report): valid UTF-8, any likely secret redacted."""
    from ..store.secrets import redact

    return redact(str(text or "").encode("utf-8", "replace").decode("utf-8"))


def _resolved(store: MemoryStore, name: str) -> str | None:
    """The live memory's name as it is on disk (case aside), None when there is none."""
    try:
        return store.resolve(name)
    except MemoryNotFound:
        return None


def on_disk(store: MemoryStore, file: str, *, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of `file` in the memory directory (no link followed, up to `limit`), None
    when there is none."""
    try:
        return read_bytes(store.memory_dir / file, limit=limit)
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


def _summary(args: object) -> dict[str, Any]:
    """The arguments as recorded: a content by its size and sha256 only (a refused one may
    hold a secret), other long text cut, everything redacted."""
    out: dict[str, Any] = {}
    for key, value in list(args.items())[:8] if isinstance(args, dict) else []:
        text = value if isinstance(value, str) else repr(value)[:1000]
        data = text.encode("utf-8", "replace")
        if key == "content" or len(text) > 200:
            out[clean(str(key))[:40]] = {
                "cut": "" if key == "content" else clean(text[:200]),
                "bytes": len(data),
                "sha256": record.sha256(data),
            }
        else:
            out[clean(str(key))[:40]] = clean(text)
    return out
