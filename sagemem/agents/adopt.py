"""Claude Code's auto memory and `install claude-code --memory`: who holds a project's memories.

By default Claude Code keeps its auto memory on and sagemem reads its folder as the `claude`
scope (`config.locate_scopes`): nothing about it changes, and `install` only says so, with
the folder's place. Claude Code's memory is never turned off silently: a peer's installer
did, and people's memories seemed to vanish. Redirecting it is no way out either: Claude
Code (2.1.197) ignores `autoMemoryDirectory` in a project's settings.

`--memory sagemem` is the explicit choice to have sagemem hold them. Its files are imported
first, into the project memory (else the user memory, or the scope `--in` names), after a
snapshot of that scope: each through `MemoryStore.write(..., expected_version=None)`, so a
name the scope has already is left alone and reported, never overwritten, and the scope's
MEMORY.md follows. Claude Code's folder is only read. Only then is `autoMemoryEnabled: false`
set in the project's `.claude/settings.json`, in the same guarded edit that adds the hooks;
install's record says that sagemem set it (and what was there before), so `--memory both`
and `uninstall` take back exactly that and nothing a person set. No question is asked:
hooks and CI run `install` unattended, and the command line is the choice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..store.errors import InvalidMemory, InvalidName, MemoryNotFound, SagememError, VersionConflict
from ..store.names import name_key
from ..store.records import Record

KEY = "autoMemoryEnabled"
MODES = ("both", "sagemem")
WRITER = "sagemem install"
REASON = "imported from Claude Code's auto memory (install claude-code --memory sagemem)"
BACK_ON = "`sagemem install claude-code --memory both` turns it back on"


class Step(Record):
    """What the settings change did to `autoMemoryEnabled`, for install's record: `set` it
    (with the value that was there; `had` is False when there was none), `forget` that it
    did (the change is taken back, or the key is the person's now), or nothing."""

    changes: list[str]
    record: str | None = None  # "set", "forget" or None
    had: bool = False
    was: object = None


def setting_change(
    data: dict[str, Any], memory: str | None, add: bool, recorded: Mapping[str, object] | None
) -> Step:
    """The change to `autoMemoryEnabled` in a project's Claude Code settings: set to false for
    `--memory sagemem`; for `--memory both` and `uninstall`, put back what was there before,
    if sagemem set it and it is still false. Without `--memory`, install leaves it alone."""
    if add and memory == "sagemem":
        if data.get(KEY) is False:
            return Step([])  # off already, by the person's own setting: nothing of ours to record
        had, was = KEY in data, data.get(KEY)
        data[KEY] = False
        return Step(
            [f"set {KEY} to false: Claude Code's auto memory is off for this project"], "set", had, was
        )
    if (add and memory != "both") or recorded is None:
        return Step([])
    if data.get(KEY) is not False:
        # Trigger: the person changed the key since sagemem set it. Outcome: it is theirs now.
        return Step([], "forget")
    if "was" in recorded:
        data[KEY] = recorded["was"]
        change = f"set {KEY} back to {json.dumps(recorded['was'])}, as it was before install --memory sagemem"
        return Step([change], "forget")
    del data[KEY]
    return Step([f"removed {KEY} (install --memory sagemem set it to false)"], "forget")


def target_scope(cwd: Path, env: Mapping[str, str], into: str | None) -> Any:
    """The sagemem scope that takes Claude Code's memories: the one `into` names, else the
    project memory where there is one, else the user memory. A harness's own folder is
    never a target; with no memory directory at all, the choice is refused."""
    from ..store.config import locate_scopes

    scopes = [s for s in locate_scopes(cwd=cwd, env=env) if not s.native and s.memory_dir.is_dir()]
    if into is not None:
        chosen = [s for s in scopes if s.name == into]
        if not chosen:
            names = ", ".join(s.name for s in scopes) or "none"
            raise SagememError(
                f"--memory sagemem: {into!r} is not a sagemem scope here to import into (the ones here: "
                f"{names}); nothing was changed"
            )
        return chosen[0]
    if not scopes:
        raise SagememError(
            "--memory sagemem: there is no sagemem memory here to hold the memories: run `sagemem init "
            "--project` (or `sagemem init` for your user memory) first; nothing was changed"
        )
    return scopes[0]  # locate_scopes gives the project before the user


class Import:
    """Claude Code's folder for a project, imported into one sagemem scope: planned file by
    file (nothing written), then `run`. Each file is `imported` (to be written), `present`
    (the scope has the same bytes under that name), `skipped` (it has another memory of that
    name) or `refused` (not a memory sagemem may write: no description, not UTF-8, a likely
    secret, a link)."""

    def __init__(self, cwd: Path, home: Path, env: Mapping[str, str], *, into: str | None) -> None:
        from ..memory_store import MemoryStore
        from ..store.config import adopted_state_dir
        from ..store.native import claude_memory_dir

        self.target = target_scope(cwd, env, into)
        self.folder = claude_memory_dir(cwd, home, env)
        self.snapshot: str | None = None
        self.files: list[dict[str, Any]] = []
        self._texts: dict[str, str] = {}
        if self.folder.is_symlink() or not self.folder.is_dir():
            return
        source = MemoryStore(self.folder, adopted_state_dir(self.folder, env))  # read only: no state made
        store = MemoryStore.of(self.target)
        scan = source.scan()
        refused = {p.file: p.rule for p in scan.problems}
        for file in sorted({*scan.files, *refused}, key=lambda n: (name_key(n), n)):
            if file in refused:
                self.files.append(self._entry(file, "refused", f"not imported: {refused[file]}"))
            else:
                self.files.append(self._plan(file, store))

    def _plan(self, file: str, store: Any) -> dict[str, Any]:
        from ..store.files import read_bytes
        from ..store.memory import decode, validate_for_write
        from ..store.secrets import new_secrets
        from ..store.text import to_lf

        scope = self.target.name
        try:
            text = to_lf(decode(file, read_bytes(self.folder / file)))
            try:
                present: str | None = store.resolve(file)
            except MemoryNotFound:
                present = None
            if present is not None:
                try:
                    same = read_bytes(store.memory_dir / present) == text.encode("utf-8")
                except InvalidMemory:
                    same = False
                if same:
                    return self._entry(file, "present", f"already in the {scope} scope, the same")
                return self._entry(
                    file,
                    "skipped",
                    f"left alone: the {scope} scope has a memory named {present}, not overwritten",
                )
            validate_for_write(file, text, whole=True)
            found = new_secrets(None, text)
            if found:
                raise InvalidMemory(file, f"line {found[0].line} looks like a {found[0].kind}")
        except (InvalidMemory, InvalidName) as exc:
            return self._entry(file, "refused", f"not imported: {exc.rule}")
        self._texts[file] = text
        return self._entry(file, "imported", f"imported into the {scope} scope")

    def _entry(self, file: str, status: str, change: str) -> dict[str, Any]:
        return {"file": file, "path": str(self.folder / file), "status": status, "change": change}

    def run(self) -> None:
        """Write the planned files, after a snapshot of the target scope (taken only when there
        is something to write). A file created there meanwhile is refused as any create over
        an existing name is (and kept in its conflict queue), and reported as skipped."""
        from ..memory_store import MemoryStore

        wanted = [f for f in self.files if f["status"] == "imported"]
        if not wanted:
            return
        store = MemoryStore.of(self.target)
        self.snapshot = store.snapshot(label="before importing Claude Code's auto memory", kind="auto").id
        for entry in wanted:
            try:
                store.write(
                    entry["file"],
                    self._texts[entry["file"]],
                    expected_version=None,
                    writer=WRITER,
                    reason=REASON,
                )
            except VersionConflict as exc:
                entry.update(
                    status="skipped", change=f"left alone: created there meanwhile ({exc.conflict_id})"
                )
            except SagememError as exc:
                entry.update(status="refused", change=f"not imported: {exc}")

    def copies(self) -> int:
        """Memories that are now in both Claude Code's folder and the target scope."""
        return sum(f["status"] in ("imported", "present") for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": str(self.folder),
            "into": self.target.name,
            "memory_dir": str(self.target.memory_dir),
            "snapshot": self.snapshot,
            "files": [dict(f) for f in self.files],
        }


def notes(
    cwd: Path,
    home: Path,
    env: Mapping[str, str],
    *,
    memory: str | None,
    settings: Path | None,
    planned: Mapping[str, object] | None,
    imported: Import | None,
    ours: bool = False,
) -> list[str]:
    """What `install claude-code` tells about Claude Code's own memory, as it is after this
    install (`planned`: the project's settings as they are written, or would be; `ours`:
    the `autoMemoryEnabled: false` there is sagemem's, so `--memory both` takes it back)."""
    from ..store.config import load_settings, locate_scopes
    from ..store.native import claude_auto_memory, claude_memory_dir

    replaced = {settings: planned} if settings is not None and planned is not None else None
    on, why = claude_auto_memory(cwd, home, env, replaced=replaced)
    folder = claude_memory_dir(cwd, home, env)
    scopes = locate_scopes(cwd=cwd, env=env)
    read = any(s.name == "claude" for s in scopes)
    if on and memory == "sagemem":
        return [
            f"Claude Code's auto memory is still on here ({why}), despite {KEY} false in {settings}: "
            f"change that to hand the memories to sagemem; meanwhile its folder {folder} is read as the "
            "`claude` scope"
        ]
    if on:
        if read:
            return [
                f"Claude Code's auto memory stays on: sagemem reads its folder for this project, {folder}, "
                "as the `claude` scope"
            ]
        if folder.is_dir():
            return [
                f"Claude Code's auto memory stays on; its folder for this project, {folder}, is left out "
                "of sagemem's scopes by the `scopes` setting"
            ]
        return [
            f"Claude Code's auto memory stays on: sagemem reads its folder for this project, {folder}, "
            "as the `claude` scope once Claude Code has made it"
        ]
    rules = load_settings(scopes[0].state_dir, env).rules
    given = (
        "sagemem gives its rules for saving a memory at session start instead"
        if rules
        else "sagemem's rules for saving a memory are off too (the `rules` setting)"
    )
    found = [f"Claude Code's auto memory is off here ({why}): {given}"]
    if ours:
        found[0] += f"; {BACK_ON}"
    if memory == "sagemem" and folder.is_dir():
        # With its auto memory off, Claude no longer uses the folder, and sagemem no longer
        # reads it as a scope either (`config.locate_scopes`): nothing is found twice.
        found.append(f"Claude Code's folder {folder} is left as it was, and no longer read as a scope")
    return found
