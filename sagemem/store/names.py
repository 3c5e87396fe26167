"""Memory file names: the gate every read and write passes, and the rules for new names.

A name is one path segment ending in `.md`. Names are compared after NFC normalisation and
case folding (`name_key`), because macOS stores NFD and Windows and macOS are
case-insensitive: `Project_X.md` and `project_x.md` are the same memory everywhere.

A name that holds a likely secret (`ghp_....md`) is refused like any other bad name, by the
pattern pass (`secrets.scan_patterns`): a name is shown in every listing, snippet and index
line, to people and to models, and no redaction reaches it. The refusal does not repeat the
secret. The pass runs only on a name holding a long run of letters and digits or a label's
separator (`_SUSPECT`), so a listing of plain names pays one regular expression a name.

A name sagemem reads back from its own records (a snapshot's manifest, a conflict record, the
access ledger, a dream manifest) passes only the path rule (`check_stored_name`): one
segment, no `..`, not reserved. It was a memory's name when it was written, and the secret
rule, which may grow, must not turn an older record into a damaged one.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import InvalidName

INDEX_NAME = "MEMORY.md"
ARCHIVE_DIR = "archive"  # archived memories, in a folder of the memory directory
# Files that live in the memory directory but are never memories.
RESERVED = frozenset({"memory.md", "session-log.md"})
# File systems allow 255 bytes; the temp and lock files made beside a memory need the rest.
MAX_NAME_BYTES = 200
MAX_SLUG_CHARS = 60
TYPES = ("user", "feedback", "project", "reference")

_NOT_WORD = re.compile(r"[\W_]+")
# Letters, digits, `_`, `-` and dots, ending in `.md`: names `check_name` accepts unless they
# hold `..`, are too long or are reserved.
_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.[mM][dD]")
# What a name must hold for the pattern pass to be asked about it: a token's long run of
# letters and digits, or what a labelled value needs (a blank, `=`, `|`, 是, 为, ：, 改成).
# Plain names have none, and pay one regular expression in every listing.
_SUSPECT = re.compile(r"[A-Za-z0-9]{16}|[ =|]|是|为|：|改")  # CJK outside a class: faster to compile


def name_key(name: str) -> str:
    """The form in which two names are compared."""
    return unicodedata.normalize("NFC", name).casefold()


def is_reserved(name: str) -> bool:
    return name_key(name) in RESERVED


def check_name(name: object) -> str:
    """Return `name` if it is a safe memory file name, else raise `InvalidName` naming the rule."""
    text = check_stored_name(name)
    held = secret_in_name(text)
    if held is not None:
        raise InvalidName(held[1], f"holds what looks like a {held[0]}: keep secrets out of file names")
    return text


def check_stored_name(name: object) -> str:
    """Return `name` if a file of that name may be read or written in the memory directory
    (the path rule alone: a name kept in a record), else raise `InvalidName`."""
    if not isinstance(name, str) or not name:
        raise InvalidName(str(name), "must be a non-empty string")
    if "/" in name or "\\" in name:
        raise InvalidName(name, "must be a single path segment (no '/' or '\\')")
    if ".." in name:
        raise InvalidName(name, "must not contain '..'")
    if ":" in name:
        raise InvalidName(name, "must not contain ':'")
    # isprintable() is False for every control character, so the per-character test runs only
    # for the rare name it cannot clear (the directory listing checks every name, every call).
    if not name.isprintable() and any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InvalidName(name, "must not contain control characters")
    if name.startswith("."):
        raise InvalidName(name, "must not start with '.'")
    if not name.lower().endswith(".md") or len(name) == 3:
        raise InvalidName(name, "must end in '.md'")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # bytes the file system gave that are not UTF-8
        raise InvalidName(name.encode("utf-8", "replace").decode(), "must be valid UTF-8") from None
    if size > MAX_NAME_BYTES:
        raise InvalidName(name, f"must be at most {MAX_NAME_BYTES} bytes long")
    if is_reserved(name):
        raise InvalidName(name, "is reserved (MEMORY.md and session-log.md are not memories)")
    return name


def secret_in_name(name: str) -> tuple[str, str] | None:
    """The kind of likely secret `name` holds and the name with it redacted, or None."""
    if not _SUSPECT.search(name):
        return None
    from .secrets import redact, scan_patterns

    found = scan_patterns(name)
    return (found[0].kind, redact(name, found)) if found else None


def is_memory_name(name: str) -> bool:
    """Whether `check_name` accepts `name`: its verdict without the cost, for the plain names a
    directory listing is made of (it runs on every file, every call)."""
    return is_stored_name(name) and (not _SUSPECT.search(name) or secret_in_name(name) is None)


def is_stored_name(name: str) -> bool:
    """Whether `check_stored_name` accepts `name`, at the cost of one regular expression for a
    plain name (a ledger holds one per memory, read on every prompt)."""
    if _PLAIN.fullmatch(name):
        return ".." not in name and len(name) <= MAX_NAME_BYTES and name.lower() not in RESERVED
    try:
        check_stored_name(name)
    except InvalidName:
        return False
    return True


def slugify(text: str) -> str:
    """Lower-case words joined by `_`; CJK and other letters are kept as they are."""
    slug = _NOT_WORD.sub("_", unicodedata.normalize("NFC", text).lower()).strip("_")
    return slug[:MAX_SLUG_CHARS].rstrip("_")


def new_file_name(type_: str, name: str) -> str:
    """`<type>_<slug>.md`; a name that already carries the type prefix is not prefixed twice."""
    slug = slugify(name) or "note"
    if not slug.startswith(f"{type_}_"):
        slug = f"{type_}_{slug}"
    return f"{slug}.md"
