"""Every error sagemem raises on purpose derives from `SagememError`.

The CLI turns them into one-line messages and exit codes in one place (`cli.main`);
`exit_code` lives on the class so that translation needs no table.
"""

from __future__ import annotations


class SagememError(Exception):
    """Base class for every error sagemem raises on purpose."""

    exit_code = 1


class SagememWarning(UserWarning):
    """Something went wrong after the work was done (the CLI prints it as a warning)."""


class StoreNotFound(SagememError, FileNotFoundError):
    """The memory directory does not exist (run `sagemem init`)."""


class InvalidName(SagememError, ValueError):
    """A memory file name breaks a naming rule."""

    def __init__(self, name: str, rule: str) -> None:
        self.name = name
        self.rule = rule
        super().__init__(f"{name!r}: invalid memory file name: {rule}")


class InvalidMemory(SagememError, ValueError):
    """A memory file (on disk or proposed) breaks a format or safety rule."""

    def __init__(self, file: str, rule: str) -> None:
        self.file = file
        self.rule = rule
        super().__init__(f"{file}: {rule}")


class MemoryNotFound(SagememError, KeyError):
    """No live memory has that file name."""

    def __init__(self, file: str) -> None:
        self.file = file
        super().__init__(file)

    def __str__(self) -> str:  # KeyError would quote the message
        return f"{self.file}: no such memory"


class ConflictNotFound(SagememError, KeyError):
    """No conflict record has that id."""

    def __init__(self, conflict_id: str) -> None:
        self.conflict_id = conflict_id
        super().__init__(conflict_id)

    def __str__(self) -> str:
        return f"{self.conflict_id}: no such conflict"


class VersionConflict(SagememError):
    """The file changed since the version the write was based on; the attempt was recorded."""

    exit_code = 3

    def __init__(self, file: str, expected: str | None, actual: str | None, conflict_id: str) -> None:
        self.file = file
        self.expected = expected
        self.actual = actual
        self.conflict_id = conflict_id
        if expected is None:
            what = "already exists"
        elif actual is None:
            what = f"was deleted since version {expected[:12]}"
        else:
            what = f"changed since version {expected[:12]} (now {actual[:12]})"
        super().__init__(
            f"{file}: version conflict: the file {what}; nothing was written. "
            f"Your version is kept as conflict {conflict_id} "
            f"(sagemem conflicts show {conflict_id})"
        )
