"""The memory directory's file names, with no memory parsed: what `Directory` lists as its
memories, and the look a session start takes at MEMORY.md before anything heavier (YAML,
the facade) is imported. Kept apart from `directory.py` so that the hooks can ask both
without paying for the rest of the store."""

from __future__ import annotations

import os
from pathlib import Path

from . import index
from .errors import InvalidName, SagememError
from .files import MAX_INDEX_FILE_BYTES, read_bytes
from .names import INDEX_NAME, check_name, is_reserved, name_key


def memory_names(folder: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The memory files in `folder` (regular `*.md` files with valid names, not MEMORY.md),
    in name order, and (name, why) for each `*.md` entry that is not one."""
    names, problems = [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if not name.lower().endswith(".md") or name.startswith(".") or is_reserved(name):
                continue
            try:
                check_name(name)
            except InvalidName as exc:
                problems.append((name, f"invalid file name: {exc.rule}"))
                continue
            if entry.is_symlink():
                problems.append((name, "is a symbolic link; links are refused"))
            elif not entry.is_file(follow_symlinks=False):
                problems.append((name, "is not a regular file"))
            else:
                names.append(name)
    return sorted(names, key=lambda n: (name_key(n), n)), problems


def index_needs_mending(folder: Path) -> bool:
    """Whether MEMORY.md in `folder` may hold a dangling or a duplicate line (a line naming a
    file that is not there, or two naming one file): only then can `Directory.check_index`,
    which parses every memory, find either. An index that cannot be read says yes: the full
    check then tells what is wrong."""
    path = folder / INDEX_NAME
    if not os.path.lexists(path):
        found = [n for n in os.listdir(folder) if name_key(n) == name_key(INDEX_NAME)]
        if not found:
            return False
        path = folder / sorted(found)[0]
    try:
        text = read_bytes(path, limit=MAX_INDEX_FILE_BYTES).decode("utf-8")
    except (SagememError, UnicodeDecodeError):
        return True
    keys = [name_key(target) for target in index.targets(text)]
    live = {name_key(f) for f in memory_names(folder)[0]}
    return len(keys) != len(set(keys)) or any(k not in live for k in keys)
