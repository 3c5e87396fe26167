"""Commands that find and inject memories: search, inject, eval, bench."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .base import _Context, _print_json, cli, json_option, pass_ctx, say


@cli.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 30), help="Snippets at most (default: the `limit` setting).")
@json_option
@pass_ctx
def search(ctx: _Context, query: str, limit: int | None, as_json: bool) -> None:
    """Ranked snippets for QUERY: no session, nothing recorded.

    Asked for on purpose, so weak matches are listed too; `*` marks the ones the hook would
    inject unasked (`strong` in --json), and the last line says why it would or would not
    (`why` in --json).

    \b
    Example:
        sagemem search "how do we deploy to production" --json
    """
    from ..search.inject import read_snippet

    memories = ctx.memory_set
    result = memories.search(query, limit=limit, pull=True)
    why = result.verdict.why if result.verdict else ""  # the injection's decision, in one line
    rows = []
    for hit in result.hits:
        snippet = read_snippet(memories.snippet_dir(hit), hit.entry, hit.start, hit.end)
        rows.append((hit, snippet.text if snippet else ""))
    if as_json:
        return _print_json(
            [
                {
                    "file": h.file,
                    "scope": h.scope or memories.first.scope,
                    "lines": [h.start, h.end],
                    "score": round(h.score, 4),
                    "stage": h.stage,
                    "strong": h.strong,
                    "description": h.description,
                    "version": h.version,
                    "snippet": text,
                    "why": why,
                }
                for h, text in rows
            ]
        )
    for hit, text in rows:
        mark = "*" if hit.strong else " "
        say(f"{mark} {hit.file}:{hit.start}-{hit.end}  {hit.score:.2f}  {hit.description}")
        for line in text.splitlines()[:3]:
            say(f"    {line}")
    if rows:
        say(f"({why})")


def _session(value: str | None) -> str | None:
    """An empty id is refused, not taken as a session named "": it is what an unset
    `$SESSION_ID` gives, and every call after the first would then print nothing."""
    if value is not None and not value.strip():
        raise click.BadParameter(
            "is empty (an unset variable, such as $SESSION_ID?): give a session id, or leave --session out"
        )
    return value


@cli.command()
@click.option("--query", "-q", required=True, help="The user's message.")
@click.option(
    "--session",
    callback=lambda _ctx, _param, value: _session(value),
    help="Session id: budget, no repeats, baseline at the start (else stateless).",
)
@click.option("--reset", is_flag=True, help="Start the session afresh (after a context compaction or clear).")
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: what goes into the prompt; json: that text with its snippets, baseline and budget.",
)
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
    from ..search.inject import inject_set
    from ..store.config import load_settings
    from ..store.errors import StoreNotFound

    scopes = [s for s in ctx.scopes if s.memory_dir.is_dir()]
    if not scopes:
        first = ctx.scopes[0].memory_dir
        raise StoreNotFound(f"{first}: memory directory does not exist (run `sagemem init`)")
    settings = load_settings(scopes[0].state_dir)
    injection = inject_set(scopes, query, settings, session=session, reset=reset)
    if settings.debug:
        click.echo(f"sagemem: debug {json.dumps(injection.diagnostics, ensure_ascii=False)}", err=True)
    if output == "json":
        return _print_json(injection.to_dict())
    click.echo(injection.text, nl=False)


@cli.command("eval")
@click.argument("set_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--scopes",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="Deal the memories into this many directories, searched as one memory set.",
)
@json_option
@pass_ctx
def eval_(ctx: _Context, set_dir: Path, scopes: int, as_json: bool) -> None:
    """Measure retrieval on an evaluation set (SET_DIR/memory and SET_DIR/queries.jsonl).

    \b
    Example:
        sagemem eval fixtures/eval
    """
    from ..search.evaluate import evaluate
    from ..store.config import load_settings
    from .progress import Bar

    settings = load_settings(Path(ctx.state_dir) if ctx.state_dir else set_dir / "memory" / ".sagemem")
    report = evaluate(set_dir, settings, Bar.for_terminal("evaluating"), scopes=scopes)
    summary, breakdown = report.summary(), report.breakdown()
    if as_json:
        return _print_json({"summary": summary, "breakdown": breakdown})
    say(f"{'':18}{'queries':>8}{'R@5':>8}{'evid@5':>8}{'FalseInj':>10}{'bytes':>8}")
    for name, row in [("all", summary), *breakdown.items()]:
        say(
            f"{name:18}{row['queries']:>8}{row['recall_at_5']:>8.3f}{row['evidence_at_5']:>8.3f}"
            f"{row['false_injection']:>10.1%}{row['mean_bytes']:>8.0f}"
        )


@cli.command()
@click.option(
    "--memories",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Memories to generate.",
)
@click.option(
    "--lang",
    type=click.Choice(["en", "zh", "mixed"]),
    default="mixed",
    show_default=True,
    help="The corpus's language: English, Chinese, or mixed (every other memory Chinese).",
)
@click.option("--repeat", type=click.IntRange(3, 200), default=15, show_default=True, help="Runs per figure.")
@click.option(
    "--scopes",
    type=click.IntRange(1, 2),
    default=1,
    show_default=True,
    help="2: split the memories between a project's memory and the user's.",
)
@json_option
def bench(memories: int, lang: str, repeat: int, scopes: int, as_json: bool) -> None:
    """Time the hot path on a generated corpus (in a temp dir), against a bare interpreter.

    \b
    Example:
        sagemem bench --memories 1000 --lang zh
    """
    from ..search.bench import format_report, run
    from .progress import Bar

    report = run(memories, lang, repeat, Bar.for_terminal("bench"), scopes=scopes)
    click.echo(json.dumps(report, indent=2) if as_json else format_report(report))
