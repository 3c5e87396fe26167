"""Adding sagemem's hooks to a harness's settings file, and taking exactly them out again.

`apply` merges one handler per event into the file's `hooks` (event -> matcher groups ->
handlers), leaving every other setting and hook as it was, and does nothing when the handler
is already there. The command it writes is `store/command.py`'s: a bare `sagemem` only where
every shell finds this same script, else its absolute path. A handler of its own written
earlier with another command (a bare name from before, a virtual environment since moved) is
rewritten in place, keeping its position; a person's own handlers are never touched. Removal
takes out only handlers whose command is a `sagemem ... hook <harness> <event>` line, and
the groups and keys that leaves empty.

Before any write the old file is copied to the backup folder (the state directory's
`backups/`, or the user cache dir's while there is no memory directory: never beside the
file, where a harness's folder would fill up with copies). A file `install` creates is
recorded there too, so that `uninstall` can remove it, and the folder it made for it, once
nothing is left in it: a file the person had stays, even empty.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store import forms, shape
from ..store.command import (
    LAUNCHER,
    command_line,
    hook_command,
    is_portable,
    portable_line,
    sagemem_command,
)
from ..store.errors import SagememError, SagememWarning
from ..store.files import read_config, safe_folder, write_atomic
from ..store.harnesses import HARNESSES, Harness, home_folder, mcp_place, user_file
from ..store.locking import exclusive
from ..store.records import Record

# `adopt` is imported where it is used: the session-start hook reads `registered_mcp` here
# and needs none of it.
if TYPE_CHECKING:
    from . import adopt

BACKUPS = "backups"
RECORD = "install-record.json"  # in the backup folder: the files install created
RECORD_LOCK = "install-record.lock"
RECORD_LOCK_TIMEOUT = 10.0
MAX_RECORD_BYTES = 256 * 1024
# The record (`forms.InstallForm`): {"format": 1, "created": {file: {"folders": [...]}}, "settings":
# {file: {key: {"was": value} or {}}}, "backups": {copy: file}}; one without "format" is of format
# 1, one of another format is read as none and set aside by the next write, as a damaged one is.
# Paths are any text: the record is ASCII JSON, and a path may hold bytes that are not UTF-8.
_FORMAT = shape.obj({}, {"format": shape.one_of(forms.INSTALL)})
_PATHS = shape.each(shape.any_text)
_RECORD_PARTS = {
    "created": shape.table(shape.obj({}, {"folders": _PATHS}), key=shape.any_text),
    "settings": shape.table(shape.table(shape.obj({})), key=shape.any_text),
    "backups": shape.table(shape.any_text, key=shape.any_text),
}
CODEX_TRUST_NOTE = (
    "trust sagemem's hooks in Codex: start `codex`, type /hooks and trust them (Codex runs a new or"
    " changed hook only once you have; `sagemem doctor` checks it). A Codex build from before hooks"
    " were on by default also needs `[features]` `codex_hooks = true` in ~/.codex/config.toml"
)

Change = Callable[[dict[str, Any]], list[str]]


def settings_path(
    harness: str,
    scope: str,
    *,
    cwd: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The hooks file of the harness's record, in the project or in the user's home (where
    the harness's own variable may have moved its folder)."""
    record = HARNESSES[harness]
    if scope == "project":
        return (cwd or Path.cwd()) / record.project_settings
    return user_file(record, record.user_settings, home or Path.home(), env)


def codex_home(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Codex's folder: `$CODEX_HOME`, else `~/.codex`."""
    return home_folder(HARNESSES["codex"], home or Path.home(), env)


def claude_dir(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    return home_folder(HARNESSES["claude-code"], home or Path.home(), env)


def claude_json(home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's own state file (user-scope MCP servers, folder trust): `.claude.json` in
    `$CLAUDE_CONFIG_DIR`, else in the home folder."""
    claude = HARNESSES["claude-code"]
    return user_file(claude, claude.mcp_user, home or Path.home(), env)


def command_for(harness: str, event: str, *, portable: bool = False) -> str:
    """The hook's command line, by `store/command.py`'s rule; `portable` for a file a
    project commits."""
    if portable:
        return portable_line("hook", harness, event, harness=harness)
    return command_line("hook", harness, event, words=hook_command())


def mcp_entry(*, portable: bool = False) -> dict[str, Any]:
    """The MCP server entry for this sagemem: `{"command": ..., "args": [..., "mcp"]}`, or
    for a file a project commits, `sh -c <portable line>`."""
    if portable:
        return {"command": "sh", "args": ["-c", portable_line("mcp")]}
    words = sagemem_command()
    return {"command": words[0], "args": [*words[1:], "mcp"]}


def committed(scope: str) -> bool:
    """Whether the project's settings, which a team commits, hold portable lines: always
    for the project scope, but not on Windows, which has no POSIX shell to run them."""
    return scope == "project" and os.name != "nt"


def apply(
    harness: str,
    scope: str,
    *,
    add: bool,
    dry_run: bool = False,
    cwd: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    memory: str | None = None,
    into: str | None = None,
) -> dict[str, Any]:
    """Install (`add`) or uninstall sagemem's hooks, and its MCP server entry where the
    harness keeps it in a JSON file; `todo` is what is left for the person to do.

    For Claude Code, `memory` says who holds a project's memories (`adopt.py`): None leaves
    Claude Code's auto memory as it is, `sagemem` imports its files into the scope `into`
    names (else the project's, else the user's) and then turns it off, `both` turns back on
    what `sagemem` turned off. `notes` say how Claude Code's memory stands after it, and
    `import` lists the files imported.

    `files` holds one outcome per file, each with its own changes; `changes` (each prefixed
    with its file's name), `backup` and `backups` are the older flat form."""
    target = _target(harness, scope, add=add, cwd=cwd, home=home, env=env, memory=memory)
    hooks = _HooksChange(target, memory)
    edits = _plan_files(target, hooks)
    launcher = keep_launcher(target.home, dry_run=True) if add and target.portable else None  # checked too
    imported = _import_memories(target, into, dry_run=dry_run) if add and memory == "sagemem" else None
    if not dry_run:
        _write_files(target, edits, hooks.step)
    outcomes = [edit.outcome for edit in edits]
    if launcher is not None:
        outcomes.append(launcher if dry_run else keep_launcher(target.home, dry_run=False))
    notes = _memory_notes(target, memory, edits[0], hooks.step, imported)
    todo = _todo(target, hooks.hooked)
    return {
        "path": str(target.path),
        "files": outcomes,
        "changes": [f"{Path(o['path']).name}: {line}" for o in outcomes for line in o["changes"]],
        "backup": next((o["backup"] for o in outcomes if o["backup"]), None),
        "backups": [o["backup"] for o in outcomes if o["backup"]],
        "todo": todo,
        "notes": notes,
        "import": imported.to_dict() if imported is not None else None,
        "dry_run": dry_run,
    }


class _Target(Record):
    """What one install or uninstall works on, worked out once from the harness's record and
    the scope, so that each step reads the same places."""

    harness: str
    record: Harness
    scope: str
    add: bool
    cwd: Path
    home: Path
    env: Mapping[str, str] | None  # as given (None: this process's), for the helpers that take it
    path: Path  # the hooks file
    portable: bool  # whether its lines are the portable ones a project commits
    backups: Backups
    adopts: bool  # whether the hooks file holds the setting of the harness's own memory
    mcp_beside: bool  # whether this install writes the MCP entry into the hooks file (Gemini)
    mcp_apart: Path | None  # the MCP entry's own file this install writes (`.mcp.json`), if any
    inside: Path | None  # the project whose files these are (they came with its clone), if any

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment itself."""
        return os.environ if self.env is None else self.env


def _target(
    harness: str,
    scope: str,
    *,
    add: bool,
    cwd: Path | None,
    home: Path | None,
    env: Mapping[str, str] | None,
    memory: str | None,
) -> _Target:
    """The places of this install, after refusing what it cannot do (a `memory` choice for
    another harness or scope, a harness or scope `apply` does not install) before any
    settings file is read: a refusal then says what is wrong with the command, not a file."""
    from . import adopt

    cwd = cwd or Path.cwd()
    home = home or Path.home()
    record = HARNESSES[harness]
    if memory is not None and (not record.own_memory or scope != "project" or memory not in adopt.MODES):
        raise SagememError("memory: `both` or `sagemem`, for Claude Code with the project scope only")
    _installable(record, scope)
    path = settings_path(harness, scope, cwd=cwd, home=home, env=env)
    backups = Backups.for_scope(scope, cwd=cwd, home=home, env=env)
    # Where the MCP entry goes, and whether this install writes it (else the harness's command).
    mcp_file, writes_mcp = mcp_place(record, scope) or ("", False)
    beside = writes_mcp and mcp_file == (
        record.project_settings if scope == "project" else record.user_settings
    )
    apart = None
    if writes_mcp and not beside:
        apart = cwd / mcp_file if scope == "project" else user_file(record, mcp_file, home, env)
    return _Target(
        harness=harness,
        record=record,
        scope=scope,
        add=add,
        cwd=cwd,
        home=home,
        env=env,
        path=path,
        portable=committed(scope),
        backups=backups,
        adopts=bool(record.own_memory) and scope == "project",
        mcp_beside=beside,
        mcp_apart=apart,
        inside=cwd if scope == "project" else None,
    )


class _HooksChange:
    """The change to the hooks file: sagemem's hooks, with what the harness keeps in the same
    file (Gemini's MCP entry and its trust, Claude Code's own memory setting). It keeps what
    it did for the steps after the write: `step`, what became of Claude Code's memory
    setting (for install's record and the notes), and `hooked`, whether a hook was added or
    changed (a hook a harness may ask the person to trust)."""

    def __init__(self, target: _Target, memory: str | None) -> None:
        from . import adopt

        self.target = target
        self.memory = memory
        self.step = adopt.Step([])
        self.hooked = False

    def __call__(self, data: dict[str, Any]) -> list[str]:
        from . import adopt

        target = self.target
        add, portable = target.add, target.portable
        changes = _add(data, target.harness, portable=portable) if add else _remove(data, target.harness)
        self.hooked = add and bool(changes)
        if target.mcp_beside:  # its MCP servers are in the same settings file (Gemini)
            changes += _mcp(data, add, portable=portable)
            changes += _trusts_its_tools(data) if add and target.record.mcp_trust else []
        if target.adopts:
            recorded = target.backups.setting(_real(target.path), adopt.KEY)
            self.step = adopt.setting_change(data, self.memory, add, recorded)
            changes += self.step.changes
        return changes


def _plan_files(target: _Target, hooks: _HooksChange) -> list[_Edit]:
    """Every file's change worked out, and checked, before any is written: a file that cannot
    be changed (not JSON, a link out of the project) then leaves every file as it was. The
    hooks file comes first; the MCP entry's own file, where there is one, second."""
    files: list[tuple[Path, Change]] = [(target.path, hooks)]
    if target.mcp_apart is not None:
        files.append((target.mcp_apart, lambda data: _mcp(data, target.add, portable=target.portable)))
    home = target.home.resolve()
    edits = [_plan(path, change, target.add, target.backups, target.inside, home) for path, change in files]
    for edit in edits:
        edit.outcome["shared"] = target.inside is not None  # a project's settings: for its team
    return edits


def _import_memories(target: _Target, into: str | None, *, dry_run: bool) -> adopt.Import:
    """Claude Code's memories imported into sagemem (`--memory sagemem`), before its auto
    memory is turned off: a failure here leaves every setting as it was. A dry run only
    plans the import."""
    from . import adopt

    imported = adopt.Import(target.cwd, target.home, target.environ, into=into)
    if not dry_run:
        imported.run()
    return imported


def _write_files(target: _Target, edits: list[_Edit], step: adopt.Step) -> None:
    """Write the planned changes (each after a backup of the old bytes), then say in
    install's record whether sagemem now holds the setting of the harness's own memory, so
    that `--memory both` and `uninstall` take back exactly what sagemem set."""
    from . import adopt

    for edit in edits:
        _write(edit, target.backups)
    if step.record == "set":
        target.backups.remember_setting(edits[0].path, adopt.KEY, step.had, step.was)
    elif step.record == "forget":
        target.backups.forget_setting(edits[0].path, adopt.KEY)


def _memory_notes(
    target: _Target, memory: str | None, hooks_file: _Edit, step: adopt.Step, imported: adopt.Import | None
) -> list[str]:
    """How the harness's own memory (Claude Code's auto memory) stands after an install:
    whether it is on, and who turned it off, so that a person never finds it gone unsaid.
    Nothing for an uninstall, or a harness that keeps none."""
    from . import adopt

    if not (target.record.own_memory and target.add):
        return []
    recorded = target.backups.setting(hooks_file.path, adopt.KEY) if target.adopts else None
    off = hooks_file.data.get(adopt.KEY) is False
    ours = step.record == "set" or (step.record is None and recorded is not None and off)
    return adopt.notes(
        target.cwd,
        target.home,
        target.environ,
        memory=memory,
        settings=target.path,
        planned=hooks_file.data,
        imported=imported,
        ours=ours,
    )


def _todo(target: _Target, hooked: bool) -> str | None:
    """What is left for the person to do, one line a step: the harness's own command for an
    MCP entry `install` does not write, and, after an install, what the harness's trust asks
    (`hooked`: this install added or changed a hook)."""
    todo = _mcp_todo(target.harness, target.scope, target.add, home=target.home, env=target.env)
    if target.add:
        todo += _trust_todo(target.record, target.scope, hooked, target.cwd, target.home, target.environ)
    return "\n".join(todo) if todo else None


def own_installer(record: Harness) -> Callable[..., dict[str, Any]]:
    """The install of a harness whose record names a module of its own (`installer`), which
    `apply` cannot do: it takes `add`, `scope`, `profile`, `bridge` and `dry_run`."""
    from . import dsh

    return {"dsh": dsh.install}[record.installer]


def _installable(record: Harness, scope: str) -> None:
    """`apply` writes the hooks file of the harness's record: a harness installed by a module
    of its own, or a project scope where it reads no project settings, is refused."""
    if record.installer:
        raise SagememError(f"{record.name}: installed by `sagemem install {record.name}`, not here")
    if scope == "project" and "project" not in record.scopes:
        raise SagememError(f"{record.name} reads no project settings: install with --scope user")


def _trust_todo(
    record: Harness, scope: str, hooked: bool, cwd: Path, home: Path, env: Mapping[str, str]
) -> list[str]:
    """What the harness's trust asks of the person after an install: Codex trusts each new or
    changed hook by hand (`hooked`: this install added or changed one), Gemini reads a
    project's settings only in a folder it trusts."""
    if record.trust == "hooks" and hooked:
        note = CODEX_TRUST_NOTE
        if scope == "project":
            note += f"; {record.title} loads {record.project_settings} only in a project you have trusted"
        return [note]
    if record.trust == "folder" and scope == "project":
        return _gemini_trust_todo(cwd, home, env)
    return []


class _Edit(Record):
    """One file's change, worked out before anything is written."""

    path: Path  # where to write (a link's target)
    outcome: dict[str, Any]
    original: bytes | None
    data: dict[str, Any]
    created_by_us: list[Path] | None  # the folders install made for it, if it made the file


def _plan(
    path: Path,
    change: Change,
    add: bool,
    backups: Backups,
    inside: Path | None = None,
    home: Path | None = None,
) -> _Edit:
    """Apply `change` to the JSON object in `path`, in memory. On uninstall, a file install
    created that is left as `{}` is to be removed instead (with the folders it made for it,
    none of them `home` or above). A link is written through (a dotfiles link stays a link),
    but with `inside` (a project) only to a file in it: a project's settings come with its
    clone, and a link there could aim anywhere."""
    shown = path
    path = _real(path)
    if inside is not None and not path.is_relative_to(inside.resolve()):
        raise SagememError(
            f"{shown}: leads out of the project (to {path}); sagemem does not write through it: "
            "replace the link with a file, or install with --scope user; nothing was changed"
        )
    original = read_config(shown)  # named as the person knows it, though it is a link
    try:
        data = json.loads(original.decode("utf-8")) if original else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise SagememError(f"{path}: not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k, {}), dict) for k in ("hooks", "mcpServers")
    ):
        raise SagememError(
            f"{path}: expected a JSON object (with `hooks`/`mcpServers` objects); nothing was changed"
        )
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups
        ):
            raise SagememError(
                f"{path}: hooks.{event} must be a list of {{matcher, hooks: [...]}} groups;"
                " nothing was changed"
            )
    changes = change(data)
    outcome = {"path": str(shown), "changes": changes, "backup": None, "created": False, "removed": False}
    created_by_us = None
    if changes and not add and not data and original is not None:
        created_by_us = backups.created(path, inside=inside.resolve() if inside else None, home=home)
    if created_by_us is not None:
        changes.append("removed the file: install created it and nothing is left in it")
        outcome["removed"] = True
    elif changes and original is None:
        outcome["created"] = True
    return _Edit(path, outcome, original, data, created_by_us)


def _real(path: Path) -> Path:
    """Where a settings file really is: a link's target, or the path itself."""
    return path.resolve() if path.is_symlink() or path.parent.resolve() != path.parent else path


def _write(edit: _Edit, backups: Backups) -> None:
    """Make the planned change: a backup of the old bytes first, then the new file (or its
    removal, and of the folders install made for it once they are empty)."""
    path, outcome = edit.path, edit.outcome
    if not outcome["changes"]:
        return
    if edit.original is not None:
        outcome["backup"] = str(backups.keep(path, edit.original))
    if edit.created_by_us is not None:
        path.unlink()
        for folder in edit.created_by_us:
            if not _remove_empty(folder):
                break
            outcome["changes"].append(f"removed the folder {folder}: install created it and it is empty")
        backups.forget(path)
        return
    folders = _missing_folders(path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(edit.data, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    if outcome["created"]:
        backups.remember(path, folders)


class Backups:
    """The folder where install keeps its backups and its record of the files it created.

    For a project, the state directory of the memory a hook there would use; for the user
    scope, the user memory's. While that memory directory does not exist, the user cache
    dir: making `~/.sagemem/memory` only to hold a backup would also make sagemem stop
    using a sage-mem directory. The record is looked for in both places, so a file created
    before `sagemem init` is still recognised after it."""

    def __init__(self, folder: Path, elsewhere: list[Path]) -> None:
        self.folder = folder  # where new backups and records go: <root>/backups
        self.places = [folder, *[p for p in elsewhere if p != folder]]

    @classmethod
    def for_scope(cls, scope: str, *, cwd: Path, home: Path, env: Mapping[str, str] | None = None) -> Backups:
        from ..store.config import locate, user_cache_dir

        location = locate(env=env, cwd=cwd if scope == "project" else home)
        cache = user_cache_dir(env) / BACKUPS
        if location.memory_dir.is_dir() or location.state_dir.is_dir():
            return cls(location.state_dir / BACKUPS, [cache])
        return cls(cache, [])

    def keep(self, path: Path, data: bytes) -> Path:
        """A copy of `data` (the bytes of `path`) in the backup folder, with `path`'s
        permissions, named by the time and the file."""
        folder = self._folder()
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        copy = folder / f"{stamp}-{path.parent.name.lstrip('.')}-{path.name}"
        write_atomic(copy, data, create_only=True)
        try:
            os.chmod(copy, stat.S_IMODE(os.stat(path).st_mode))
        except OSError:
            pass  # the copy keeps the private folder's protection
        self._update(
            self.folder, lambda record: record.setdefault("backups", {}).update({copy.name: str(path)})
        )
        return copy

    def created(
        self, path: Path, *, inside: Path | None = None, home: Path | None = None
    ) -> list[Path] | None:
        """The folders install made for `path` (deepest first), if install created it.

        A project's record comes with its clone, so it may be forged: of the folders it
        names, only those install could have made are believed, the ones that hold `path`,
        from its own folder up, each the parent of the one before; never `inside` (the
        project, which was there before install) or a folder above it, never one that holds
        `home`. The first that is not such a folder ends the list."""
        for place in self.places:
            entry = self._record(place).get("created", {}).get(str(path))
            if isinstance(entry, dict):
                return _own_folders(path, entry.get("folders", []), inside, home)
        return None

    def remember(self, path: Path, folders: list[Path]) -> None:
        entry = {"folders": [str(f) for f in folders]}
        self._update(self.folder, lambda record: record.setdefault("created", {}).update({str(path): entry}))

    def forget(self, path: Path) -> None:
        for place in self.places:
            if str(path) in self._record(place).get("created", {}):
                self._update(place, lambda record: record["created"].pop(str(path), None))

    def setting(self, path: Path, key: str) -> dict[str, Any] | None:
        """What install recorded when it set `key` in `path` (`{"was": value}`, or `{}` when
        the key was not there), if it did."""
        for place in self.places:
            entry = _settings(self._record(place)).get(str(path), {})
            if isinstance(entry, dict) and isinstance(entry.get(key), dict):
                return entry[key]
        return None

    def remember_setting(self, path: Path, key: str, had: bool, was: object) -> None:
        def edit(record: dict[str, Any]) -> None:
            record["settings"] = _settings(record)
            keys = record["settings"].setdefault(str(path), {})
            keys[key] = {"was": was} if had else {}

        self._update(self.folder, edit)

    def forget_setting(self, path: Path, key: str) -> None:
        def edit(record: dict[str, Any]) -> None:
            record["settings"] = _settings(record)
            keys = record["settings"].get(str(path))
            if isinstance(keys, dict):
                keys.pop(key, None)
            if not keys:
                record["settings"].pop(str(path), None)

        for place in self.places:
            if isinstance(_settings(self._record(place)).get(str(path)), dict):
                self._update(place, edit)

    def _folder(self) -> Path:
        folder = safe_folder(self.folder.parent, self.folder.name)
        os.chmod(folder, 0o700)  # settings can hold keys: the copies are for this user alone
        return folder

    def _record(self, place: Path) -> dict[str, Any]:
        """The record in `place`, each of its parts of the shape install writes; a part that
        does not fit (a state dir may come with a clone) reads as empty."""
        return self._read(place)[0]

    def _read(self, place: Path) -> tuple[dict[str, Any], str]:
        """The record's sound parts, and what was wrong with the rest ("" when nothing)."""
        try:
            found = shape.load(place / RECORD, MAX_RECORD_BYTES, _FORMAT)
        except shape.Damaged as exc:
            return {}, exc.why
        record, wrong = dict(found or {}), []
        for key, check in _RECORD_PARTS.items():
            why = shape.problem(record.get(key, {}), check, where=key)
            if why:
                record.pop(key)
                wrong.append(why)
        return record, "; ".join(wrong)

    def _update(self, place: Path, edit: Callable[[dict[str, Any]], object]) -> None:
        """Edit the record in `place`, under its lock (two installs at once must not set aside
        each other's sound record); a record that cannot be written costs a warning (the
        settings change is made by then), never the command. A damaged record is set aside
        first (`install-record.json.damaged-<time>`), with a warning: its sound parts carry on."""
        path = place / RECORD
        try:
            folder = self._folder() if place == self.folder else safe_folder(place.parent, place.name)
            with exclusive(folder / RECORD_LOCK, RECORD_LOCK_TIMEOUT):
                record, why = self._read(place)
                if why:
                    try:
                        aside = shape.set_aside(path)
                        kept = f"set aside as {aside.name}" if aside else "gone since"
                    except OSError as exc:
                        kept = f"it could not be set aside ({exc.strerror or exc}), so it is replaced"
                    rest = (
                        ", its sound parts kept"
                        if record.keys() & _RECORD_PARTS.keys()
                        else ", nothing of it read"
                    )
                    warnings.warn(SagememWarning(f"{path}: {why}; {kept}{rest}"), stacklevel=2)
                record = {"format": forms.INSTALL, **record}
                record.setdefault("created", {})
                edit(record)
                # ASCII: a path the file system gave may hold bytes that are not UTF-8.
                write_atomic(path, (json.dumps(record, ensure_ascii=True, indent=2) + "\n").encode("ascii"))
        except (OSError, SagememError) as exc:
            warnings.warn(SagememWarning(f"{path}: install's record not updated ({exc})"), stacklevel=2)


def _settings(record: dict[str, Any]) -> dict[str, Any]:
    """The record's settings install set: {path: {key: {"was": value} or {}}}."""
    found = record.get("settings", {})
    return found if isinstance(found, dict) else {}


def _own_folders(path: Path, named: list[str], inside: Path | None, home: Path | None) -> list[Path]:
    """The folders of `named` that install could have made for `path` (`Backups.created`)."""
    kept = []
    for given, parent in zip(named, path.parents, strict=False):
        folder = Path(given)
        if folder != parent or (home is not None and home.is_relative_to(folder)):
            break
        if inside is not None and (folder == inside or not folder.is_relative_to(inside)):
            break
        kept.append(folder)
    return kept


def _missing_folders(folder: Path) -> list[Path]:
    """The folders `mkdir(parents=True)` would make for `folder`, deepest first."""
    missing = []
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folder: Path) -> bool:
    try:
        folder.rmdir()
        return True
    except OSError:
        return False  # not empty: something of the person's is there


def keep_launcher(home: Path, *, dry_run: bool) -> dict[str, Any]:
    """The launcher the project's portable lines run, `~/.sagemem/bin/sagemem`: a link to
    this install's script (or, with no script, a shell script starting this Python's
    sagemem). It is this machine's own, in this user's home, so nothing a clone brings
    decides what runs; the last `install` on the machine sets it, as the first `sagemem` on
    PATH would be one install of several. `uninstall` leaves it: other projects use it."""
    path = home / LAUNCHER
    target, text = _launcher_target()
    outcome: dict[str, Any] = {
        "path": str(path),
        "changes": [],
        "backup": None,
        "created": False,
        "removed": False,
        "shared": False,
    }
    there = path.is_symlink() or path.exists()
    if there and not path.is_symlink() and not path.is_file():
        raise SagememError(
            f"{path}: not a file or a link, so sagemem cannot keep its launcher there; nothing was changed"
        )
    if target is not None and path.is_symlink() and os.readlink(path) == str(target):
        return outcome
    if text is not None and not path.is_symlink() and read_config(path) == text.encode("utf-8"):
        return outcome
    shown = str(target) if target is not None else sys.executable
    outcome["changes"].append(
        f"{'updated' if there else 'added'} this machine's sagemem for the project's shared settings: {shown}"
    )
    outcome["created"] = not there
    if dry_run:
        return outcome
    path.parent.mkdir(parents=True, exist_ok=True)
    if target is None:
        write_atomic(path, (text or "").encode("utf-8"))
        os.chmod(path, 0o755)
        return outcome
    fresh = path.with_name(f".{path.name}.{os.getpid()}.new")
    fresh.unlink(missing_ok=True)
    os.symlink(target, fresh)
    os.replace(fresh, path)  # a link replaced in one step: a hook starting now finds one or the other
    return outcome


def _launcher_target() -> tuple[Path, None] | tuple[None, str]:
    """What the launcher is: a link to this install's script, or (where sagemem runs as a
    module) the text of a shell script that runs that command."""
    words = sagemem_command()
    found = shutil.which(words[0]) if words == ("sagemem",) else words[0]
    if len(words) == 1 and found and os.path.isabs(found):
        return Path(found), None
    import shlex

    return None, f'#!/bin/sh\nexec {shlex.join(words)} "$@"\n'


def backup_beside(path: Path) -> Path:
    """A copy of `path` next to it, with the same bytes and permissions, named by the time
    (dsh's patch layer: dsh reads only `*.yml` there, and its folder is the person's own)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    copy = path.with_name(f"{path.name}.sagemem-backup-{stamp}")
    shutil.copy2(path, copy)
    return copy


def mcp_is_ours(entry: Any) -> bool:
    """An MCP server entry in either form `install` writes: `<.../sagemem> mcp` or
    `<python> [-P] -m sagemem mcp`. One with other arguments (`--dir`) is the person's own."""
    if not isinstance(entry, dict):
        return False
    args = entry.get("args")
    return (
        (args == ["mcp"] and "sagemem" in str(entry.get("command", "")))
        or args in (["-m", "sagemem", "mcp"], ["-P", "-m", "sagemem", "mcp"])
        or (
            entry.get("command") == "sh"
            and isinstance(args, list)
            and len(args) == 2
            and args[0] == "-c"
            and is_portable(args[1], "mcp")
        )
    )


def _shown(entry: dict[str, Any]) -> str:
    import shlex

    return shlex.join([str(entry.get("command", "")), *map(str, entry.get("args", []))])


def _mcp(data: dict[str, Any], add: bool, *, portable: bool = False) -> list[str]:
    """The `sagemem` entry of `mcpServers`: added if missing, brought to this sagemem's
    command if it is ours, removed only if it is ours."""
    servers = data.get("mcpServers", {})
    entry = servers.get("sagemem")
    if add and entry is None:
        data.setdefault("mcpServers", {})["sagemem"] = mcp_entry(portable=portable)
        return ["added MCP server sagemem"]
    if add and mcp_is_ours(entry):
        wanted = mcp_entry(portable=portable)
        if {k: entry.get(k) for k in wanted} == wanted:
            return []
        old = _shown(entry)
        entry.update(wanted)  # other keys (env, type) stay as they were
        return [f"updated MCP server sagemem: {old} -> {_shown(entry)}"]
    if not add and mcp_is_ours(entry):
        del servers["sagemem"]
        if not servers:
            data.pop("mcpServers", None)
        return ["removed MCP server sagemem"]
    return []


def registered_mcp(
    harness: str, *, home: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, dict[str, Any] | None] | None:
    """The `sagemem` MCP entry a harness keeps outside the files `install` edits, where its
    own command writes it: Claude Code's user scope (`~/.claude.json`), Codex's
    `config.toml`. (path, entry or None when there is none); None when the harness keeps
    none there, or the file cannot be read (or TOML cannot be parsed here)."""
    record = HARNESSES.get(harness)
    if record is None or not record.mcp_add or not record.mcp_user:
        return None
    path = user_file(record, record.mcp_user, home or Path.home(), env)
    data = read_toml(path) if path.suffix == ".toml" else _read_json(path)
    if data is None:
        return None
    servers = data.get(record.mcp_key)
    entry = servers.get("sagemem") if isinstance(servers, dict) else None
    return path, entry if isinstance(entry, dict) else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_config(path) or b"{}")
    except (OSError, SagememError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def read_toml(path: Path) -> dict[str, Any] | None:
    """A TOML file as a dict ({} when missing); None when it cannot be read or parsed."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the same parser, before it joined the standard library
        import tomli as tomllib
    try:
        return tomllib.loads((read_config(path) or b"").decode("utf-8"))
    except (OSError, SagememError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _gemini_trust_todo(cwd: Path, home: Path, env: Mapping[str, str]) -> list[str]:
    """Gemini reads a project's settings, hooks and all, only in a folder it trusts: what
    to do when it does not trust this one (`doctor` checks the same)."""
    from .doctor.gemini import gemini_trust
    from .doctor.places import Places

    trusted, why = gemini_trust(Places(cwd=cwd, home=home, env=dict(env)))
    if trusted:
        return []
    rules = home / ".gemini" / "trustedFolders.json"
    if trusted is None:
        rule = f'{json.dumps(str(cwd.resolve()))}: "TRUST_FOLDER"'
        how = f"start `gemini` here and trust the folder, or add {rule} to {rules}"
    else:
        how = f"see {why}"
    return [
        f"trust this folder in Gemini ({why}): it ignores a project's .gemini/settings.json until then; {how}"
    ]


def _trusts_its_tools(data: dict[str, Any]) -> list[str]:
    """Gemini offers a headless session (`gemini -p`) only the tools it needs no confirmation
    for: the MCP entry is marked `trust` (the record's `mcp_trust`), so that the model can
    search and save memories there too. A `trust` the person set (false included) stays
    theirs."""
    entry = data.get("mcpServers", {}).get("sagemem")
    if not mcp_is_ours(entry) or "trust" in entry:
        return []
    entry["trust"] = True
    return ["set trust on MCP server sagemem: Gemini runs its tools without asking, as `gemini -p` needs"]


def _mcp_todo(harness: str, scope: str, add: bool, *, home: Path, env: Mapping[str, str] | None) -> list[str]:
    """The harness's own command that adds (or removes) the MCP entry where `install` does
    not write it; none when it is already as it should be, or is the person's own."""
    record = HARNESSES[harness]
    place = mcp_place(record, scope)
    if place is None or place[1]:  # none, or `install` writes it
        return []
    found = registered_mcp(harness, home=home, env=env)
    known, entry = (found is not None), (found[1] if found else None)
    if entry is not None and not mcp_is_ours(entry):
        return []  # the person's own entry, under sagemem's name
    if not add:
        if known and entry is None:
            return []
        return [record.mcp_remove]
    wanted = mcp_entry()
    if entry is not None and {k: entry.get(k) for k in wanted} == wanted:
        return []
    return [mcp_add_line(record, replacing=entry is not None)]


def mcp_add_line(record: Harness, *, replacing: bool) -> str:
    """The harness's own command that writes sagemem's MCP entry; `replacing` an older one,
    that one is taken out first where the harness refuses a name it has (`mcp_replaces`)."""
    adding = record.mcp_add.format(command=command_line("mcp"))
    return f"{record.mcp_remove} && {adding}" if replacing and not record.mcp_replaces else adding


def _add(data: dict[str, Any], harness: str, *, portable: bool = False) -> list[str]:
    record = HARNESSES[harness]
    hooks = data.setdefault("hooks", {})
    changes = []
    for event, matcher, timeout in record.events:
        groups = hooks.setdefault(event, [])
        command = command_for(harness, event, portable=portable)
        mine = [h for g in groups for h in g.get("hooks", []) if own_handler(g, h, harness, event)]
        for own in mine:
            if own.get("command") != command:  # written by an earlier install, elsewhere
                changes.append(f"updated {event} hook: {own.get('command')} -> {command}")
                own["command"] = command
        if mine:
            continue
        handler: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
        if record.handler_name:
            handler = {"name": record.handler_name, **handler}
        group: dict[str, Any] = {"hooks": [handler]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        groups.append(group)
        changes.append(f"added {event} hook: {handler['command']}")
    return changes


def _remove(data: dict[str, Any], harness: str) -> list[str]:
    hooks = data.get("hooks", {})
    changes = []
    for event in [e.name for e in HARNESSES[harness].events]:
        groups = hooks.get(event, [])
        for group in groups:
            kept = [h for h in group.get("hooks", []) if not own_handler(group, h, harness, event)]
            if len(kept) != len(group.get("hooks", [])):
                changes.append(f"removed {event} hook")
                group["hooks"] = kept
        groups[:] = [g for g in groups if g.get("hooks")]
        if event in hooks and not hooks[event]:
            del hooks[event]
    if "hooks" in data and not data["hooks"]:
        del data["hooks"]
    return changes


def own_handler(group: Any, handler: Any, harness: str, event: str) -> bool:
    """A handler `add` wrote: our command line, in a group with our matcher. A user's own
    `sagemem hook ...` line under another matcher is theirs, to keep."""
    if not isinstance(group, dict) or not isinstance(handler, dict):
        return False
    command = str(handler.get("command", ""))
    matcher = {e.name: e.matcher for e in HARNESSES[harness].events}[event]
    return (
        group.get("matcher") == matcher
        and "sagemem" in command
        and command.endswith(f" hook {harness} {event}")
    )
