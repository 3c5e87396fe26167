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


class UnsafePath(SagememError):
    """A path sagemem will not read or write through: a link, a special file, a file over its
    cap, in a place that may have come with a cloned repository. Nothing was changed."""

    def __init__(self, path: object, rule: str) -> None:
        self.path = str(path)
        self.rule = rule
        super().__init__(f"{path}: {rule}")


class StorageError(SagememError, OSError):
    """Writing a file failed (a full disk, a read-only folder): names the file and the step."""

    def __init__(self, path: object, operation: str, cause: OSError) -> None:
        OSError.__init__(self, cause.errno, cause.strerror or str(cause), str(path))
        self.operation = operation

    def __str__(self) -> str:
        return f"{self.filename}: {self.operation} failed: {self.strerror}; the file was not changed"


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
    """The file changed since the version the write was based on; nothing was written.

    The attempt is kept in the conflict queue; `kept` is False when even that could not be
    written (a full disk), and `note` then says why. A `conflict_id` of "" means nothing was
    proposed (a check of the version, a removal), so there is nothing to keep. `resolving`:
    the write was the resolution of that conflict, which stays open."""

    exit_code = 3

    def __init__(
        self,
        file: str,
        expected: str | None,
        actual: str | None,
        conflict_id: str,
        *,
        kept: bool = True,
        note: str = "",
        resolving: bool = False,
    ) -> None:
        self.file = file
        self.expected = expected
        self.actual = actual
        self.conflict_id = conflict_id
        self.kept = kept
        head = "version conflict: the file"
        if expected is None:
            what = "already exists"
        elif actual is None:
            what = f"was deleted since version {expected[:12]}"
        else:
            what = f"changed since version {expected[:12]} (now {actual[:12]})"
        if not conflict_id:
            fate = "Nothing was proposed, so no conflict is kept: read it again"
        elif resolving:
            # Settling a conflict found the file changed again: the same record, brought up to date.
            fate = (
                f"Conflict {conflict_id} stays open, and now compares with the file as it is: look "
                f"again with `sagemem conflicts show {conflict_id}`, then resolve it"
            )
        elif kept and self.taken:
            # A name taken: the text is kept, and the person is told how the record ends.
            head, what = "duplicate name:", "a memory of that name exists already"
            resolve = f"sagemem conflicts resolve {conflict_id}"
            fate = (
                f"Your text is kept as conflict {conflict_id}: save it under another name, then "
                f"`{resolve} --keep disk` closes the conflict; or `{resolve} --keep proposed` "
                "replaces the existing memory with it"
            )
        elif kept:
            fate = f"Your version is kept as conflict {conflict_id} (sagemem conflicts show {conflict_id})"
        else:
            fate = "Your version could not be kept as a conflict; save it elsewhere before you retry"
        super().__init__(
            f"{file}: {head} {what}; nothing was written. {fate}" + (f" ({note})" if note else "")
        )

    @property
    def taken(self) -> bool:
        """A new memory was refused because its name is taken."""
        return self.expected is None and self.actual is not None
