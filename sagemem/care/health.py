"""Health checks: what is wrong in a memory directory, found without changing anything.

Each finding names a check, a file (and a line where one applies) and what to do. Findings
of severity "hint" (a link to an archived memory) are information, not problems. These are
pure functions over what the store has read; `MemoryStore.check` gathers the inputs.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..store import frontmatter
from ..store.errors import InvalidMemory
from ..store.index import IndexReport
from ..store.memory import Memory
from ..store.names import TYPES, name_key
from ..store.text import conflict_marker_line, split_lines

MAX_INDEX_LINES = 200  # what Claude Code loads of MEMORY.md
MAX_INDEX_BYTES = 25 * 1024

CHECKS = {
    "index-dangling": "index line for a memory that does not exist",
    "index-unlisted": "memory missing from the index",
    "index-duplicate": "second index line for one memory",
    "index-stale": "index line whose description is out of date",
    "index-too-long": "MEMORY.md longer than Claude Code loads",
    "unreadable": "file that cannot be read as a memory",
    "case-duplicate": "two files whose names differ only in case or Unicode form",
    "merge-conflict": "unresolved git conflict markers",
    "no-frontmatter": "memory without frontmatter",
    "description": "missing or multi-line description",
    "duplicate-description": "description shared with another memory",
    "unknown-type": "type that is none of user, feedback, project, reference",
    "type-mismatch": "type differs from the file-name prefix",
    "crlf": "CRLF line endings",
    "hash-comment": "unquoted ' #' in a frontmatter value: YAML drops the rest as a comment",
    "unquoted-colon": "unquoted ': ' in a frontmatter value: read as text, refused by strict YAML tools",
    "future-updated": "`updated:` in the future",
    "broken-link": "[[link]] to no memory",
    "archived-link": "[[link]] to an archived memory",
    "secret": "likely secret in a file that may be committed",
    "secret-copy": "likely secret in a copy sagemem keeps (a snapshot, a conflict record)",
    "archived-changed": "archived memory changed after it was archived (an edit merged into archive/)",
    "state-link": "state directory (or a folder in it) that is a symbolic link",
    "state-tracked": "state directory tracked by git",
    "state-record": "file in the state directory that sagemem cannot use as it stands (it is skipped)",
    "search-index": "search index found damaged (it was rebuilt)",
}
ARCHIVE_LABEL = "archive"
COMMITTED_LABELS = (f"{ARCHIVE_LABEL}/", "dream/")  # copies beside the memories, committed with them
PURGE_ADVICE = "`sagemem purge-secrets` redacts it there (rotate the secret: git history keeps it)"
FIXABLE = {"index-dangling", "index-unlisted", "index-duplicate", "index-stale", "crlf"}

# No `[` inside a link: with one allowed, a line of many `[` takes time quadratic in its length.
_WIKI = re.compile(r"\[\[([^\[\]\n]+)\]\]")
_TICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HASH_VALUE = re.compile(r"^[A-Za-z_][\w-]*:[ \t]+(?![\"'|>\[{&*!])[^\n]*?[ \t]#")


@dataclass(frozen=True)
class Finding:
    check: str
    file: str
    message: str
    line: int | None = None
    severity: str = "problem"  # or "hint"

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "file": self.file,
            "line": self.line,
            "severity": self.severity,
            "message": self.message,
        }


@dataclass(frozen=True)
class HealthReport:
    """Every finding, by check then file; `problems` counts all but hints."""

    findings: tuple[Finding, ...]
    files: int

    @property
    def problems(self) -> int:
        return sum(1 for f in self.findings if f.severity == "problem")

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "files": self.files,
            "problems": self.problems,
            "findings": [f.to_dict() for f in self.findings],
        }


def check(
    *,
    texts: Mapping[str, str],
    memories: Mapping[str, Memory],
    unreadable: Iterable[tuple[str, str]],
    index_report: IndexReport,
    index_text: str,
    index_name: str,
    archived: Iterable[Memory],
    archived_changed: Iterable[Mapping[str, Any]] = (),
    copies: Iterable[tuple[str, str]] = (),
    state: Iterable[tuple[str, str, str] | tuple[str, str, str, str]] = (),
    search_index: str | None = None,
    today: dt.date | None = None,
) -> HealthReport:
    """Run every check. `texts`: each readable memory's text; `memories`: those that parsed;
    `archived_changed`: archived memories whose bytes changed after archiving
    (`MemoryStore.archived_changes`, with their trace); `copies`: (label, text) of archived
    memories and state-dir copies, scanned for secrets; `state`: (check, path, what[,
    severity]) found about the state directory."""
    today = today or dt.date.today()
    found: list[Finding] = []
    found += [_archived_changed(change) for change in archived_changed]
    found += _copy_secrets(copies)
    found += [_state(*finding) for finding in state]
    if search_index:
        found.append(
            Finding(
                "search-index",
                "search index",
                f"was damaged ({search_index}) and has been rebuilt from the memory files",
                severity="hint",
            )
        )
    found += _index(index_report, index_text, index_name) + _secrets(index_name, index_text)
    found += _conflict_markers(index_name, index_text)
    broken = list(unreadable)
    found += [Finding("unreadable", name, rule) for name, rule in broken]
    found += _case_duplicates(sorted(set(texts) | {name for name, _ in broken}))
    names = {name_key(n) for n in texts} | {name_key(n[:-3]) for n in texts} | {"memory", "session-log"}
    names |= {name_key(m.name) for m in memories.values() if m.name}
    archived_names: set[str] = set()
    for m in archived:
        archived_names |= {name_key(m.file), name_key(m.file[:-3])} | (
            {name_key(m.name)} if m.name else set()
        )
    descriptions: dict[str, list[str]] = defaultdict(list)
    for file, text in sorted(texts.items(), key=lambda item: name_key(item[0])):
        memory = memories.get(file)
        found += _file(file, text, memory, names, archived_names, today)
        if memory and memory.description:
            descriptions[" ".join(memory.description.casefold().split())].append(file)
    for files in descriptions.values():
        if len(files) > 1:
            for file in files:
                others = ", ".join(f for f in files if f != file)
                found.append(Finding("duplicate-description", file, f"same description as {others}"))
    order = list(CHECKS)
    found.sort(key=lambda f: (order.index(f.check), name_key(f.file), f.line or 0))
    return HealthReport(tuple(found), len(texts))


def _index(report: IndexReport, text: str, index_name: str) -> list[Finding]:
    found = [
        Finding("index-dangling", index_name, f"lists {e.target}, which does not exist", e.line)
        for e in report.dangling
    ]
    found += [
        Finding("index-duplicate", index_name, f"lists {e.target} again", e.line) for e in report.duplicates
    ]
    found += [
        Finding("index-stale", index_name, f"line for {e.target} is out of date", e.line)
        for e in report.stale
    ]
    found += [Finding("index-unlisted", f, f"not listed in {index_name}") for f in report.unlisted]
    lines, size = len(split_lines(text)), len(text.encode("utf-8"))
    if lines > MAX_INDEX_LINES or size > MAX_INDEX_BYTES:
        found.append(
            Finding(
                "index-too-long",
                index_name,
                f"{lines} lines, {size} bytes: Claude Code loads only the first {MAX_INDEX_LINES} lines "
                f"or {MAX_INDEX_BYTES // 1024} KB; keep one short line per memory",
            )
        )
    return found


def _archived_changed(change: Mapping[str, Any]) -> Finding:
    when = f" on {change['archived_at']}" if change.get("archived_at") else ""
    why = f" ({change['reason']})" if change.get("reason") else ""
    commit = f"; last changed by commit {change['commit']}" if change.get("commit") else ""
    return Finding(
        "archived-changed",
        str(change["file"]),
        f"changed after it was archived{when}{why}: archived as {change['sealed'][:12]}, now "
        f"{change['now'][:12]}{commit}. That change is in no live memory: `sagemem restore "
        f"{change['name']}` brings it back (archive it again if it should stay retired)",
    )


def _state(check: str, path: str, what: str, severity: str = "problem") -> Finding:
    if check == "state-record":
        return Finding(check, path, what, severity=severity)
    if check == "state-tracked":
        message = (
            f"is tracked by git ({what}): it holds this machine's conflicts, ledgers and index, and "
            f"a clone's copy is a stranger's. Untrack it (`git rm -r --cached <it>`) and keep "
            f"`.sagemem/` in .gitignore"
        )
    else:
        message = f"{what}: sagemem keeps nothing there (replace the link with a folder)"
    return Finding(check, path, message)


def _case_duplicates(files: Sequence[str]) -> list[Finding]:
    groups: dict[str, list[str]] = defaultdict(list)
    for f in files:
        groups[name_key(f)].append(f)
    return [
        Finding(
            "case-duplicate", f, f"same name as {', '.join(o for o in group if o != f)} when case is ignored"
        )
        for group in groups.values()
        if len(group) > 1
        for f in sorted(group)
    ]


def _conflict_markers(file: str, text: str) -> list[Finding]:
    line = conflict_marker_line(text)
    if line is not None:
        return [
            Finding(
                "merge-conflict", file, "has unresolved git conflict markers: choose a side and save", line
            )
        ]
    return []


def _file(
    file: str, text: str, memory: Memory | None, names: set[str], archived: set[str], today: dt.date
) -> list[Finding]:
    found = _conflict_markers(file, text)
    if "\r" in text:
        found.append(
            Finding("crlf", file, "uses CRLF line endings (sagemem writes LF; `check --fix` converts)")
        )
    try:
        parts = frontmatter.split(text, file)
    except InvalidMemory:  # reported as unreadable by the scan
        return found + _secrets(file, text)
    if not parts.has_frontmatter:
        found.append(Finding("no-frontmatter", file, "has no frontmatter: add name, description and type"))
    elif memory is not None:
        lines = frontmatter.key_lines(parts.matter)
        if not memory.description:
            found.append(Finding("description", file, "has no description: it can hardly be found"))
        elif "description" in lines and lines["description"][1] - lines["description"][0] > 1:
            found.append(
                Finding(
                    "description",
                    file,
                    "description spans several lines: keep it to one",
                    lines["description"][0] + 2,
                )
            )
        for number, line in enumerate(split_lines(parts.matter), 2):
            if _HASH_VALUE.match(line):
                found.append(
                    Finding(
                        "hash-comment",
                        file,
                        f"YAML reads '{line.strip()[:60]}' only up to ' #'; quote the value",
                        number,
                    )
                )
        found += [
            Finding(
                "unquoted-colon",
                file,
                "a ': ' inside an unquoted value: sagemem and Claude Code read it as text, strict YAML "
                "tools refuse the file; quote the value",
                number + 2,
                severity="hint",
            )
            for number in frontmatter.unquoted(parts.matter)
        ]
        if memory.type and memory.type not in TYPES:
            found.append(
                Finding(
                    "unknown-type",
                    file,
                    f"type {memory.type!r} is none of {', '.join(TYPES)}: a write through sagemem "
                    f"refuses it, and it is never an archive candidate",
                )
            )
        prefix = file.split("_", 1)[0].lower() if "_" in file else ""
        if prefix in TYPES and memory.type and memory.type != prefix:
            found.append(
                Finding("type-mismatch", file, f"type is {memory.type!r} but the file name says {prefix!r}")
            )
        if memory.updated:
            try:
                day = dt.date.fromisoformat(memory.updated[:10])
                if day > today:
                    found.append(
                        Finding("future-updated", file, f"updated: {memory.updated} is in the future")
                    )
            except ValueError:
                pass
    if memory is not None:
        found += _links(file, memory.body, memory.body_line, names, archived)
    return found + _secrets(file, text)


def _links(file: str, body: str, first_line: int, names: set[str], archived: set[str]) -> list[Finding]:
    found = []
    fence = ""  # the open fence: a closing one uses the same character, at least as many times
    for number, line in enumerate(body.split("\n"), first_line):
        opened = _FENCE.match(line)
        if opened and (not fence or (opened.group(1)[0] == fence[0] and len(_run(line)) >= len(fence))):
            fence = "" if fence else _run(line)
            continue
        if fence or line.startswith(("    ", "\t")):  # fenced or indented code
            continue
        for match in _WIKI.finditer(_without_code_spans(line)):
            target = match.group(1).split("|", 1)[0].split("#", 1)[0].strip()
            key = name_key(target[:-3] if target.lower().endswith(".md") else target)
            if not key or key in names or name_key(target) in names:
                continue
            if key in archived or name_key(target) in archived:
                found.append(
                    Finding(
                        "archived-link", file, f"[[{target}]] points to an archived memory", number, "hint"
                    )
                )
            else:
                found.append(Finding("broken-link", file, f"[[{target}]] matches no memory", number))
    return found


def _without_code_spans(line: str) -> str:
    """`line` without its code spans: a run of n backticks up to the next run of exactly n
    (as Markdown reads them). Found run by run, with the runs of each length in a list, so a
    line of thousands of backticks costs what its length does (a regex with a backreference
    took minutes on 3 KB)."""
    runs = [m.span() for m in _TICKS.finditer(line)]
    if len(runs) < 2:
        return line
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, (start, end) in enumerate(runs):
        by_length[end - start].append(index)
    kept, done, index = [], 0, 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        later = bisect.bisect_right(same, index)
        if later < len(same):
            close = same[later]
            kept.append(line[done:start])
            done = runs[close][1]
            index = close + 1
        else:
            index += 1
    return "".join(kept) + line[done:]


def _run(line: str) -> str:
    """The fence characters a fence line starts with."""
    stripped = line.lstrip(" ")
    return stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]


def _secrets(file: str, text: str, advice: str = "move it out of memory") -> list[Finding]:
    from ..store.secrets import scan  # detect-secrets loads on the first scan: never on the hook path

    return [Finding("secret", file, f"looks like a {s.kind}; {advice}", s.line) for s in scan(text)]


def _copy_secrets(copies: Iterable[tuple[str, str]]) -> list[Finding]:
    """Secrets in what sagemem keeps besides the live memories: archived memories and dream
    reports (committed with the rest), and the copies in the state dir (snapshots, conflict
    records, dream runs), from which a rollback or a resolution could bring a secret back.
    The same text is scanned once."""
    found: list[Finding] = []
    scanned: dict[str, list[Finding]] = {}
    for label, text in copies:
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if key not in scanned:
            scanned[key] = _secrets("", text, PURGE_ADVICE)
        check = "secret" if label.startswith(COMMITTED_LABELS) else "secret-copy"
        found += [Finding(check, label, f.message, f.line) for f in scanned[key]]
    return found
