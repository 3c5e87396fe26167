"""The shape of a record sagemem keeps in a state directory, checked before it is used.

A state directory may come with a clone, so each JSON file in it is untrusted input: the
right keys with the wrong types (a count that is text, a list where a table belongs) must be
refused, never stumbled over later. A reader states what its record must look like with the
checks here, and `load` reads and checks a file in one step: the record as it is, or
`Damaged`, naming the file and the first field that is wrong. A check is a plain function
from a value to what is wrong with it ("" when nothing); no library, because the prompt hook
reads its ledgers through these.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from .errors import SagememError, UnsafePath
from .files import read_state
from .records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    Check = Callable[[Any], str]

MAX_COUNT = 2**53  # a count or a size: JSON readers elsewhere lose precision above this
MAX_TIME = 32_503_680_000  # seconds since 1970 at the start of the year 3000: any local time can show it
DAMAGED = ".damaged"


class Damaged(SagememError):
    """A record in the state directory that cannot be used as it stands: `path`, and `why`."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = Path(path)
        self.why = why
        super().__init__(f"{path}: {why}")


def load(path: Path, limit: int, check: Check, *, under: Path | None = None) -> Any:
    """The JSON record at `path` when it passes `check`; None when there is no file. A link, a
    special file, one over `limit`, bytes that are not UTF-8 or not JSON, `null` and a value
    of the wrong shape are `Damaged`. Reads only: a damaged file is left as it is."""
    try:
        raw = read_state(path, limit, under=under)
    except UnsafePath as exc:
        raise Damaged(path, exc.rule if exc.path == str(path) else str(exc)) from None
    except OSError as exc:
        raise Damaged(path, f"cannot be read ({exc.strerror or exc})") from None
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Damaged(path, f"is not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        raise Damaged(path, f"is not JSON ({exc})") from None
    except RecursionError:
        raise Damaged(path, "is not JSON sagemem wrote (nested too deeply)") from None
    why = "is null, not a record" if value is None else problem(value, check)  # None is "no file"
    if why:
        raise Damaged(path, why)
    return value


def set_aside(path: Path) -> Path | None:
    """Move a damaged record out of the way, whole, before a writer replaces it: what sagemem
    could not read may still be a person's to look at. It goes to a name of its own,
    `<name>.damaged-<UTC time>`, claimed exclusively, so an older copy set aside is never
    replaced. A link is moved, never followed; a folder (which no write could replace) is
    moved too. Returns the new place (None when there is nothing at `path`); `OSError` when
    it cannot be moved. The caller holds the record's lock."""
    if not os.path.lexists(path):
        return None
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    for n in range(100):
        aside = path.with_name(f"{path.name}{DAMAGED}-{stamp}" + (f"-{n}" if n else ""))
        try:
            _move_to_new(path, aside)
            return aside
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free name to set it aside")


def clear_folder(path: Path) -> None:
    """Set aside a folder that stands where a record is to be written (a clone may carry one):
    no write could replace it, and a record that repairs itself must still be written. A file
    there needs nothing, the write replaces it; a failure here is the write's to report."""
    if os.path.isdir(path) and not os.path.islink(path):
        with contextlib.suppress(OSError):
            set_aside(path)


def make_way(path: Path) -> str:
    """`set_aside` for a writer that replaces the record either way (counting must go on):
    "" when it was moved, else why not, for a warning."""
    try:
        set_aside(path)
    except OSError as exc:
        return f"it could not be set aside ({exc.strerror or exc}), so it is replaced"
    return ""


def _move_to_new(path: Path, target: Path) -> None:
    """Rename `path` to `target`, which must not exist: a rename alone would replace a file
    there. A file gets a second name first (a hard link, which fails when the name is taken);
    a folder is renamed onto an empty folder made for it (`mkdir` fails when it is taken)."""
    if os.path.isdir(path) and not os.path.islink(path):
        os.mkdir(target)
        try:
            os.rename(path, target)
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(target)
            raise
        return
    try:
        os.link(path, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: check, then rename (the caller holds the lock)
        if os.path.lexists(target):
            raise FileExistsError(target) from None
        os.rename(path, target)
        return
    os.unlink(path)


def problem(value: Any, check: Check, where: str = "") -> str:
    """What is wrong with `value` by `check` ("" when nothing), the field named first, from
    `where` (the name of `value` itself, if it has one)."""
    found = check(value)
    return _named(where, found) if found else ""


# -- the checks ---------------------------------------------------------------------------


def anything(_value: Any) -> str:
    return ""


def text(value: Any) -> str:
    """Text that can be written back as UTF-8 (no lone surrogate)."""
    if not isinstance(value, str):
        return _not(value, "text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate, which is not UTF-8 text"
    return ""


def any_text(value: Any) -> str:
    """Text of any code points, for a record written as ASCII JSON (a lone surrogate that a
    model or a harness sent survives there)."""
    return "" if isinstance(value, str) else _not(value, "text")


def an_object(value: Any) -> str:
    """An object of any keys and values (whose entries the reader checks one by one)."""
    return "" if isinstance(value, dict) else _not(value, "an object")


def flag(value: Any) -> str:
    return "" if isinstance(value, bool) else _not(value, "true or false")


def count(value: Any) -> str:
    """A whole number from 0 (a count, a size in bytes)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return _not(value, "a whole number")
    return "" if 0 <= value <= MAX_COUNT else _range(value)


def moment(value: Any) -> str:
    """A time, in seconds since 1970."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _not(value, "a time in seconds")
    return "" if math.isfinite(value) and 0 <= value <= MAX_TIME else _range(value)


def matching(pattern: re.Pattern[str], what: str) -> Check:
    """Text the whole of which `pattern` matches (`what` names it in the message)."""

    def check(value: Any) -> str:
        if not isinstance(value, str):
            return _not(value, what)
        return "" if pattern.fullmatch(value) else f"is not {what}"

    return check


def one_of(*allowed: Any) -> Check:
    """One of `allowed`, of the same type too (`true` is not 1)."""

    def check(value: Any) -> str:
        if any(type(value) is type(a) and value == a for a in allowed):
            return ""
        return f"is not one of {', '.join(json.dumps(a) for a in allowed)}"

    return check


def passes(rule: Callable[[Any], object], what: str) -> Check:
    """Text that `rule` accepts (it raises `ValueError` otherwise, as the name rules do)."""

    def check(value: Any) -> str:
        if not isinstance(value, str):
            return _not(value, what)
        try:
            rule(value)
        except ValueError:
            return f"is not {what}"
        return ""

    return check


def nothing_or(inner: Check) -> Check:
    """`null`, or what `inner` accepts."""
    return lambda value: "" if value is None else inner(value)


def each(inner: Check) -> Check:
    """A list whose every item passes `inner`."""

    def check(value: Any) -> str:
        if not isinstance(value, list):
            return _not(value, "a list")
        for index, item in enumerate(value):
            found = inner(item)
            if found:
                return _at(f"[{index}]", found)
        return ""

    return check


def table(inner: Check, key: Check = text) -> Check:
    """An object whose every key passes `key` and every value `inner`."""

    def check(value: Any) -> str:
        if not isinstance(value, dict):
            return _not(value, "an object")
        for name, item in value.items():
            found = key(name)
            if found:
                return _at(_field(name), f"the key {found}")
            found = inner(item)
            if found:
                return _at(_field(name), found)
        return ""

    return check


def obj(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """An object with the `required` keys and perhaps the `optional` ones, each passing its
    check; other keys are left alone (a newer sagemem may have written them)."""

    every = tuple({**required, **(optional or {})}.items())  # once: a ledger checks thousands

    def check(value: Any) -> str:
        if not isinstance(value, dict):
            return _not(value, "an object")
        for name in required:
            if name not in value:
                return f"has no {name!r}"
        for name, inner in every:
            if name in value:
                found = inner(value[name])
                if found:
                    return _at(_field(name), found)
        return ""

    return check


def sift(
    value: dict[str, Any], inner: Check, *, key: Check = text, where: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """The entries of the object `value` whose key passes `key` and value `inner`, and what is
    wrong with each of the others, named from `where`: for a table in which one bad entry
    must not cost the rest."""
    kept: dict[str, Any] = {}
    wrong: list[str] = []
    for name, item in value.items():
        found = key(name)
        found = f"the key {found}" if found else inner(item)
        if found:
            wrong.append(_named(where, _at(_field(name), found)))
        else:
            kept[name] = item
    return kept, wrong


def _named(where: str, found: str) -> str:
    """A problem as it is shown: from `where`, without a leading dot."""
    return (_at(where, found) if where else found).removeprefix(".")


def _at(where: str, found: str) -> str:
    return where + found if found.startswith((".", "[")) else f"{where}: {found}"


def _field(name: str) -> str:
    return f".{name}" if re.fullmatch(r"[A-Za-z_][\w-]*", name) else f"[{json.dumps(name)[:80]}]"


def _not(value: Any, wanted: str) -> str:
    return f"is {_kind(value)}, not {wanted}"


def _range(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    return "is negative" if value < 0 else "is too large"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "an object"
