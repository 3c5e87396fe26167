"""The `Memory` value and the rules of the memory file format (see docs/format.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import frontmatter
from .digests import sha256_hex
from .errors import InvalidMemory
from .files import MAX_FILE_BYTES
from .names import TYPES
from .text import to_lf

MAX_TAGS, MAX_TAG_CHARS = 20, 40
MAX_ALIASES, MAX_ALIAS_CHARS = 24, 60
# The frontmatter keys sagemem interprets, by the `Memory` field that holds each.
FIELD_KEYS = {
    "name": "name",
    "description": "description",
    "type": "type",
    "tags": "tags",
    "aliases": "aliases",
    "baseline": "baseline",
    "baseline_priority": "baselinePriority",
    "updated": "updated",
}
KNOWN_KEYS = tuple(FIELD_KEYS.values())


def version_of(data: bytes) -> str:
    """A file's version: the sha256 of its bytes, so an edit made in any editor is a change."""
    return sha256_hex(data)


@dataclass(frozen=True)
class Memory:
    """One memory file, parsed.

    `version` is the sha256 of the file's bytes when it was read; pass it back as
    `expected_version` to change the file. `extra` holds every frontmatter key sagemem does
    not interpret, as parsed, read-only. `body` has LF line endings whatever the file has;
    `body_line` is the 1-based line in the file where the body starts. Two values are equal
    when all their fields are, so the same bytes read twice give equal memories.
    """

    file: str
    name: str
    description: str
    type: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    baseline: bool
    baseline_priority: float
    updated: str | None
    body: str
    body_line: int
    version: str
    size: int
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __hash__(self) -> int:
        return hash((self.file, self.version))

    @property
    def title(self) -> str:
        """The `name`, else the file name without `.md`: what the index line shows."""
        return self.name or self.file[:-3]

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "description": self.description,
            "type": self.type,
            "tags": list(self.tags),
            "aliases": list(self.aliases),
            "baseline": self.baseline,
            "baselinePriority": self.baseline_priority,
            "updated": self.updated,
            "version": self.version,
            "size": self.size,
            "extra": dict(self.extra),
        }


def decode(file: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMemory(file, f"is not valid UTF-8 (byte {exc.start})") from None


def parse_memory(file: str, data: bytes) -> Memory:
    """Parse a memory file's bytes. Lenient on values (lists are clipped), strict on structure."""
    text = decode(file, data)
    parts = frontmatter.split(text, file)
    meta = frontmatter.parse(parts.matter, file) if parts.has_frontmatter else {}
    nested = meta.get("metadata")
    if not isinstance(nested, dict):
        nested = {}
    return Memory(
        file=file,
        name=_one_line(meta.get("name")),
        description=_one_line(meta.get("description")),
        type=_one_line(meta.get("type") or nested.get("type")).lower(),
        tags=_string_list(meta.get("tags"), MAX_TAGS, MAX_TAG_CHARS),
        aliases=_string_list(meta.get("aliases"), MAX_ALIASES, MAX_ALIAS_CHARS),
        baseline=_truthy(meta.get("baseline")),
        baseline_priority=_number(meta.get("baselinePriority")),
        updated=_date_text(meta.get("updated") or nested.get("updated")),
        body=parts.body.replace("\r\n", "\n"),
        body_line=parts.body_line,
        version=version_of(data),
        size=len(data),
        extra=MappingProxyType({k: v for k, v in meta.items() if k not in KNOWN_KEYS}),
    )


def validate_for_write(file: str, text: str, *, whole: bool = False) -> Memory:
    """Parse proposed content and apply the write-side rules; return the parsed memory.

    With `whole` (content a person or an agent sends through `write`), the content must also
    be a whole memory: a frontmatter block and a description. A memory without one is nearly
    invisible to retrieval. Files already on disk are read as they are, and the repairs that
    keep their content (`check --fix`, conflict resolution) do not ask this of them."""
    data = text.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidMemory(file, f"content is larger than {MAX_FILE_BYTES // 1024} KiB ({len(data)} bytes)")
    memory = parse_memory(file, data)
    meta = _raw_meta(file, text)
    if memory.type and memory.type not in TYPES:
        raise InvalidMemory(file, f"type must be one of {', '.join(TYPES)} (got {memory.type!r})")
    _check_list(file, "tags", meta.get("tags"), MAX_TAGS, MAX_TAG_CHARS)
    _check_list(file, "aliases", meta.get("aliases"), MAX_ALIASES, MAX_ALIAS_CHARS)
    if whole and not frontmatter.split(text, file).has_frontmatter:
        raise InvalidMemory(
            file,
            "content has no frontmatter: start it with a '---' line, then name, description and type "
            "(user|feedback|project|reference), then '---' (docs/format.md)",
        )
    if whole and not memory.description:
        raise InvalidMemory(file, "description must not be empty: retrieval finds memories by it")
    return memory


def render_new(
    *,
    name: str,
    description: str,
    type: str,
    tags: Sequence[str] = (),
    aliases: Sequence[str] = (),
    baseline: bool = False,
    baseline_priority: float = 0,
    updated: dt.date | None = None,
    body: str = "",
) -> str:
    """The text of a new memory file: frontmatter in a fixed key order, a blank line, the body."""
    fields: dict[str, Any] = {"name": name, "description": _one_line(description), "type": type}
    if tags:
        fields["tags"] = list(tags)
    if aliases:
        fields["aliases"] = list(aliases)
    if baseline:
        fields["baseline"] = True
    if baseline_priority:
        fields["baselinePriority"] = baseline_priority
    fields["updated"] = updated or dt.date.today()
    matter = "".join(frontmatter.render_key(k, v) for k, v in fields.items())
    body = to_lf(body)
    if body and not body.endswith("\n"):
        body += "\n"
    return f"---\n{matter}---\n\n{body}"


def _raw_meta(file: str, text: str) -> dict[str, Any]:
    parts = frontmatter.split(text, file)
    return frontmatter.parse(parts.matter, file) if parts.has_frontmatter else {}


def _check_list(file: str, key: str, value: Any, max_items: int, max_chars: int) -> None:
    items = _string_list(value, 10**6, 10**6)
    if len(items) > max_items:
        raise InvalidMemory(file, f"{key}: at most {max_items} items (got {len(items)})")
    for item in items:
        if len(item) > max_chars:
            raise InvalidMemory(file, f"{key}: each item at most {max_chars} characters ({item[:20]!r}...)")


def _one_line(value: Any) -> str:
    if value is None:
        return ""
    return " ".join(str(value).split())


def _string_list(value: Any, max_items: int, max_chars: int) -> tuple[str, ...]:
    """Tags and aliases: a YAML list, or a comma-separated string, as trimmed non-empty strings."""
    if value is None:
        return ()
    raw = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    items = [_one_line(item) for item in raw if item is not None]
    return tuple(item[:max_chars] for item in items if item)[:max_items]


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"true", "yes", "1"} if value is not None else False


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return 0.0
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0


def _date_text(value: Any) -> str | None:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    text = _one_line(value)
    return text or None
