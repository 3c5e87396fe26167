"""The machinery every command shares: the `cli` group, error translation (`_Group.invoke`),
the lazily resolved context, common options and output helpers.

A `SagememError` becomes a one-line message on stderr and its class's exit code (1 error,
3 version conflict); click's usage errors exit 2.
"""

from __future__ import annotations

import datetime as dt
import functools
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

from .. import __version__
from ..store.errors import SagememError, SagememWarning
from ..store.text import printable


class _Failure(click.ClickException):
    def show(self, file: Any = None) -> None:
        click.echo(f"sagemem: {_one_line(self.format_message())}", err=True)


def _failure(message: str, exit_code: int) -> _Failure:
    """A failure that exits with `exit_code`: click reads the code from the exception's
    class, so each code has a class of its own (made once)."""
    kind = _FAILURES.get(exit_code)
    if kind is None:
        kind = _FAILURES[exit_code] = type(f"_Failure{exit_code}", (_Failure,), {"exit_code": exit_code})
    return kind(message)


_FAILURES: dict[int, type[_Failure]] = {1: _Failure}


def _refuse_undecodable(ctx: click.Context) -> None:
    """A usage error (exit 2) for an argument that is not UTF-8 text. The system hands over
    bytes that are not UTF-8 as lone surrogates, which no record, frontmatter or JSON reply can
    hold: refused here, once for every command, before anything is written. A path is
    exempt: the file system takes it as it came."""
    for param in ctx.command.params:
        if isinstance(param.type, click.Path):
            continue
        value = ctx.params.get(param.name or "")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise click.BadParameter(
                    f"is not UTF-8 text (character {exc.start + 1} is a byte the shell passed as it was); "
                    "give it in UTF-8",
                    ctx=ctx,
                    param=param,
                ) from None


class _Command(click.Command):
    def invoke(self, ctx: click.Context) -> Any:
        _refuse_undecodable(ctx)
        return super().invoke(ctx)


class _Group(click.Group):
    command_class = _Command
    group_class = type  # a group of commands is one of these too

    def invoke(self, ctx: click.Context) -> Any:
        _refuse_undecodable(ctx)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SagememWarning)
            try:
                return super().invoke(ctx)
            except SagememError as exc:
                raise _failure(str(exc), exc.exit_code) from exc
            except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps exit-time flushes quiet
                raise SystemExit(0) from None
            except OSError as exc:
                where = f"{exc.filename}: " if exc.filename else ""
                raise _failure(f"{where}{exc.strerror or exc}", 1) from exc
            finally:
                for warning in caught:
                    if issubclass(warning.category, SagememWarning):
                        click.echo(f"sagemem: warning: {_one_line(str(warning.message))}", err=True)
                    else:
                        warnings.showwarning(
                            warning.message, warning.category, warning.filename, warning.lineno
                        )


class _DefaultGroup(_Group):
    """A group that does something when named alone: runs its command `default`, given the
    group's own options (`snapshot --json` is `snapshot list --json`), or with no `default`,
    its own function (`dream`). Given a command, it runs that command alone."""

    def __init__(self, *args: Any, default: str | None = None, **kwargs: Any) -> None:
        kwargs["invoke_without_command"] = True
        super().__init__(*args, **kwargs)
        self.default = default
        self.alone = self.callback  # what it does named alone, when it has no `default`
        self.callback = self._alone

    def _alone(self, **params: Any) -> Any:
        ctx = click.get_current_context()
        if ctx.invoked_subcommand is not None:
            return None
        if self.default is not None:
            return ctx.invoke(self.commands[self.default], **params)
        return ctx.invoke(self.alone, **params) if self.alone is not None else None


class _Context:
    """What the global options chose; the memory set and its stores are resolved on first use.
    `store` is the set's first scope (or the one `--in` names): the commands that work on one
    directory work there."""

    def __init__(self, memory_dir: Path | None, state_dir: Path | None, only: str | None = None) -> None:
        self.memory_dir = memory_dir
        self.state_dir = state_dir
        self.only = only

    @cached_property
    def scopes(self) -> Any:
        """The scopes, found without loading the library's writing half (the hot path needs
        only these)."""
        from ..store.config import locate_scopes
        from ..store.errors import SagememError

        found = locate_scopes(self.memory_dir, self.state_dir)
        if self.only is None:
            return found
        kept = [s for s in found if s.name == self.only]
        if not kept:
            names = ", ".join(s.name for s in found)
            raise SagememError(f"{self.only!r}: no such scope here (the scopes: {names}; see `sagemem path`)")
        return kept

    @cached_property
    def location(self) -> Any:
        from ..store.config import Location

        first = self.scopes[0]
        return Location(first.memory_dir, first.state_dir, first.rule, "")

    @cached_property
    def memory_set(self) -> Any:
        from ..memory_set import MemorySet
        from .progress import Bar

        found = MemorySet.found(self.scopes) if self.only is None else MemorySet(self.scopes)
        for store in found.stores:
            store.progress = Bar.for_terminal("indexing memories")
        return found

    @cached_property
    def store(self) -> Any:
        return self.memory_set.first


def _version(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A version as `read` prints it, or its first 12 digits or more (as git takes a short hash)."""
    if value is not None and not re.fullmatch(r"[0-9a-f]{12,64}", value):
        raise click.BadParameter(
            f"{value!r} is not a version (64 hexadecimal digits as `read --json` prints, or the first 12 "
            "or more of them)"
        )
    return value


def count(n: int, one: str, many: str | None = None) -> str:
    """`1 memory`, `2 memories`."""
    return f"{n} {one if n == 1 else many or one + 's'}"


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


def parts_option(help: str) -> Any:
    """`--parts files|all`: which parts a rollback puts back (the default `files`). Its old
    spelling `--scope`, which elsewhere names a memory scope or a settings file, still works:
    hidden, with a one-line deprecation note on stderr."""

    def decorate(func: Any) -> Any:
        @functools.wraps(func)
        def command(*args: Any, parts: str, deprecated_scope: str | None, **kwargs: Any) -> Any:
            if deprecated_scope is not None:
                source = click.get_current_context().get_parameter_source("parts")
                if source is click.core.ParameterSource.COMMANDLINE and parts != deprecated_scope:
                    raise click.UsageError(
                        f"--parts {parts} and --scope {deprecated_scope} disagree; give --parts"
                    )
                parts = deprecated_scope
            return func(*args, parts=parts, **kwargs)

        command = click.option(
            "--scope",
            "deprecated_scope",
            type=click.Choice(["files", "all"]),
            hidden=True,
            callback=_scope_deprecated,
            help="Deprecated: --parts.",
        )(command)
        return click.option(
            "--parts", type=click.Choice(["files", "all"]), default="files", show_default=True, help=help
        )(command)

    return decorate


def _scope_deprecated(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        click.echo("sagemem: --scope is deprecated here; use --parts (which parts are rolled back)", err=True)
    return value


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
@click.option(
    "--in",
    "only",
    metavar="SCOPE",
    help="Work in one scope of the memory set (project, user, claude; see `sagemem path`).",
)
@click.pass_context
def cli(ctx: click.Context, memory_dir: Path | None, state_dir: Path | None, only: str | None) -> None:
    """File-based Markdown memory for AI agents."""
    ctx.obj = _Context(memory_dir, state_dir, only)


pass_ctx = click.make_pass_decorator(_Context)


def _count_use(store: Any, kind: str, files: list[str]) -> None:
    """Count a use; a ledger that cannot be written costs a warning, never the command."""
    try:
        store.record_use(kind, files)
    except (SagememError, OSError) as exc:
        say(f"sagemem: warning: access ledger not updated: {_one_line(str(exc))}", err=True)


def _uses(record: Any) -> str:
    def when(use: Any) -> str:
        if use.last is None:
            return "never"
        return f"{use.count}x, last {dt.datetime.fromtimestamp(use.last).strftime('%Y-%m-%d')}"

    return f"injected {when(record.injected)}; read {when(record.read)}; cited {when(record.cited)}"


def _conflict_summary(c: Any) -> dict[str, Any]:
    """A conflict without its two sides, and, while open, how a person closes it."""
    data = {**c.to_dict(), "to_close": None if c.resolution else c.ending()}
    return {
        k: data[k]
        for k in (
            "id",
            "file",
            "kind",
            "to_close",
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


def _print_written(memory: Any, as_json: bool, *, name: str | None = None, scope: str = "") -> None:
    """The file (named with its scope in a set of several) and its new version."""
    shown = name or memory.file
    if as_json:
        return _print_json({"file": shown, "version": memory.version, **({"scope": scope} if scope else {})})
    say(f"{shown} {memory.version}")


def _print_json(data: Any) -> None:
    """`data` as JSON on stdout: UTF-8, or ASCII escapes where it holds a lone surrogate (a
    path the file system gave, a record's text), which no UTF-8 stream can carry."""
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, ensure_ascii=True, indent=2, default=str)
    click.echo(text)


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
    try:
        with open(path, "rb") as handle:
            data = _capped(handle, path)
    except OSError as exc:
        raise SagememError(f"{path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SagememError(f"{path}: is not valid UTF-8 (byte {exc.start})") from None


def _stdin() -> str:
    data = _capped(sys.stdin.buffer, "standard input")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SagememError(f"standard input is not valid UTF-8 (byte {exc.start})") from None


def _capped(stream: Any, name: str) -> bytes:
    """At most a memory file's worth of `stream`: `/dev/zero` or gigabytes on a pipe are
    refused after one byte past the cap, never read into memory whole."""
    from ..store.files import MAX_FILE_BYTES

    data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SagememError(f"{name}: is larger than {MAX_FILE_BYTES // 1024} KiB, the limit of a memory file")
    return data


def say(line: str = "", *, err: bool = False) -> None:
    """Print one line of human output. File names, descriptions and lines quoted from files
    may hold terminal escape sequences or line breaks: they are shown as escapes, so a file
    cannot recolour the terminal, move its cursor or pass for another line."""
    click.echo(printable(line), err=err)


def _one_line(text: str) -> str:
    return printable(" ".join(text.split("\n")))


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
