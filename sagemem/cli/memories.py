"""Commands on memory files: init, path, new, list, read, write, update, index, conflicts."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

import click

from ..store.errors import MemoryNotFound, SagememError
from ..store.names import TYPES
from ..store.secrets import redact, scan, shown
from ..store.text import split_lines
from .base import (
    _conflict_summary,
    _Context,
    _count_use,
    _DefaultGroup,
    _finite,
    _line_range,
    _print_json,
    _print_written,
    _read_text,
    _stdin,
    _text,
    _version,
    _width,
    _with,
    cli,
    count,
    json_option,
    pass_ctx,
    say,
    writer_options,
)


@cli.command()
@click.option("--git", is_flag=True, help="Also write .gitattributes (LF endings, union merge of MEMORY.md).")
@click.option("--project", is_flag=True, help="Create project memory in ./.sagemem/memory.")
@json_option
@pass_ctx
def init(ctx: _Context, git: bool, project: bool, as_json: bool) -> None:
    """Create the memory directory, MEMORY.md, the state dir and .gitignore. Idempotent.

    \b
    Example:
        sagemem init --project --git
    """
    if project:
        if ctx.memory_dir is not None:
            raise click.UsageError("--project and --dir choose the directory twice; use one")
        from ..store.config import PROJECT_DIR

        ctx.memory_dir = Path.cwd() / PROJECT_DIR
    elif ctx.memory_dir is None:
        from ..store.config import locate, user_memory_dir

        if locate(None, ctx.state_dir).rule.startswith("sage-mem's"):
            # `init` makes sagemem's own directory: sage-mem's is used, never set up, by sagemem.
            ctx.memory_dir = user_memory_dir()
    store = ctx.store
    existed = {
        p for p in (store.memory_dir / ".gitignore", store.memory_dir / ".gitattributes") if p.exists()
    }
    changed = store.init(git=git)
    if as_json:
        return _print_json({"memory_dir": str(store.memory_dir), "changed": [str(p) for p in changed]})
    for path in changed:
        say(f"updated {path}" if path in existed else f"created {path}")
    if not changed:
        say(f"already initialised: {ctx.store.memory_dir}")


@cli.command()
@json_option
@pass_ctx
def path(ctx: _Context, as_json: bool) -> None:
    """Print the scopes of the memory set: each memory dir, its state dir, and why it is there."""
    scopes = ctx.scopes
    if as_json:
        return _print_json({"scopes": [s.to_dict() for s in scopes], **_first(scopes[0])})
    for scope in scopes:
        missing = "" if scope.memory_dir.is_dir() else "  (does not exist yet: `sagemem init`)"
        say(f"{scope.name + ':':<9}{scope.memory_dir}  ({scope.rule}){missing}")
        say(f"{'':<9}state: {scope.state_dir}")


def _first(scope: Any) -> dict[str, str]:
    """The first scope in the older single-directory form of `path --json`."""
    return {"memory_dir": str(scope.memory_dir), "state_dir": str(scope.state_dir), "rule": scope.rule}


_TYPE_HELP = (
    "What kind of memory: user (who the user is), feedback (how to work), "
    "project (facts about the work), reference (where to find things)."
)


def _field_options(required: bool) -> list[Any]:
    """The fields a new memory needs: required for `new`; for `remember` chosen from its TEXT
    when not given."""
    type_help = _TYPE_HELP if required else _TYPE_HELP + " Required without TEXT; with it, user by default."
    return [
        click.option("--type", "type_", type=click.Choice(TYPES), required=required, help=type_help),
        click.option(
            "--name", required=required, help="Short name; also makes the file name <type>_<slug>.md."
        ),
        click.option(
            "--description", required=required, help="One line: what this memory is. Retrieval relies on it."
        ),
    ]


_new_options = [
    click.option("--tag", "tags", multiple=True, help="A tag (repeatable)."),
    click.option(
        "--alias", "aliases", multiple=True, help="Another phrase this memory answers to (repeatable)."
    ),
    click.option("--baseline", is_flag=True, help="Inject at the start of every session."),
    click.option(
        "--priority", type=float, default=0, callback=_finite, help="Baseline priority; higher first."
    ),
    click.option("--file", "file", help="File name to use instead of <type>_<slug>.md."),
    click.option("--body", help="Body text (else --body-file, else standard input)."),
    click.option("--body-file", type=click.Path(dir_okay=False, allow_dash=True), help="Body from a file."),
    click.option(
        "--in",
        "into",
        metavar="SCOPE",
        help="The scope to write to (else: user memories to the user scope, the others to the project's).",
    ),
    *writer_options,
    json_option,
]


@cli.command()
@_with(_field_options(required=True) + _new_options)
@pass_ctx
def new(ctx: _Context, **given: Any) -> None:
    """Create a memory; prints its file name and version.

    \b
    Example:
        echo "Run make deploy from main." | sagemem new --type project \\
            --name "deploy flow" --description "How we deploy to staging"
    """
    _create(ctx, given, similar=False)


@cli.command()
@click.argument("text", required=False)
@_with(_field_options(required=False) + _new_options)
@pass_ctx
def remember(ctx: _Context, text: str | None, **given: Any) -> None:
    """Save a memory, as an agent does: like `new`, and then it names the most similar memories
    already kept, so one can be updated instead of keeping two (`sagemem update`). Given only
    TEXT, it is saved as a user memory, named and described from the text (say what was chosen).

    \b
    Examples:
        sagemem remember "记住：我的猫叫芝麻"
        sagemem remember --type user --name "cat" --description "The user's cat is called Sesame" \\
            --alias "我的猫叫什么" --body "The cat is called Sesame (芝麻)."
    """
    chosen = []
    if text is not None:
        from ..store.sentence import fields_from

        if given["body"] is not None or given["body_file"] is not None:
            raise click.UsageError("give the text to remember or --body/--body-file, not both")
        fields = fields_from(text)
        for key, value in (("type_", "user"), ("name", fields.name), ("description", fields.description)):
            if not given[key]:
                given[key] = value
                chosen.append(key)
        given["body"] = fields.body
    else:
        for key, option in (("type_", "--type"), ("name", "--name"), ("description", "--description")):
            if not given[key]:
                raise click.UsageError(
                    f"Missing option '{option}' (or give only the text: sagemem remember \"...\")"
                )
    _create(ctx, given, similar=True, chosen=chosen)


def _create(ctx: _Context, given: dict[str, Any], *, similar: bool, chosen: list[str] | None = None) -> None:
    memories = ctx.memory_set
    text = _text(given["body"], given["body_file"])
    alike = (
        memories.similar(given["name"], given["description"], " ".join(given["aliases"])) if similar else []
    )
    store, memory = memories.create(
        into=given["into"] or ctx.only,  # `sagemem --in S new ...` names the scope as well
        type=given["type_"],
        name=given["name"],
        description=given["description"],
        body=text,
        tags=given["tags"],
        aliases=given["aliases"],
        baseline=given["baseline"],
        baseline_priority=given["priority"],
        file=given["file"],
        writer=given["writer"],
        reason=given["reason"],
    )
    shown = memories.name(store, memory.file)
    alike = [h for h in alike if h.file != shown]
    if given["as_json"]:
        data = {
            "file": shown,
            "version": memory.version,
            "scope": store.scope or "dir",
            "saved_to": memories.where(store),
        }
        if chosen:
            data["chosen"] = {("type" if k == "type_" else k): given[k] for k in chosen}
        if similar:
            data["similar"] = [{"file": h.file, "description": h.description} for h in alike]
        return _print_json(data)
    say(f"{shown} {memory.version}")
    if store.scope != "dir":  # a directory chosen by hand is where it went: no choice to name
        say(f"saved to {memories.where(store)}", err=True)
    if chosen:
        words = ", ".join(f"{'type' if k == 'type_' else k} {given[k]!r}" for k in chosen)
        say(
            f"chosen from the text: {words}; change it with `sagemem update {shown} --description ...`, "
            "or save it with --type, --name, --description or --in",
            err=True,
        )
    for hit in alike:
        say(f"similar: {hit.file} — {hit.description}", err=True)


@cli.command("list")
@click.option("--type", "type_", type=click.Choice(TYPES), help="Only memories of this type.")
@click.option("--tag", help="Only memories with this tag.")
@click.option("--archived", is_flag=True, help="List archived memories, with date and reason.")
@json_option
@pass_ctx
def list_(ctx: _Context, type_: str | None, tag: str | None, archived: bool, as_json: bool) -> None:
    """List memories, of every scope (files that cannot be read are named on stderr)."""
    memories = ctx.memory_set
    if archived:
        found = [
            (store, m)
            for store in memories.stores
            if store.memory_dir.is_dir()
            for m in store.archived()
            if (not type_ or m.type == type_)
            and (not tag or tag.casefold() in {t.casefold() for t in m.tags})
        ]
        if as_json:
            return _print_json([_listed(memories, store, m) for store, m in found])
        for store, m in found:
            name = memories.name(store, m.file)
            say(f"{name}  {m.extra.get('archived_at', '-')}  {m.extra.get('archived_reason', '')}")
        return
    found = []
    for store in memories.stores:
        if not store.memory_dir.is_dir() and store is not memories.first:
            continue
        scan = store.scan()
        for problem in scan.problems:
            say(f"sagemem: warning: {memories.name(store, problem.file)}: {problem.rule}", err=True)
        found += [(store, m) for m in scan.select(type=type_, tag=tag)]
    if as_json:
        return _print_json([_listed(memories, store, m) for store, m in found])
    names = [memories.name(store, m.file) for store, m in found]
    width = max((_width(n) for n in names), default=0)
    for name, (_, m) in zip(names, found, strict=True):
        padding = " " * (width - _width(name))
        say(f"{name}{padding}  {m.type or '-':<9}  {shown(m.description)}".rstrip())


def _listed(memories: Any, store: Any, memory: Any) -> dict[str, Any]:
    """A memory's fields as listed: a secret in one is redacted, as everywhere a listing can
    reach a model (an agent runs `sagemem list` too); `check` names it for the person."""
    data = memory.to_dict()
    for key in ("name", "description"):
        data[key] = shown(data[key] or "") if data[key] else data[key]
    for key in ("tags", "aliases"):
        data[key] = [shown(value) for value in data[key]]
    return {**data, "file": memories.name(store, memory.file), "scope": store.scope or "dir"}


@cli.command()
@click.argument("file")
@click.option(
    "--lines",
    callback=lambda _ctx, _param, value: value and _line_range(value),
    help="Only lines A-B of the file (1-based, inclusive).",
)
@json_option
@pass_ctx
def read(ctx: _Context, file: str, lines: tuple[int, int] | None, as_json: bool) -> None:
    """Print a memory file; its version goes to stderr (or into --json).

    \b
    Example:
        sagemem read project_deploy_flow.md --lines 5-12
    """
    store, own = ctx.memory_set.find(file)
    result = store.read(own)
    _count_use(store, "read", [result.file])
    shown = ctx.memory_set.name(store, result.file)
    text, first, last = result.text, 1, None
    if lines:
        first, last = lines
        all_lines = split_lines(result.text)
        if first > len(all_lines):
            raise SagememError(f"{shown}: has {len(all_lines)} lines; --lines {first}-{last} is past the end")
        text = "".join(all_lines[first - 1 : last])
        last = min(last, len(all_lines))
    if as_json:
        return _print_json(
            {
                "file": shown,
                "version": result.version,
                "lines": [first, last] if lines else None,
                "text": text,
                "memory": result.memory.to_dict() if result.memory else None,
                "problem": result.problem,
            }
        )
    click.echo(text, nl=False)
    say(f"sagemem: {shown} version {result.version}", err=True)
    if result.problem:
        say(f"sagemem: warning: {shown}: {result.problem}", err=True)


@cli.command()
@click.argument("file")
@click.option(
    "--expected-version",
    callback=_version,
    help="Version the new content is based on, or its first 12+ digits (omit to create a new file).",
)
@click.option(
    "--content-file", type=click.Path(dir_okay=False, allow_dash=True), help="New content (else stdin)."
)
@click.option(
    "--in",
    "into",
    metavar="SCOPE",
    help="For a new memory, the scope to create it in (else by its type, as `new` does).",
)
@_with(writer_options)
@json_option
@pass_ctx
def write(
    ctx: _Context,
    file: str,
    expected_version: str | None,
    content_file: Any,
    into: str | None,
    reason: str,
    writer: str,
    as_json: bool,
) -> None:
    """Replace a memory's whole content, guarded by its version; prints file name and new version.

    Exit code 3 if the file changed since --expected-version: nothing is written, and the
    content is kept as a conflict (its id on stderr).

    \b
    Example:
        sagemem write project_deploy_flow.md --expected-version 3f2a... --content-file new.md
    """
    content = _read_text(content_file) if content_file else _stdin()
    store, own = _target(ctx, file, expected_version, content, into)
    memory = store.write(
        own, content, expected_version=expected_version, writer=writer, reason=reason, short_version=True
    )
    _print_written(memory, as_json, name=ctx.memory_set.name(store, memory.file), scope=store.scope)


def _target(ctx: _Context, name: str, expected: str | None, content: str, into: str | None) -> Any:
    """Where `write` writes: the scope named (`user:x.md` or `--in`), the scope holding the
    memory, else (a new one) where `new` would put a memory of its type."""
    memories = ctx.memory_set
    scope, file = memories.split(name)
    if scope is not None or into is not None:
        return memories.store(scope or into), file
    try:
        return memories.find(name)
    except MemoryNotFound:
        pass  # new, or (with a version) deleted meanwhile: the write itself says which
    from ..store.memory import parse_memory  # YAML: loaded by the writing commands only

    try:
        kind = parse_memory(file, content.encode("utf-8")).type
    except (SagememError, ValueError):
        kind = ""
    return memories.route(kind), file


@cli.command()
@click.argument("file")
@click.option(
    "--expected-version",
    required=True,
    callback=_version,
    help="Version the change is based on, or its first 12+ digits.",
)
@click.option("--name", help="A new name (the file keeps its name).")
@click.option("--description", help="A new one-line description.")
@click.option("--type", "type_", type=click.Choice(TYPES), help="A new type (the file keeps its name).")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--alias", "aliases", multiple=True, help="Replace the aliases (repeatable).")
@click.option(
    "--baseline/--no-baseline",
    default=None,
    help="Inject at the start of every session, or no longer; unchanged if not given.",
)
@click.option("--priority", type=float, callback=_finite, help="Baseline priority.")
@click.option("--body", help="Replace the body.")
@click.option(
    "--body-file", type=click.Path(dir_okay=False, allow_dash=True), help="Replace the body from a file."
)
@_with(writer_options)
@json_option
@pass_ctx
def update(
    ctx: _Context,
    file: str,
    expected_version: str,
    name: str | None,
    description: str | None,
    type_: str | None,
    tags: tuple[str, ...],
    aliases: tuple[str, ...],
    baseline: bool | None,
    priority: float | None,
    body: str | None,
    body_file: Any,
    reason: str,
    writer: str,
    as_json: bool,
) -> None:
    """Change frontmatter fields in place; every other byte of the file stays as it is.

    \b
    Example:
        sagemem update project_deploy_flow.md --expected-version 3f2a... --tag deploy --tag ci
    """
    given = {
        "name": name,
        "description": description,
        "type": type_,
        "tags": tags or None,
        "aliases": aliases or None,
        "baseline": baseline,
        "baseline_priority": priority,
    }
    fields = {k: v for k, v in given.items() if v is not None}
    if body is not None and body_file is not None:
        raise click.UsageError("give --body or --body-file, not both")
    new_body = _read_text(body_file) if body_file else body
    store, own = ctx.memory_set.find(file)
    memory = store.update(
        own,
        expected_version=expected_version,
        body=new_body,
        writer=writer,
        reason=reason,
        short_version=True,
        **fields,
    )
    _print_written(memory, as_json, name=ctx.memory_set.name(store, memory.file), scope=store.scope)


@cli.command()
@click.argument("file")
@click.option(
    "--to", "to", required=True, metavar="SCOPE", help="The scope to move it to (see `sagemem path`)."
)
@_with(writer_options)
@json_option
@pass_ctx
def move(ctx: _Context, file: str, to: str, reason: str, writer: str, as_json: bool) -> None:
    """Move a memory to another scope of the set: created there, then taken out of its old
    scope if it is still the version copied (else exit 3, and both copies stay); both
    indexes follow.

    \b
    Example:
        sagemem move project:user_prefers_pnpm.md --to user
    """
    store, memory = ctx.memory_set.move(file, to, writer=writer, reason=reason)
    _print_written(memory, as_json, name=ctx.memory_set.name(store, memory.file), scope=store.scope)


@cli.command("index")
@click.option("--check", "mode", flag_value="check", default=True, help="Report problems (default).")
@click.option(
    "--rebuild",
    "mode",
    flag_value="rebuild",
    help="Fix them: drop dangling and duplicate lines, refresh stale ones, append unlisted memories.",
)
@json_option
@pass_ctx
def index_(ctx: _Context, mode: str, as_json: bool) -> None:
    """Check MEMORY.md against the memory files, or rebuild it. --check exits 1 on problems."""
    if mode == "rebuild":
        changed = ctx.store.rebuild_index()
        if as_json:
            return _print_json({"changed": changed})
        say("MEMORY.md rebuilt" if changed else "MEMORY.md is up to date")
        return
    report = ctx.store.check_index()
    if as_json:
        _print_json(report.to_dict())
    else:
        for label, entries in (
            ("dangling", report.dangling),
            ("duplicate", report.duplicates),
            ("stale", report.stale),
        ):
            for e in entries:
                say(f"{label}: line {e.line}: {e.text}")
        for file in report.unlisted:
            say(f"unlisted: {file}")
        if report.ok:
            say("MEMORY.md is up to date")
    if not report.ok:
        problems = len(report.dangling) + len(report.duplicates) + len(report.stale) + len(report.unlisted)
        say(
            f"sagemem: MEMORY.md: {count(problems, 'problem')}; `sagemem index --rebuild` fixes them",
            err=True,
        )
        sys.exit(1)


@cli.group(cls=_DefaultGroup, default="list")
@json_option
def conflicts(as_json: bool) -> None:
    """Refused writes waiting for a person: list (default), show, resolve."""


@conflicts.command("list")
@click.option("--resolved", is_flag=True, help="List resolved conflicts instead.")
@json_option
@pass_ctx
def conflicts_list(ctx: _Context, resolved: bool = False, as_json: bool = False) -> None:
    """List conflicts, of every scope."""
    from ..store.guard import damaged_records

    memories = ctx.memory_set
    stores = [store for store in memories.stores if store.memory_dir.is_dir() or store is memories.first]
    found = [(store, c) for store in stores for c in store.conflicts(resolved=resolved)]
    # A record left out may hold a person's refused write: say so (stderr: JSON stays JSON).
    unread = sum(
        (path.parent.name == "resolved") == resolved
        for store in stores
        for path, _ in damaged_records(store.state_dir)
    )
    if as_json:
        _print_json([{**_conflict_summary(c), "file": memories.name(store, c.file)} for store, c in found])
    else:
        for store, c in found:
            done = f"  kept {c.resolution}" if c.resolution else ""
            file = memories.name(store, c.file)
            say(f"{c.id}  {file}  {c.kind}  {c.created}  {c.writer}{done}  {c.reason}".rstrip())
            if not c.resolution:
                say(f"    to close: {c.ending()}")
    if unread:
        records = count(unread, "conflict record")
        say(f"sagemem: hint: left out, as it cannot be read: {records}; `sagemem check` says why", err=True)


def _conflict_store(ctx: _Context, conflict_id: str) -> tuple[Any, str]:
    """The scope that keeps conflict `conflict_id` (`scope:id`, or the one that has it)."""
    memories = ctx.memory_set
    scope, cid = memories.split(conflict_id)
    if scope is not None:
        return memories.store(scope), cid
    for store in memories.stores:
        if store.memory_dir.is_dir() and any(c.id == cid for c in store.conflicts()):
            return store, cid
    return memories.first, cid


@conflicts.command("show")
@click.argument("conflict_id")
@json_option
@pass_ctx
def conflicts_show(ctx: _Context, conflict_id: str, as_json: bool) -> None:
    """Show a conflict: what was on disk, and a diff to what was proposed."""
    store, cid = _conflict_store(ctx, conflict_id)
    c = store.conflict(cid)
    if as_json:
        return _print_json(_redacted({**c.to_dict(), "to_close": None if c.resolution else c.ending()}))
    for key, value in _conflict_summary(c).items():
        say(f"{key + ':':<18}{value if value is not None else '-'}")
    say("")
    if c.proposed is None:
        # A field change that could not be applied to the file as it was: the reason says
        # what was asked; there is nothing to diff or to write.
        say("no content was proposed (the change could not be applied to the file as it was; see reason)")
        return
    disk = split_lines(_unsecret((c.disk or b"").decode("utf-8", "replace")))
    proposed = split_lines(_unsecret(c.proposed.decode("utf-8", "replace")))
    for line in difflib.unified_diff(disk, proposed, f"{c.file} (on disk)", f"{c.file} (proposed)"):
        say(line.removesuffix("\n"))


def _unsecret(text: str) -> str:
    """`text` with every secret the full scan finds redacted: the write guard's refusal sends
    the agent here, so a secret already on disk is not shown to it (`check` names it)."""
    found = scan(text)
    return redact(text, found) if found else text


def _redacted(record: dict[str, Any]) -> dict[str, Any]:
    """A conflict's JSON with both sides' text redacted (a side kept as base64 is bytes
    that are not UTF-8 text, so no prompt reads it as text)."""
    return {
        key: _unsecret(value) if key in ("disk", "proposed") and isinstance(value, str) else value
        for key, value in record.items()
    }


@conflicts.command("resolve")
@click.argument("conflict_id")
@click.option(
    "--keep",
    type=click.Choice(["disk", "proposed"]),
    required=True,
    help="disk: leave the file as it is; proposed: write the refused content (version guarded).",
)
@json_option
@pass_ctx
def conflicts_resolve(ctx: _Context, conflict_id: str, keep: str, as_json: bool) -> None:
    """Settle a conflict by keeping one side."""
    store, cid = _conflict_store(ctx, conflict_id)
    c = store.resolve_conflict(cid, keep, writer="sagemem cli")
    if as_json:
        return _print_json(_conflict_summary(c))
    say(f"{c.id}: kept {keep} for {ctx.memory_set.name(store, c.file)}")
