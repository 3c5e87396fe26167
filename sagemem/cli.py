"""The `sagemem` command: a thin layer over `MemoryStore`.

Each command opens the store, calls one method and prints the result (`--json` for machines).
Errors are translated in one place (`_Group.invoke`): a `SagememError` becomes a one-line
message on stderr and its class's exit code (1 error, 3 version conflict); click's usage
errors exit 2.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import os
import re
import sys
import unicodedata
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any

import click

from . import __version__
from .errors import SagememError, SagememWarning
from .names import TYPES
from .text import split_lines


class _Failure(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"sagemem: {_one_line(self.format_message())}", err=True)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SagememWarning)
            try:
                return super().invoke(ctx)
            except SagememError as exc:
                raise _Failure(str(exc), exc.exit_code) from exc
            except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps exit-time flushes quiet
                raise SystemExit(0) from None
            except OSError as exc:
                where = f"{exc.filename}: " if exc.filename else ""
                raise _Failure(f"{where}{exc.strerror or exc}", 1) from exc
            finally:
                for warning in caught:
                    if issubclass(warning.category, SagememWarning):
                        click.echo(f"sagemem: warning: {_one_line(str(warning.message))}", err=True)
                    else:
                        warnings.showwarning(
                            warning.message, warning.category, warning.filename, warning.lineno
                        )


class _Context:
    """What the global options chose; the location and store are resolved on first use."""

    def __init__(self, memory_dir: Path | None, state_dir: Path | None) -> None:
        self.memory_dir = memory_dir
        self.state_dir = state_dir

    @cached_property
    def location(self) -> Any:
        from .config import locate

        return locate(self.memory_dir, self.state_dir)

    @cached_property
    def store(self) -> Any:
        from .store import MemoryStore

        return MemoryStore.at(self.location)


def _version(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"[0-9a-f]{64}", value):
        raise click.BadParameter(
            f"{value!r} is not a version (64 hexadecimal digits, as `read --json` prints)"
        )
    return value


def _finite(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number")
    return value


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
writer_options = [
    click.option("--reason", default="", help="Why this change is made (kept with a conflict)."),
    click.option(
        "--writer", default="sagemem cli", show_default=True, help="Who writes (kept with a conflict)."
    ),
]


def _with(options: list[Any]) -> Any:
    def decorate(func: Any) -> Any:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="sagemem")
@click.option(
    "--dir",
    "memory_dir",
    type=click.Path(path_type=Path),
    help="Memory directory (else SAGEMEM_DIR, "
    "SAGE_MEM_DIR, the nearest .sagemem/memory above the current directory, ~/.sagemem/memory).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    help="State directory (else SAGEMEM_STATE_DIR, <memory dir>/.sagemem).",
)
@click.pass_context
def cli(ctx: click.Context, memory_dir: Path | None, state_dir: Path | None) -> None:
    """File-based Markdown memory for AI agents."""
    ctx.obj = _Context(memory_dir, state_dir)


pass_ctx = click.make_pass_decorator(_Context)


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
        from .config import PROJECT_DIR

        ctx.memory_dir = Path.cwd() / PROJECT_DIR
    changed = ctx.store.init(git=git)
    if as_json:
        return _print_json({"memory_dir": str(ctx.store.memory_dir), "changed": [str(p) for p in changed]})
    for path in changed:
        click.echo(f"created {path}" if path.is_dir() or path.name == "MEMORY.md" else f"updated {path}")
    if not changed:
        click.echo(f"already initialised: {ctx.store.memory_dir}")


@cli.command()
@json_option
@pass_ctx
def path(ctx: _Context, as_json: bool) -> None:
    """Print the memory dir, the state dir and which rule chose them."""
    location = ctx.location
    if as_json:
        return _print_json(location.to_dict())
    click.echo(f"memory dir: {location.memory_dir}  ({location.rule})")
    click.echo(f"state dir:  {location.state_dir}  ({location.state_rule})")


@cli.command()
@click.option("--type", "type_", type=click.Choice(TYPES), required=True)
@click.option("--name", required=True, help="Short name; also makes the file name <type>_<slug>.md.")
@click.option("--description", required=True, help="One line: what this memory is. Retrieval relies on it.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--alias", "aliases", multiple=True, help="Another phrase this memory answers to (repeatable).")
@click.option("--baseline", is_flag=True, help="Inject at the start of every session.")
@click.option("--priority", type=float, default=0, callback=_finite, help="Baseline priority; higher first.")
@click.option("--file", "file", help="File name to use instead of <type>_<slug>.md.")
@click.option("--body", help="Body text (else --body-file, else standard input).")
@click.option("--body-file", type=click.Path(dir_okay=False, allow_dash=True), help="Body from a file.")
@_with(writer_options)
@json_option
@pass_ctx
def new(
    ctx: _Context,
    type_: str,
    name: str,
    description: str,
    tags: tuple[str, ...],
    aliases: tuple[str, ...],
    baseline: bool,
    priority: float,
    file: str | None,
    body: str | None,
    body_file: Any,
    reason: str,
    writer: str,
    as_json: bool,
) -> None:
    """Create a memory; prints its file name and version.

    \b
    Example:
        echo "Run make deploy from main." | sagemem new --type project \\
            --name "deploy flow" --description "How we deploy to staging"
    """
    memory = ctx.store.create(
        type=type_,
        name=name,
        description=description,
        body=_text(body, body_file),
        tags=tags,
        aliases=aliases,
        baseline=baseline,
        baseline_priority=priority,
        file=file,
        writer=writer,
        reason=reason,
    )
    _print_written(memory, as_json)


@cli.command("list")
@click.option("--type", "type_", type=click.Choice(TYPES), help="Only memories of this type.")
@click.option("--tag", help="Only memories with this tag.")
@click.option("--archived", is_flag=True, help="List archived memories, with date and reason.")
@json_option
@pass_ctx
def list_(ctx: _Context, type_: str | None, tag: str | None, archived: bool, as_json: bool) -> None:
    """List memories (files that cannot be read are named on stderr)."""
    if archived:
        found = [m for m in ctx.store.archived() if (not type_ or m.type == type_)]
        if as_json:
            return _print_json([m.to_dict() for m in found])
        for m in found:
            click.echo(f"{m.file}  {m.extra.get('archived_at', '-')}  {m.extra.get('archived_reason', '')}")
        return
    scan = ctx.store.scan()
    memories = scan.select(type=type_, tag=tag)
    for problem in scan.problems:
        click.echo(f"sagemem: warning: {problem}", err=True)
    if as_json:
        return _print_json([m.to_dict() for m in memories])
    width = max((_width(m.file) for m in memories), default=0)
    for m in memories:
        padding = " " * (width - _width(m.file))
        click.echo(f"{m.file}{padding}  {m.type or '-':<9}  {m.description}".rstrip())


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
    result = ctx.store.read(file)
    _count_use(ctx, "read", [result.file])
    text, first, last = result.text, 1, None
    if lines:
        first, last = lines
        all_lines = split_lines(result.text)
        if first > len(all_lines):
            raise SagememError(
                f"{result.file}: has {len(all_lines)} lines; --lines {first}-{last} is past the end"
            )
        text = "".join(all_lines[first - 1 : last])
        last = min(last, len(all_lines))
    if as_json:
        return _print_json(
            {
                "file": result.file,
                "version": result.version,
                "lines": [first, last] if lines else None,
                "text": text,
                "memory": result.memory.to_dict() if result.memory else None,
                "problem": result.problem,
            }
        )
    click.echo(text, nl=False)
    click.echo(f"sagemem: {result.file} version {result.version}", err=True)
    if result.problem:
        click.echo(f"sagemem: warning: {result.file}: {result.problem}", err=True)


@cli.command()
@click.argument("file")
@click.option(
    "--expected-version",
    callback=_version,
    help="Version the new content is based on (omit to create a new file).",
)
@click.option(
    "--content-file", type=click.Path(dir_okay=False, allow_dash=True), help="New content (else stdin)."
)
@_with(writer_options)
@json_option
@pass_ctx
def write(
    ctx: _Context,
    file: str,
    expected_version: str | None,
    content_file: Any,
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
    memory = ctx.store.write(file, content, expected_version=expected_version, writer=writer, reason=reason)
    _print_written(memory, as_json)


@cli.command()
@click.argument("file")
@click.option("--expected-version", required=True, callback=_version, help="Version the change is based on.")
@click.option("--name")
@click.option("--description")
@click.option("--type", "type_", type=click.Choice(TYPES))
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--alias", "aliases", multiple=True, help="Replace the aliases (repeatable).")
@click.option("--baseline/--no-baseline", default=None)
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
    memory = ctx.store.update(
        file, expected_version=expected_version, body=new_body, writer=writer, reason=reason, **fields
    )
    _print_written(memory, as_json)


@cli.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 30), help="Snippets at most (default: the `limit` setting).")
@json_option
@pass_ctx
def search(ctx: _Context, query: str, limit: int | None, as_json: bool) -> None:
    """Ranked snippets for QUERY: no session, nothing recorded.

    \b
    Example:
        sagemem search "how do we deploy to production" --json
    """
    from .inject import read_snippet

    store = ctx.store
    result = store.search(query, limit=limit)
    rows = []
    for hit in result.hits:
        snippet = read_snippet(store.memory_dir, hit.entry, hit.start, hit.end)
        rows.append((hit, snippet.text if snippet else ""))
    if as_json:
        return _print_json(
            [
                {
                    "file": h.file,
                    "lines": [h.start, h.end],
                    "score": round(h.score, 4),
                    "stage": h.stage,
                    "description": h.description,
                    "version": h.version,
                    "snippet": text,
                }
                for h, text in rows
            ]
        )
    for hit, text in rows:
        click.echo(f"{hit.file}:{hit.start}-{hit.end}  {hit.score:.2f}  {hit.description}")
        for line in text.splitlines()[:3]:
            click.echo(f"    {line}")


@cli.command()
@click.option("--query", "-q", required=True, help="The user's message.")
@click.option("--session", help="Session id: budget, no repeats, baseline at the start (else stateless).")
@click.option("--reset", is_flag=True, help="Start the session afresh (after a context compaction or clear).")
@click.option("--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@pass_ctx
def inject(ctx: _Context, query: str, session: str | None, reset: bool, output: str) -> None:
    """Print what to inject into the prompt for a message: nothing at all when nothing qualifies.

    \b
    Example:
        sagemem inject --query "上线前数据库迁移要注意什么" --session "$SESSION_ID"
    """
    if reset and session is None:
        raise click.UsageError("--reset needs --session")
    # The hot path: the inject module directly (what MemoryStore.inject calls), so that a
    # prompt does not pay for importing the writing half of the library (YAML, guard, index).
    from .config import load_settings
    from .errors import StoreNotFound
    from .inject import inject as run_inject

    location = ctx.location
    if not location.memory_dir.is_dir():
        raise StoreNotFound(f"{location.memory_dir}: memory directory does not exist (run `sagemem init`)")
    settings = load_settings(location.state_dir)
    injection = run_inject(
        location.memory_dir, location.state_dir, query, settings, session=session, reset=reset
    )
    if settings.debug:
        click.echo(f"sagemem: debug {json.dumps(injection.diagnostics, ensure_ascii=False)}", err=True)
    if output == "json":
        return _print_json(injection.to_dict())
    click.echo(injection.text, nl=False)


@cli.command("eval")
@click.argument("set_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@json_option
@pass_ctx
def eval_(ctx: _Context, set_dir: Path, as_json: bool) -> None:
    """Measure retrieval on an evaluation set (SET_DIR/memory and SET_DIR/queries.jsonl).

    \b
    Example:
        sagemem eval fixtures/eval
    """
    from .config import load_settings
    from .evaluate import evaluate

    settings = load_settings(Path(ctx.state_dir) if ctx.state_dir else set_dir / "memory" / ".sagemem")
    report = evaluate(set_dir, settings)
    summary, breakdown = report.summary(), report.breakdown()
    if as_json:
        return _print_json({"summary": summary, "breakdown": breakdown})
    click.echo(f"{'':18}{'queries':>8}{'R@5':>8}{'evid@5':>8}{'FalseInj':>10}{'bytes':>8}")
    for name, row in [("all", summary), *breakdown.items()]:
        click.echo(
            f"{name:18}{row['queries']:>8}{row['recall_at_5']:>8.3f}{row['evidence_at_5']:>8.3f}"
            f"{row['false_injection']:>10.1%}{row['mean_bytes']:>8.0f}"
        )


@cli.command()
@click.option("--memories", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option("--lang", type=click.Choice(["en", "zh", "mixed"]), default="mixed", show_default=True)
@click.option("--repeat", type=click.IntRange(3, 200), default=15, show_default=True, help="Runs per figure.")
@json_option
def bench(memories: int, lang: str, repeat: int, as_json: bool) -> None:
    """Time the hot path on a generated corpus (in a temp dir), against a bare interpreter.

    \b
    Example:
        sagemem bench --memories 1000 --lang zh
    """
    from .bench import format_report, run

    def progress(label: str) -> None:
        if sys.stderr.isatty():
            click.echo(f"  {label}...", err=True)

    report = run(memories, lang, repeat, progress)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))


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
    memory = ctx.store.archive(file, reason=reason)
    if as_json:
        return _print_json({"file": memory.file, "archived_at": memory.extra.get("archived_at")})
    click.echo(f"archived {memory.file}")


@cli.command()
@click.argument("file")
@json_option
@pass_ctx
def restore(ctx: _Context, file: str, as_json: bool) -> None:
    """Bring an archived memory back, without its archive trace."""
    memory = ctx.store.restore(file)
    if as_json:
        return _print_json({"file": memory.file, "version": memory.version})
    click.echo(f"restored {memory.file}")


@cli.command()
@click.argument("file")
@pass_ctx
def lock(ctx: _Context, file: str) -> None:
    """Protect a memory from every archive path (kept in the state dir, not the file)."""
    changed = ctx.store.lock(file)
    click.echo(f"locked {file}" if changed else f"{file} was already locked")


@cli.command()
@click.argument("file")
@pass_ctx
def unlock(ctx: _Context, file: str) -> None:
    """Remove a memory's lock."""
    changed = ctx.store.unlock(file)
    click.echo(f"unlocked {file}" if changed else f"{file} was not locked")


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
        archived = ctx.store.archive_candidates()
        if as_json:
            return _print_json([m.file for m in archived])
        for m in archived:
            click.echo(f"archived {m.file}  ({m.extra.get('archived_reason', '')})")
        return
    found = ctx.store.candidates()
    if as_json:
        return _print_json([c.to_dict() for c in found])
    for c in found:
        click.echo(f"{c.file}  {c.reason}; {_uses(c.uses)}")


@cli.group(invoke_without_command=True)
@json_option
@click.pass_context
def snapshot(click_ctx: click.Context, as_json: bool) -> None:
    """Copies of every memory to roll back to: list (default), create, rollback."""
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(snapshot_list, as_json=as_json)


@snapshot.command("list")
@json_option
@pass_ctx
def snapshot_list(ctx: _Context, as_json: bool = False) -> None:
    """List snapshots, oldest first."""
    found = ctx.store.snapshots()
    if as_json:
        return _print_json([s.to_dict() for s in found])
    for s in found:
        click.echo(f"{s.id}  {s.kind:<10}  {len(s.files):>4} files  {s.created}  {s.label}".rstrip())


@snapshot.command("create")
@click.option("--label", default="", help="A note kept with the snapshot.")
@json_option
@pass_ctx
def snapshot_create(ctx: _Context, label: str, as_json: bool) -> None:
    """Copy every memory and MEMORY.md into a new snapshot."""
    made = ctx.store.snapshot(label=label)
    if as_json:
        return _print_json(made.to_dict())
    click.echo(f"{made.id}  {len(made.files)} files")


@snapshot.command("rollback")
@click.argument("snapshot_id")
@click.option(
    "--scope",
    type=click.Choice(["files", "all"]),
    default="files",
    show_default=True,
    help="files: put the snapshot's files back; all: also archive memories made since.",
)
@json_option
@pass_ctx
def snapshot_rollback(ctx: _Context, snapshot_id: str, scope: str, as_json: bool) -> None:
    """Roll back to a snapshot (verified first; the present is snapshotted; nothing deleted)."""
    outcome = ctx.store.rollback(snapshot_id, scope=scope)
    if as_json:
        return _print_json(outcome)
    click.echo(f"rolled back to {snapshot_id} (the present is kept as snapshot {outcome['protection']})")
    for key in ("restored", "retired", "kept"):
        if outcome[key]:
            click.echo(f"{key}: {', '.join(outcome[key])}")


@cli.command()
@click.argument("file", required=False)
@json_option
@pass_ctx
def ledger(ctx: _Context, file: str | None, as_json: bool) -> None:
    """How each memory was used: injected, read and cited, kept apart."""
    records = ctx.store.ledger()
    if file is not None:
        name = ctx.store.resolve(file)
        records = {name: records[name]} if name in records else {}
    if as_json:
        return _print_json([r.to_dict() for r in records.values()])
    for name in sorted(records):
        click.echo(f"{name}  {_uses(records[name])}")


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
    counted = ctx.store.cite(files, receipt=receipt)
    click.echo(f"cited {len(counted)}" if counted else f"receipt {receipt} was already counted")


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
    changes = ctx.store.fix() if fix else []
    report = ctx.store.check()
    if as_json:
        _print_json({**report.to_dict(), "fixed": changes})
    else:
        for change in changes:
            click.echo(f"fixed: {change}")
        for f in report.findings:
            where = f"{f.file}:{f.line}" if f.line else f.file
            click.echo(f"{f.check}: {where}: {f.message}" + (" (hint)" if f.severity == "hint" else ""))
        click.echo(f"{report.files} memories, {report.problems} problem(s)")
    if not report.ok:
        sys.exit(1)


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
        click.echo("MEMORY.md rebuilt" if changed else "MEMORY.md is up to date")
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
                click.echo(f"{label}: line {e.line}: {e.text}")
        for file in report.unlisted:
            click.echo(f"unlisted: {file}")
        if report.ok:
            click.echo("MEMORY.md is up to date")
    if not report.ok:
        problems = len(report.dangling) + len(report.duplicates) + len(report.stale) + len(report.unlisted)
        click.echo(
            f"sagemem: MEMORY.md: {problems} problem(s); `sagemem index --rebuild` fixes them", err=True
        )
        sys.exit(1)


@cli.group(invoke_without_command=True)
@json_option
@click.pass_context
def conflicts(click_ctx: click.Context, as_json: bool) -> None:
    """Refused writes waiting for a person: list (default), show, resolve."""
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(conflicts_list, as_json=as_json)


@conflicts.command("list")
@click.option("--resolved", is_flag=True, help="List resolved conflicts instead.")
@json_option
@pass_ctx
def conflicts_list(ctx: _Context, resolved: bool = False, as_json: bool = False) -> None:
    """List conflicts."""
    found = ctx.store.conflicts(resolved=resolved)
    if as_json:
        return _print_json([_conflict_summary(c) for c in found])
    for c in found:
        done = f"  kept {c.resolution}" if c.resolution else ""
        click.echo(f"{c.id}  {c.file}  {c.created}  {c.writer}{done}  {c.reason}".rstrip())


@conflicts.command("show")
@click.argument("conflict_id")
@json_option
@pass_ctx
def conflicts_show(ctx: _Context, conflict_id: str, as_json: bool) -> None:
    """Show a conflict: what was on disk, and a diff to what was proposed."""
    c = ctx.store.conflict(conflict_id)
    if as_json:
        return _print_json(c.to_dict())
    for key, value in _conflict_summary(c).items():
        click.echo(f"{key + ':':<18}{value if value is not None else '-'}")
    disk = split_lines((c.disk or b"").decode("utf-8", "replace"))
    proposed = split_lines(c.proposed.decode("utf-8", "replace"))
    click.echo("")
    click.echo(
        "".join(difflib.unified_diff(disk, proposed, f"{c.file} (on disk)", f"{c.file} (proposed)")), nl=False
    )


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
    c = ctx.store.resolve_conflict(conflict_id, keep, writer="sagemem cli")
    if as_json:
        return _print_json(_conflict_summary(c))
    click.echo(f"{c.id}: kept {keep} for {c.file}")


def _count_use(ctx: _Context, kind: str, files: list[str]) -> None:
    """Count a use; a ledger that cannot be written costs a warning, never the command."""
    try:
        ctx.store.record_use(kind, files)
    except (SagememError, OSError) as exc:
        click.echo(f"sagemem: warning: access ledger not updated: {_one_line(str(exc))}", err=True)


def _uses(record: Any) -> str:
    def when(use: Any) -> str:
        if use.last is None:
            return "never"
        return f"{use.count}x, last {dt.datetime.fromtimestamp(use.last).strftime('%Y-%m-%d')}"

    return f"injected {when(record.injected)}; read {when(record.read)}; cited {when(record.cited)}"


def _conflict_summary(c: Any) -> dict[str, Any]:
    data = c.to_dict()
    return {
        k: data[k]
        for k in (
            "id",
            "file",
            "created",
            "writer",
            "reason",
            "expected_version",
            "disk_version",
            "proposed_version",
            "resolution",
            "resolved_at",
        )
    }


def _print_written(memory: Any, as_json: bool) -> None:
    if as_json:
        return _print_json({"file": memory.file, "version": memory.version})
    click.echo(f"{memory.file} {memory.version}")


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _text(text: str | None, path: str | None) -> str:
    if text is not None and path is not None:
        raise click.UsageError("give --body or --body-file, not both")
    if text is not None:
        return text
    if path is not None:
        return _read_text(path)
    return "" if sys.stdin.isatty() else _stdin()


def _read_text(path: str) -> str:
    if path == "-":
        return _stdin()
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SagememError(f"{path}: is not valid UTF-8 (byte {exc.start})") from None


def _stdin() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SagememError(f"standard input is not valid UTF-8 (byte {exc.start})") from None


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def _width(text: str) -> int:
    """Columns `text` takes in a terminal: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _line_range(spec: str) -> tuple[int, int]:
    try:
        first_text, _, last_text = spec.partition("-")
        first, last = int(first_text), int(last_text or first_text)
    except ValueError:
        raise click.BadParameter(f"{spec!r} is not a range like 5-12", param_hint="--lines") from None
    if first < 1 or last < first:
        raise click.BadParameter(f"{spec!r}: need 1 <= A <= B", param_hint="--lines")
    return first, last


def main() -> None:
    cli(prog_name="sagemem")
