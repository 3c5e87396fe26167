"""Harness hooks: `sagemem hook <harness> [event]`, with the event's JSON on stdin.

The contract, for every harness and every input: exit 0, print nothing or exactly one JSON
object, never block or erase the user's prompt. Any failure (bad JSON, no memory dir,
unreadable files, a bug) prints nothing and adds one line to `<state>/hook.log` (or the
user's cache dir): a memory tool must never disrupt the agent's session. The event read
from stdin is capped (`MAX_EVENT_BYTES`), retrieval reads at most the start and the end of
a long prompt, and the context printed stays under `MAX_CONTEXT_BYTES` whatever the memories
hold, so the hook answers in time for any input.

The output has the shape the harness's record gives (`store/harnesses.py`); Claude Code,
Codex, Gemini CLI and DeepSeek Harness all read
`{"hookSpecificOutput": {"hookEventName": <the firing event>, "additionalContext": ...}}`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ..store.harnesses import HARNESSES, prompt_events
from ..store.records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from ..store.config import Scope
    from ..store.harnesses import Harness

START_EVENTS = ("SessionStart",)
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
READ_TOOLS = ("Read",)
WRITE_TOOLS = ("Write", "Edit", "MultiEdit")
# Claude Code and Codex deliver up to 10,000 characters of context whole; stay under that.
MAX_CONTEXT_BYTES = 9000
# An event larger than this is not parsed (a harness sends a prompt of megabytes at most).
MAX_EVENT_BYTES = 32 * 1024 * 1024
# Seconds the hook spends bringing the index up to date before it answers from what is
# indexed (`install` registers a 10 s timeout; a first build of a huge clone takes longer,
# and goes on at the next prompt instead of being killed at every one).
INDEX_SECONDS = 4.0
# A session start's repair of MEMORY.md (a snapshot, then the rewrite) begins only this soon
# after the hook started: later, it waits for the next session rather than risk the timeout.
REPAIR_SECONDS = 1.5
HOOK_LOG = "hook.log"
# What every injection starts with: a prompt that carries it is sagemem's own text coming
# back (a harness re-firing the prompt event with injected context), not a user's question.
OWN_MARKERS = ("(sagemem, from ", "（sagemem，来自 ")
_HOOK_CONTEXT_OPEN, _HOOK_CONTEXT_CLOSE = "<hook_context>", "</hook_context>"


def main(argv: list[str], *, memory_dir: str | None = None, state_dir: str | None = None) -> int:
    """Run one hook: read stdin, write the harness's JSON (or nothing) to stdout, exit 0."""
    harness = argv[0] if argv else ""
    event = argv[1] if len(argv) > 1 else None
    raw = _read_event()
    if raw is None:
        _log(None, f"{harness} {event or ''}: event over {MAX_EVENT_BYTES >> 20} MiB; nothing injected")
        return 0
    later: list[tuple[Path, Path, Path]] = []
    output = handle(harness, event, raw, memory_dir=memory_dir, state_dir=state_dir, later=later)
    if output is not None:
        try:
            sys.stdout.buffer.write(json.dumps(output, ensure_ascii=False).encode("utf-8"))
            sys.stdout.buffer.flush()
        except (OSError, AttributeError, ValueError):
            pass  # the harness closed the pipe (a timeout): nothing left to do
    if later:  # answered: now the full scan of what the pattern pass alone has read
        try:
            from ..search.corpus import full_scan_later

            full_scan_later(later)
        except Exception as exc:  # noqa: BLE001 - the next command scans them as well
            _log(later[0][1], f"{harness}: full scan not started: {type(exc).__name__}: {exc}")
    return 0


def _question(prompt: str) -> str:
    """The person's words in a prompt event. Gemini CLI in `-p` mode puts what SessionStart
    hooks said in front of them, as `<hook_context>...</hook_context>` blocks: sagemem's own
    baseline among them, which would read as sagemem's text coming back and silence the
    answer to the question."""
    while True:
        head = prompt.lstrip()
        if not head.startswith(_HOOK_CONTEXT_OPEN):
            return prompt
        end = head.find(_HOOK_CONTEXT_CLOSE)
        if end < 0:
            return prompt
        prompt = head[end + len(_HOOK_CONTEXT_CLOSE) :]


def _read_event() -> str | None:
    """Stdin as UTF-8 (whatever the locale says the console uses), None when it is over the
    cap; the rest of an oversized event is read and dropped, so the harness never writes
    into a closed pipe."""
    try:
        stream = sys.stdin.buffer
        data = stream.read(MAX_EVENT_BYTES + 1)
        if len(data) > MAX_EVENT_BYTES:
            while stream.read(1 << 20):
                pass
            return None
        return data.decode("utf-8", "replace")
    except (OSError, AttributeError, ValueError):
        return ""


def handle(
    harness: str,
    event: str | None,
    raw: str,
    *,
    memory_dir: str | None = None,
    state_dir: str | None = None,
    env: Mapping[str, str] | None = None,
    later: list[tuple[Path, Path, Path]] | None = None,
) -> dict[str, Any] | None:
    """The hook's output for one event, or None for "say nothing". Never raises. Into `later`
    go the indexes (memory dir, state dir, index file) holding files that only the pattern
    pass has read, for the caller to have scanned fully once it has answered."""
    state: Path | None = None
    started = time.monotonic()
    try:
        data = json.loads(raw) if raw.strip() else {}
        if not isinstance(data, dict):
            raise ValueError("the event is not a JSON object")
        fired = str(data.get("hook_event_name") or _named(event))
        if harness not in HARNESSES:
            raise ValueError(f"unknown harness {harness!r} (one of {', '.join(HARNESSES)})")
        record = HARNESSES[harness]
        if fired not in prompt_events() + START_EVENTS + TOOL_EVENTS:
            return None
        from ..search.inject import inject_set
        from ..store.config import load_settings, locate_scopes

        cwd = Path(str(data.get("cwd") or os.getcwd()))
        found = locate_scopes(memory_dir, state_dir, env=env, cwd=cwd)
        state = found[0].state_dir
        scopes = [scope for scope in found if scope.memory_dir.is_dir()]
        if fired in TOOL_EVENTS and not record.write_guard:  # its file tools are not Claude Code's
            return None
        if fired == "PreToolUse":
            refused = _secret_screen(data, found, env)
            if refused is not None:
                return refused
        if not scopes:
            return None  # no memory here: nothing to say, nothing wrong
        session = str(data["session_id"]) if data.get("session_id") else None
        if fired in TOOL_EVENTS:
            return _file_tool(harness, fired, data, scopes, session)
        care: list[tuple[str, str]] = []
        # The saving rules come once a session (the ledger keeps count), with whichever hook
        # runs first, asked for only while the session has not had them; where the harness
        # says so (`start_rules`), with the prompt's alone.
        prompted = fired not in START_EVENTS and session is not None
        wanted = prompted or (fired in START_EVENTS and record.start_rules)
        rules = (lambda: _rules_for(record, cwd, env)) if wanted else None
        if fired in START_EVENTS:
            query, reset = "", str(data.get("source", "")) in ("compact", "clear")
            care = _session_start(scopes, started + REPAIR_SECONDS)
        else:
            query, reset = _question(str(data.get("prompt") or "")), False
            if any(marker in query for marker in OWN_MARKERS):
                return None
        settings = load_settings(scopes[0].state_dir, env)
        if fired in START_EVENTS and settings.dream_auto:
            _dream_if_due(scopes[0], settings, cwd, env)
        injection = inject_set(
            scopes,
            query,
            settings,
            session=session,
            reset=reset,
            max_bytes=MAX_CONTEXT_BYTES,
            care=care,
            deadline=started + INDEX_SECONDS,
            rules=rules,
        )
        if later is not None:
            later += injection.unscanned
        if not injection.text:
            return None
        return _answer(record, fired, injection.text)
    except Exception as exc:  # fail open: whatever happened, the agent's prompt goes on untouched
        _log(state, f"{harness} {event or ''}: {type(exc).__name__}: {exc}")
        return None


def _named(event: str | None) -> str:
    """The event named on the command line: as the harness names it, or for a session's start
    and the prompt events also in kebab case (`user-prompt-submit`)."""
    for name in START_EVENTS + prompt_events():
        if event == "".join(f"-{c.lower()}" if c.isupper() else c for c in name).lstrip("-"):
            return name
    return event or ""


def _answer(record: Harness, fired: str, text: str) -> dict[str, Any]:
    """The injected text in the harness's shape: under its `output` keys, beside the firing
    event's name where it wants one."""
    *outer, key = record.output
    answer: dict[str, Any] = {record.output_event: fired} if record.output_event else {}
    answer[key] = text
    for name in reversed(outer):
        answer = {name: answer}
    return answer


def _rules_for(record: Harness, cwd: Path, env: Mapping[str, str] | None) -> Any:
    """How this harness's model may save a memory, when the harness tells it nothing itself:
    one with a memory folder of its own does, in its own prompt, while that memory is on
    (Claude Code: sagemem reads that folder as a scope). None: no rules from sagemem."""
    from ..search.inject import Rules
    from ..store.config import home_dir

    environment = os.environ if env is None else env
    home = home_dir(environment)
    try:
        if record.own_memory:
            from ..store.native import own_memory_on

            if own_memory_on(record.own_memory, cwd, home, environment):
                return None
        return Rules(mcp=_mcp_ready(record, cwd, home, environment), tool=record.mcp_tool)
    except Exception as exc:  # noqa: BLE001 - no rules is better than no memory
        _log(None, f"{record.name}: saving rules not chosen: {type(exc).__name__}: {exc}")
        return None


def _mcp_ready(record: Harness, cwd: Path, home: Path, env: Mapping[str, str]) -> bool:
    """Whether this harness starts sagemem's MCP server (so its tools can be named): an entry
    for it where the harness keeps one (the server needs no package beyond sagemem)."""
    if record.mcp_with_hooks:
        return True  # its install mounts the MCP client beside the hooks
    from ..store.harnesses import user_file
    from ..store.native import git_main_root, read_json
    from .install import registered_mcp

    root = git_main_root(cwd) or cwd
    files = [root / record.mcp_project] if record.mcp_project else []
    if record.mcp_user and not record.mcp_add:  # else its own command writes it: read below
        files.append(user_file(record, record.mcp_user, home, env))
    for path in files:
        servers = read_json(path).get(record.mcp_key)
        if isinstance(servers, dict) and "sagemem" in servers:
            return True
    found = registered_mcp(record.name, home=home, env=env)
    return bool(found and found[1])


def _session_start(scopes: list[Scope], deadline: float) -> list[tuple[str, str]]:
    """What a session starts with besides its baseline. After a merge, a pull or a checkout,
    MEMORY.md can carry duplicate lines (git's union merge) and lines of deleted memories:
    they are repaired (a snapshot is taken first). And a merge can carry an edit into an
    archived copy, out of every live memory: each such file is returned as a finding for the
    session to be told about. Failing here never stops the injection. The facade (and the
    care it brings) is imported only when there is a repair to make, and a repair (with its
    snapshot) starts only before `deadline`: past it, the next session's start makes it."""
    from ..store import listing
    from ..store.names import ARCHIVE_DIR

    care = []
    for scope in scopes:
        prefix = f"{scope.name}:" if len(scopes) > 1 else ""
        try:
            mend = not scope.native and listing.index_needs_mending(scope.memory_dir)
            report = _directory(scope).check_index() if mend else None
            if report is not None and (report.dangling or report.duplicates) and time.monotonic() < deadline:
                from ..memory_store import MemoryStore

                MemoryStore.of(scope).rebuild_index()
            elif report is not None and (report.dangling or report.duplicates):
                _log(scope.state_dir, "index repair at session start put off: no time left for its snapshot")
        except Exception as exc:  # the index is derived: a later rebuild can do it
            _log(scope.state_dir, f"index repair at session start failed: {type(exc).__name__}: {exc}")
        try:
            archived = scope.memory_dir / ARCHIVE_DIR
            changed = _directory(scope).archived_changes() if os.path.isdir(archived) else []
            care += [("archived-changed", f"{prefix}archive/{n}") for n, _, _ in changed]
        except Exception as exc:  # `check` reports it too
            _log(scope.state_dir, f"archive check at session start failed: {type(exc).__name__}: {exc}")
    return care


def _directory(scope: Scope) -> Any:
    from ..store.directory import Directory

    return Directory.of(scope)


def _dream_if_due(scope: Scope, settings: Any, cwd: Path, env: Mapping[str, str] | None) -> None:
    """The automatic dream trigger (opt-in): a detached run when one is due, never a wait."""
    try:
        from ..dream.auto import maybe_start

        if maybe_start(scope, settings, cwd=cwd, env=env):
            _log(scope.state_dir, f"dream: a {settings.dream_auto} run started in the background")
    except Exception as exc:  # noqa: BLE001 - the session goes on without it
        _log(scope.state_dir, f"dream trigger failed: {type(exc).__name__}: {exc}")


def _file_tool(
    harness: str, fired: str, data: dict[str, Any], scopes: list[Scope], session: str | None
) -> dict[str, Any] | None:
    """The write guard for the agent's own file tools on memory files.

    After a Read, the version the session saw is remembered and a read is counted. Before a
    Write or Edit of an existing memory, the call is denied (and the attempt kept in the
    conflict queue) unless the file is still the version this session last read or wrote.
    After a Write or Edit, the new version counts as seen and the index line follows it.
    Every scope is guarded (Claude Code's own memory folder too); the session's record of
    what it read is in the first scope's state, and each refusal in its own scope's queue.
    (Before this guard, `_secret_screen` has refused a write that adds a secret.)
    """
    tool = str(data.get("tool_name") or "")
    given = data.get("tool_input")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    scope, file = None, None
    for candidate in scopes:
        file = _memory_file(candidate.memory_dir, arguments.get("file_path"), cwd)
        if file is not None:
            scope = candidate
            break
    if scope is None or file is None or session is None or tool not in READ_TOOLS + WRITE_TOOLS:
        return None
    memory_dir, state_dir = scope.memory_dir, scope.state_dir
    key = f"{scope.name}:{file}" if len(scopes) > 1 else file  # how the session's ledger names it
    from ..search.session import open_ledger
    from ..store import guard
    from ..store import ledger as access
    from ..store.config import in_first_place
    from ..store.errors import SagememError
    from ..store.memory import version_of

    path = memory_dir / file
    current = guard.on_disk(path)
    written = arguments.get("content") if tool == "Write" else None

    def read_seen(place: Path) -> str | None:
        with open_ledger(place, session) as ledger:
            # After a Write, the session has seen what it wrote only if that is what is on
            # disk now (another writer may have saved in between).
            if fired == "PostToolUse" and current is not None:
                if written is None or current == str(written).encode("utf-8"):
                    ledger.reads[key] = version_of(current)
            return ledger.reads.get(key)

    # Where the state dir cannot be written (read-only, a sandbox), the session's record of
    # what it read goes to the same fallback as the injection ledger: the guard keeps guarding.
    seen, _ = in_first_place(scopes[0].state_dir, read_seen)
    if fired == "PostToolUse":
        if tool in READ_TOOLS:
            try:
                access.record(state_dir, "read", [file])
            except (OSError, SagememError) as exc:  # a count lost, never the guard's record
                _log(state_dir, f"access ledger not written: {exc}")
        elif current is not None:
            from ..store.directory import Directory

            Directory.of(scope).refresh_index_line(file)
        return None
    if tool not in WRITE_TOOLS or current is None or seen == version_of(current):
        return None  # creating a memory, or writing over what this session saw: fine
    text = current.decode("utf-8", "replace")
    proposed = _proposed(tool, arguments, text)
    why = "was never read in this session" if seen is None else "changed since this session last read it"
    conflict = guard.record_refusal(
        path,
        seen,
        None if proposed is None else proposed.encode("utf-8"),
        state_dir,
        f"{harness} session {session}",
        f"{tool} refused: the file {why}",
    )
    return _deny(
        f"sagemem: {file} {why} (by a person, another agent or git). Read it again and redo the "
        f"change on what it says now. Your attempt is kept as conflict {conflict.conflict_id} "
        f"(`sagemem conflicts show {conflict.conflict_id}`)."
    )


def _secret_screen(
    data: dict[str, Any], found: list[Scope], env: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """Before a Write, Edit or MultiEdit of a memory file, in a memory folder (a scope's, any
    project's `.sagemem/memory`, or Claude Code's own auto memory, whose files, MEMORY.md first,
    it puts into its prompts): the call is denied when it adds a likely secret, with the message
    `sagemem write` gives (the file's name too, when the name holds one), or when the file would
    be larger than a memory file may be (it could not be screened in time, and sagemem would not
    read it). A file reached through a link is screened as what the link points at, which is
    what the tool writes. These are the only refusals of a new memory file; nothing is
    recorded, as the record would keep the secret. Any other call, and any failure, lets the
    tool run."""
    tool = str(data.get("tool_name") or "")
    given = data.get("tool_input")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    raw = arguments.get("file_path")
    if tool not in WRITE_TOOLS or not isinstance(raw, str) or not raw.lower().endswith(".md"):
        return None
    path = Path(raw)
    cwd = data.get("cwd")
    if not path.is_absolute() and isinstance(cwd, str) and cwd:
        path = Path(cwd) / path
    folder = _memory_folder(path.parent, found, env)
    if folder is None:
        return None
    from ..store.directory import Directory
    from ..store.errors import InvalidMemory, InvalidName
    from ..store.files import MAX_FILE_BYTES
    from ..store.names import check_name, secret_in_name

    if secret_in_name(path.name) is not None:
        try:
            check_name(path.name)
        except InvalidName as exc:
            return _deny(f"sagemem: {exc}")
    try:
        current = _current(path)
    except InvalidMemory as exc:
        return _deny(f"sagemem: {exc}; more than a memory file may hold: keep it shorter, or split it")
    proposed = _proposed(tool, arguments, "" if current is None else current.decode("utf-8", "replace"))
    if proposed is None:
        return None
    size = len(proposed.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        limit = f"{MAX_FILE_BYTES // 1024} KiB"
        return _deny(
            f"sagemem: {path.name}: content is larger than {limit} ({size} bytes), more than a memory "
            "file may hold: keep it shorter, or split it"
        )
    target = path.resolve() if path.is_symlink() else path
    try:
        Directory(target.parent).refuse_new_secrets(target.name, proposed)
    except InvalidMemory as exc:
        from ..store.secrets import NOT_A_SECRET

        said = str(exc)  # `sagemem write`'s words, and how to mark a line that is no secret
        return _deny(f"sagemem: {said}" if NOT_A_SECRET in said else f"sagemem: {said}. {NOT_A_SECRET}")
    return None


def _current(path: Path) -> bytes | None:
    """The bytes a Write or Edit of `path` replaces: through a link, those of the regular file
    it points at; None when there is none. `InvalidMemory` for one over the size cap; one that
    is no regular file (a device, a FIFO) reads as none, never waited on."""
    from ..store.errors import InvalidMemory, MemoryNotFound
    from ..store.files import read_bytes

    try:
        return read_bytes(path.resolve() if path.is_symlink() else path)
    except MemoryNotFound:
        return None
    except InvalidMemory as exc:
        if "larger than" in str(exc):
            raise
        return None


def _memory_folder(folder: Path, found: list[Scope], env: Mapping[str, str] | None) -> Path | None:
    """`folder` if it is a memory folder: one of the scopes' (made yet or not), any project's
    (`<project>/.sagemem/memory`, wherever the session runs), or Claude Code's auto memory for
    any project (`<Claude's folder>/projects/<slug>/memory`)."""
    from ..store.config import PROJECT_DIR, home_dir
    from ..store.native import claude_home

    environment = os.environ if env is None else env
    try:
        here = folder.resolve()
        if any(here == scope.memory_dir.resolve() for scope in found):
            return folder
        if here.parts[-len(PROJECT_DIR.parts) :] == PROJECT_DIR.parts:
            return folder
        if here.name != "memory" or here.parent.parent.name != "projects":
            return None
        projects = (claude_home(home_dir(environment), environment) / "projects").resolve()
        return folder if here.parent.parent == projects else None
    except (OSError, RuntimeError, ValueError):
        return None


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def _memory_file(memory_dir: Path, raw: Any, cwd: str | None) -> str | None:
    """The memory file name `raw` points at, if it is one (top level, a valid memory name).
    A relative path is the agent's, so it counts from the agent's working directory."""
    if not isinstance(raw, str) or not raw:
        return None
    from ..store.names import check_name

    path = Path(raw)
    if not path.is_absolute() and cwd:
        path = Path(cwd) / path
    try:
        if path.parent.resolve() != memory_dir.resolve():
            return None
        return check_name(path.name)
    except (OSError, ValueError):
        return None


def _proposed(tool: str, arguments: dict[str, Any], text: str) -> str | None:
    """What the refused call would have written: a Write's content, or an Edit applied to the
    file as it is now (None when its old text is no longer there)."""
    if tool == "Write":
        content = arguments.get("content")
        return content if isinstance(content, str) else None
    edits = arguments.get("edits") if tool == "MultiEdit" else [arguments]
    for change in edits if isinstance(edits, list) else []:
        old, new = change.get("old_string"), change.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str) or old not in text:
            return None
        text = text.replace(old, new) if change.get("replace_all") else text.replace(old, new, 1)
    return text


def _log(state: Path | None, message: str) -> None:
    try:
        from ..store.config import locate
        from ..store.log import log_once

        log_once(state or locate().state_dir, message, HOOK_LOG, once=False)
    except Exception:  # noqa: S110 - the log is the last resort; nothing is left to tell
        pass
