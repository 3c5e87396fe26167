"""Commands that look after the directory: ledger, cite, archive, restore, lock, unlock,
candidates, check, snapshot."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..store.errors import SagememError
from ..store.ledger import Record
from ..store.names import name_key
from .base import (
    _Context,
    _DefaultGroup,
    _print_json,
    _uses,
    cli,
    count,
    json_option,
    parts_option,
    pass_ctx,
    say,
)


@cli.command()
@click.argument("file")
@click.option("--reason", default="", help="Why it is retired (kept in its frontmatter).")
@json_option
@pass_ctx
def archive(ctx: _Context, file: str, reason: str, as_json: bool) -> None:
    """Move a memory to archive/ (never deleted; `restore` brings it back).

    \b
    Example:
        sagemem archive project_q4_goals.md --reason "Q4 is over"
    """
    store, own = ctx.memory_set.find(file)
    memory = store.archive(own, reason=reason)
    if as_json:
        return _print_json({"file": memory.file, "archived_at": memory.extra.get("archived_at")})
    say(f"archived {memory.file}")


@cli.command()
@click.argument("file")
@json_option
@pass_ctx
def restore(ctx: _Context, file: str, as_json: bool) -> None:
    """Bring an archived memory back, without its archive trace."""
    store, own = _archived(ctx, file)
    memory = store.restore(own)
    if as_json:
        return _print_json({"file": memory.file, "version": memory.version})
    say(f"restored {memory.file}")


@cli.command()
@click.argument("file")
@pass_ctx
def lock(ctx: _Context, file: str) -> None:
    """Protect a memory from every archive path (kept in the state dir, not the file)."""
    store, own = ctx.memory_set.find(file)
    changed = store.lock(own)
    say(f"locked {file}" if changed else f"{file} was already locked")


@cli.command()
@click.argument("file")
@pass_ctx
def unlock(ctx: _Context, file: str) -> None:
    """Remove a memory's lock."""
    scope, own = ctx.memory_set.split(file)
    store = ctx.memory_set.store(scope) if scope else ctx.store
    changed = store.unlock(own)
    say(f"unlocked {file}" if changed else f"{file} was not locked")


@cli.command()
@click.option("--apply", is_flag=True, help="Archive them (after a snapshot).")
@json_option
@pass_ctx
def candidates(ctx: _Context, apply: bool, as_json: bool) -> None:
    """Memories idle for at least their type's threshold, and why; --apply archives them.

    \b
    Example:
        sagemem candidates --json
    """
    if apply:
        outcome = ctx.store.archive_candidates()
        if as_json:
            _print_json([{"file": file, "archived": why is None, "refused": why} for file, why in outcome])
        else:
            for file, why in outcome:
                say(f"archived {file}" if why is None else f"not archived {file}: {why}")
        if any(why is not None for _, why in outcome):
            sys.exit(1)
        return
    found = ctx.store.candidates()
    if as_json:
        return _print_json([c.to_dict() for c in found])
    for c in found:
        say(f"{c.file}  {c.reason}; {_uses(c.uses)}")


@cli.group(cls=_DefaultGroup, default="list")
@json_option
def snapshot(as_json: bool) -> None:
    """Copies of every memory to roll back to: list (default), create, rollback."""


@snapshot.command("list")
@json_option
@pass_ctx
def snapshot_list(ctx: _Context, as_json: bool = False) -> None:
    """List snapshots, oldest first."""
    found = ctx.store.snapshots()
    if as_json:
        return _print_json([s.to_dict() for s in found])
    for s in found:
        say(f"{s.id}  {s.kind:<10}  {len(s.files):>4} files  {s.created}  {s.label}".rstrip())


@snapshot.command("create")
@click.option("--label", default="", help="A note kept with the snapshot.")
@json_option
@pass_ctx
def snapshot_create(ctx: _Context, label: str, as_json: bool) -> None:
    """Copy every memory and MEMORY.md into a new snapshot."""
    made = ctx.store.snapshot(label=label)
    if as_json:
        return _print_json(made.to_dict())
    say(f"{made.id}  {len(made.files)} files{made.left_out()}")


@snapshot.command("rollback")
@click.argument("snapshot_id")
@parts_option(
    "files: put the snapshot's files back (memories made since stay, with their MEMORY.md lines); "
    "all: also archive memories made since."
)
@json_option
@pass_ctx
def snapshot_rollback(ctx: _Context, snapshot_id: str, parts: str, as_json: bool) -> None:
    """Roll back to a snapshot (verified first; the present is snapshotted; nothing deleted)."""
    outcome = ctx.store.rollback(snapshot_id, scope=parts)
    if as_json:
        return _print_json(outcome)
    say(f"rolled back to {snapshot_id} (the present is kept as snapshot {outcome['protection']})")
    for key in ("restored", "retired", "kept"):
        if outcome[key]:
            say(f"{key}: {', '.join(outcome[key])}")


@cli.command()
@click.argument("file", required=False)
@json_option
@pass_ctx
def ledger(ctx: _Context, file: str | None, as_json: bool) -> None:
    """How each memory was used: injected, read and cited, kept apart."""
    records = ctx.store.ledger()
    if file is not None:
        key = name_key(file)
        name = next((n for n in records if name_key(n) == key), file)
        records = {name: records.get(name, Record(name))}
    if as_json:
        return _print_json([r.to_dict() for r in records.values()])
    for name in sorted(records):
        say(f"{name}  {_uses(records[name])}")


@cli.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--receipt", required=True, help="An id for this citation; the same receipt twice counts once.")
@pass_ctx
def cite(ctx: _Context, files: tuple[str, ...], receipt: str) -> None:
    """Report that an answer used these memories.

    \b
    Example:
        sagemem cite project_deploy_flow.md --receipt "$SESSION_ID:turn-12"
    """
    by_store: dict[Any, list[str]] = {}
    for name in files:
        store, own = ctx.memory_set.find(name)
        by_store.setdefault(store, []).append(own)
    counted = [n for store, owns in by_store.items() for n in store.cite(owns, receipt=receipt)]
    say(f"cited {len(counted)}" if counted else f"receipt {receipt} was already counted")


@cli.command("check")
@click.option(
    "--fix", is_flag=True, help="Apply the safe repairs (index lines, CRLF to LF) after a snapshot."
)
@json_option
@pass_ctx
def check_(ctx: _Context, fix: bool, as_json: bool) -> None:
    """Health checks; exits 1 if a problem is found (hints do not count).

    \b
    Example:
        sagemem check --json
    """
    memories = ctx.memory_set
    changes, findings, files = [], [], 0
    for store in memories.stores:
        if not store.memory_dir.is_dir() and store is not memories.first:
            continue
        changes += [memories.name(store, c) if memories.named else c for c in (store.fix() if fix else [])]
        report = store.check()
        files += report.files
        findings += [(store, f) for f in report.findings]
    problems = sum(1 for _, f in findings if f.severity == "problem")
    if as_json:
        shown = [
            {**f.to_dict(), "file": _where(memories, store, f.file), "scope": store.scope or "dir"}
            for store, f in findings
        ]
        _print_json(
            {"ok": not problems, "files": files, "problems": problems, "findings": shown, "fixed": changes}
        )
    else:
        for change in changes:
            say(f"fixed: {change}")
        for store, f in findings:
            file = _where(memories, store, f.file)
            where = f"{file}:{f.line}" if f.line else file
            say(f"{f.check}: {where}: {f.message}" + (" (hint)" if f.severity == "hint" else ""))
        say(f"{count(files, 'memory', 'memories')}, {count(problems, 'problem')}")
    if problems:
        sys.exit(1)


def _where(memories: Any, store: Any, file: str) -> str:
    """A finding's file named with its scope; findings about a folder or a copy (paths, a
    snapshot, a conflict record) are named with the scope in front."""
    if not memories.named:
        return file
    return f"{store.scope}:{file}"


def _archived(ctx: _Context, name: str) -> tuple[Any, str]:
    """The scope whose archive holds `name` (`scope:file`, or the one scope that has it)."""
    memories = ctx.memory_set
    scope, file = memories.split(name)
    if scope is not None:
        return memories.store(scope), file
    holders = [
        s
        for s in memories.stores
        if s.memory_dir.is_dir() and any(m.file.casefold() == file.casefold() for m in s.archived())
    ]
    if len(holders) > 1:
        raise SagememError(f"{file}: more than one scope has it archived; name the one you mean")
    return (holders[0] if holders else memories.first), file


@cli.command("purge-secrets")
@json_option
@pass_ctx
def purge_secrets(ctx: _Context, as_json: bool) -> None:
    """Redact likely secrets in archive/ and in the copies sagemem keeps (snapshots, conflict
    records), so no restore, rollback or resolution brings one back. Live memories are yours
    to edit; `check` lists what is where.

    \b
    Example:
        sagemem check && sagemem purge-secrets
    """
    changes = ctx.store.purge_secrets()
    if as_json:
        return _print_json({"changed": changes})
    for change in changes:
        say(change)
    say(f"{count(len(changes), 'copy', 'copies')} redacted" if changes else "no secret found in the copies")
