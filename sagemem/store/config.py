"""Where the memory directories and their state directories are, and what every variable of
sagemem's own environment means (the home folder, the directories, the settings, the
dream's model). Two read their variables where they are used, and say so: a harness's
record (`harnesses.py`: the variable that moves its folder), and the relay that hands a
hook to the resident process (`SAGEMEM_DAEMON`: it imports nothing else).

A memory set is an ordered list of scopes, each a whole memory directory with its own index,
state, guard and locks (`locate_scopes`): the project's memory (the nearest `.sagemem/memory`
above the current directory), the user's (`~/.sagemem/memory`, or sage-mem's), and Claude
Code's auto-memory folder for this project when it exists (`native.py`; sagemem keeps its
state for it under `~/.sagemem/adopted/`, never in Claude's folder). An explicit directory
(`--dir`, `SAGEMEM_DIR`, `SAGE_MEM_DIR`) is a set of one. The `scopes` setting names the
scopes to use. The first scope's state holds the session ledger and the settings.

One directory (`locate`), as the single-directory commands use it:

Memory directory, first match wins: an explicit path (`--dir`), `SAGEMEM_DIR`, `SAGE_MEM_DIR`
(for people moving from sage-mem), the nearest `.sagemem/memory` walking up from the
current directory (project memory, found the way git finds `.git`), else
`~/.sagemem/memory` (user memory). State directory: an explicit path (`--state-dir`),
`SAGEMEM_STATE_DIR`, else `<memory dir>/.sagemem`.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from . import shape
from .digests import sha256_hex
from .errors import SagememError
from .records import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

PROJECT_DIR = Path(".sagemem") / "memory"
STATE_DIR_NAME = ".sagemem"
MAX_SETTINGS_BYTES = 64 * 1024


SCOPE_NAMES = ("project", "user", "claude")
ADOPTED_DIR = Path(".sagemem") / "adopted"  # under the home folder: state for harnesses' folders


class Scope(Record):
    """One memory directory of a set: its name (`project`, `user`, `claude`, or `dir` for a
    directory chosen by hand), where its memories and its state are, why it is in the set,
    and where the locks that guard writes to its files live."""

    name: str
    memory_dir: Path
    state_dir: Path
    rule: str
    lock_dir: Path
    native: bool = False  # a harness's own folder: sagemem writes nothing there but memories

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "memory_dir": str(self.memory_dir),
            "state_dir": str(self.state_dir),
            "rule": self.rule,
            "native": self.native,
        }


class Location(Record):
    """A resolved memory directory, its state directory, and the rules that chose them."""

    memory_dir: Path
    state_dir: Path
    rule: str
    state_rule: str

    def to_dict(self) -> dict[str, str]:
        return {
            "memory_dir": str(self.memory_dir),
            "state_dir": str(self.state_dir),
            "rule": self.rule,
            "state_rule": self.state_rule,
        }


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's home folder: `HOME` when set (a test, a sandbox, a harness that moves it),
    else the system's."""
    env = os.environ if env is None else env
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


class DreamEnvironment(Record):
    """What the environment says of the dream's model: an endpoint (`SAGEMEM_DREAM_BASE_URL`,
    else `OPENAI_BASE_URL`), a model (`SAGEMEM_DREAM_MODEL`), and the keys that may go with
    an endpoint (`SAGEMEM_DREAM_API_KEY`, else the provider's own: DeepSeek's for its hosts,
    OpenAI's for any other). "" for what is not set."""

    base_url: str
    model: str
    key: str
    deepseek_key: str
    openai_key: str


def dream_environment(env: Mapping[str, str] | None = None) -> DreamEnvironment:
    env = os.environ if env is None else env

    def text(*names: str) -> str:
        return next((v.strip() for n in names if (v := env.get(n)) and v.strip()), "")

    return DreamEnvironment(
        text("SAGEMEM_DREAM_BASE_URL", "OPENAI_BASE_URL"),
        text("SAGEMEM_DREAM_MODEL"),
        env.get("SAGEMEM_DREAM_API_KEY") or "",
        env.get("DEEPSEEK_API_KEY") or "",
        env.get("OPENAI_API_KEY") or "",
    )


def user_memory_dir(env: Mapping[str, str] | None = None) -> Path:
    return home_dir(env) / PROJECT_DIR


def temp_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """A folder of this user's own under the system temp dir, the last place to write a cache
    or a log (a sandbox, dsh's for one, may allow nothing else); None if one that is not
    private is already there."""
    if not hasattr(os, "getuid"):
        return None  # no owner to check (Windows): no shared-folder fallback
    env = os.environ if env is None else env
    folder = Path(env.get("TMPDIR") or "/tmp") / f"sagemem-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    return folder if private else None


def fallback_state_dir(state_dir: Path) -> Path | None:
    """Where a state dir's session ledgers go when it cannot be written: its own folder in
    `temp_dir()`."""
    temp = temp_dir()
    if temp is None:
        return None
    return temp / f"state-{sha256_hex(str(state_dir).encode('utf-8'))[:16]}"


def state_places(state_dir: Path) -> Iterator[Path]:
    """Where machine-local records of `state_dir` may go: the state dir, then, when it cannot
    be written (a sandbox, a read-only mount, a refused link), its fallback in the temp dir."""
    yield state_dir
    fallback = fallback_state_dir(state_dir)  # made only once the state dir has failed
    if fallback is not None:
        yield fallback


def in_first_place(state_dir: Path, work: Callable[[Path], T]) -> tuple[T, Exception | None]:
    """`work` done in the first of `state_places(state_dir)` where it succeeds: what it gave,
    and the first failure met before (None when the state dir itself served). The first
    failure is raised when no place served."""
    failure: Exception | None = None
    for place in state_places(state_dir):
        try:
            return work(place), failure
        except (OSError, SagememError) as exc:
            failure = failure or exc
    raise failure or SagememError(f"{state_dir}: no place to keep this machine's records")


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where caches go when the state dir cannot be written: `$XDG_CACHE_HOME/sagemem`."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "sagemem"


def lexicon_folders(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    """Where the word-frequency lexicon may be (`lexicon.py`), in order: the folder
    `SAGEMEM_LEXICON` names (`off` for none: every word then weighs the same), else the
    user's cache dir, then the private temp folder (a sandbox may allow nothing else), made
    only when the caller gets that far."""
    env = os.environ if env is None else env
    chosen = env.get("SAGEMEM_LEXICON", "").strip()
    if chosen:  # set to nothing (`SAGEMEM_LEXICON=`), it is unset: never the current folder
        if chosen.lower() not in _OFF:
            yield Path(chosen)
        return
    yield user_cache_dir(env)
    temp = temp_dir(env)
    if temp is not None:
        yield temp


def model_folder(env: Mapping[str, str] | None = None) -> tuple[bool, Path | None]:
    """Whether related words are looked up (`related.py`), and the model folder
    `SAGEMEM_MODEL` names if it names one (`off`: none, not even the `semantic` extra's).
    From the environment only: a model is a large file of this machine's, not a project's."""
    env = os.environ if env is None else env
    chosen = env.get("SAGEMEM_MODEL", "").strip()
    if not chosen:
        return True, None
    if chosen.lower() in _OFF:
        return False, None
    return True, Path(chosen).expanduser()


def locate(
    memory_dir: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Location:
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    found, rule = _memory_dir(memory_dir, env, cwd)
    if state_dir is not None:
        state, state_rule = _absolute(state_dir, cwd), "--state-dir"
    elif env.get("SAGEMEM_STATE_DIR"):
        state, state_rule = _absolute(env["SAGEMEM_STATE_DIR"], cwd), "SAGEMEM_STATE_DIR"
    else:
        state, state_rule = found / STATE_DIR_NAME, "inside the memory dir"
    return Location(found, state, rule, state_rule)


def locate_scopes(
    memory_dir: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> list[Scope]:
    """The scopes of the memory set for `cwd`, in order (see the module docstring). The set
    is never empty: with no directory at all it holds the one `locate` names, for messages
    such as `run sagemem init`."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    first = locate(memory_dir, state_dir, env=env, cwd=cwd)
    explicit = memory_dir is not None or any(env.get(n) for n in ("SAGEMEM_DIR", "SAGE_MEM_DIR"))
    if explicit:
        return [_scope("dir", first.memory_dir, first.state_dir, first.rule)]
    found: list[Scope] = []
    if first.rule.startswith("project memory"):
        found.append(_scope("project", first.memory_dir, first.state_dir, first.rule))
    user, user_rule = _user_dir(env)
    if user.is_dir() and not any(_same(user, s.memory_dir) for s in found):
        state = first.state_dir if not found else user / STATE_DIR_NAME
        found.append(_scope("user", user, state, user_rule))
    claude = _claude_dir(cwd, env)
    if claude is not None and not any(_same(claude, s.memory_dir) for s in found):
        state = first.state_dir if not found else adopted_state_dir(claude, env)
        rule = "Claude Code's auto memory for this project (read as a scope; its state kept apart)"
        found.append(Scope("claude", claude, state, rule, state / "locks", native=True))
    if not found:
        return [_scope("user" if first.rule.startswith("user") else "dir", *first[:3])]
    wanted = load_settings(found[0].state_dir, env).scopes
    kept = [s for s in found if s.name in wanted] or found[:1]
    if kept[0] is not found[0] and (state_dir is not None or env.get("SAGEMEM_STATE_DIR")):
        kept[0] = kept[0]._replace(state_dir=found[0].state_dir)  # a chosen state dir is the first's
    return kept


def adopted_state_dir(folder: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where sagemem keeps its state for a harness's own memory folder: under the home
    folder's `.sagemem/adopted/`, never in the harness's folder. When `adopted` is a link (or
    not a folder), that is what is returned: as a state dir it is refused like any other link
    (nothing is read or written through it, and `check` names it), so no state of this
    folder's ever lands wherever the link points."""
    adopted = home_dir(env) / ADOPTED_DIR
    try:
        if not stat.S_ISDIR(os.lstat(adopted).st_mode):
            return adopted
    except OSError:
        pass  # not made yet: it is made as a folder, by the first write
    key = sha256_hex(str(folder).encode("utf-8", "surrogatepass"))[:16]
    return adopted / f"claude-{key}"


def user_scope(env: Mapping[str, str] | None = None) -> Scope:
    """The user scope as it is or would be: where a person's own memories go, whether or
    not it has been made (the first user memory saved makes it)."""
    user, rule = _user_dir(os.environ if env is None else env)
    return _scope("user", user, user / STATE_DIR_NAME, rule)


def _scope(name: str, memory_dir: Path, state_dir: Path, rule: str) -> Scope:
    return Scope(name, memory_dir, state_dir, rule, locks_of(memory_dir))


def locks_of(memory_dir: Path) -> Path:
    """Where the locks that guard writes to a memory directory's files live: beside its
    memories, where every process that writes them finds them whatever its state dir. A
    harness's own folder, where sagemem writes nothing but memories, keeps them in its state
    dir instead (`Scope.lock_dir`, `native`)."""
    return memory_dir / STATE_DIR_NAME / "locks"


def _user_dir(env: Mapping[str, str]) -> tuple[Path, str]:
    user = user_memory_dir(env)
    sage_mem = user.parent.parent / ".sage-mem" / "memory"
    if not user.is_dir() and sage_mem.is_dir():
        return sage_mem, "sage-mem's memory (~/.sage-mem/memory)"
    return user, "user memory (~/.sagemem/memory)"


def _claude_dir(cwd: Path, env: Mapping[str, str]) -> Path | None:
    """Claude Code's auto-memory folder for `cwd`, when it exists, is a real folder, and
    Claude Code's auto memory is on here: turned off (after `install claude-code --memory
    sagemem` imported it, say), Claude no longer uses that folder, and neither does sagemem."""
    from .native import claude_auto_memory, claude_memory_dir

    home = home_dir(env)
    folder = claude_memory_dir(cwd, home, env)
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not claude_auto_memory(cwd, home, env)[0]:
        return None
    return folder


def _same(a: Path, b: Path) -> bool:
    try:
        return a == b or os.path.samefile(a, b)
    except OSError:
        return False


def _memory_dir(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path
) -> tuple[Path, str]:
    if explicit is not None:
        return _absolute(explicit, cwd), "--dir"
    for name in ("SAGEMEM_DIR", "SAGE_MEM_DIR"):
        if env.get(name):
            return _absolute(env[name], cwd), name
    user = user_memory_dir(env)
    skipped = ""
    for folder in (cwd, *cwd.parents):
        candidate = folder / PROJECT_DIR
        if candidate.is_dir() and candidate != user:
            # A project's memory comes with its repository: a link there would have sagemem
            # read and keep state in some other folder of this machine. Chosen on purpose, a
            # linked folder is used through --dir or SAGEMEM_DIR.
            if candidate.parent.is_symlink() or candidate.is_symlink():
                skipped = skipped or f"; {candidate} was skipped: it is reached through a symbolic link"
                continue
            return candidate, f"project memory ({PROJECT_DIR} found above the current directory)"
    # A sage-mem user's directory works as it is, until they make a sagemem one.
    sage_mem = user.parent.parent / ".sage-mem" / "memory"
    if not user.is_dir() and sage_mem.is_dir():
        return sage_mem, "sage-mem's memory (~/.sage-mem/memory)" + skipped
    return user, "user memory (~/.sagemem/memory)" + skipped


def _absolute(path: str | os.PathLike[str], cwd: Path) -> Path:
    expanded = Path(os.path.expanduser(os.fspath(path)))
    return expanded if expanded.is_absolute() else cwd / expanded


class Settings(Record):
    """Retrieval and injection settings (docs/retrieval.md explains each one).

    Read on every call, so a change takes effect on the next prompt: an environment variable
    (`SAGEMEM_BUDGET`, ...) wins over `<state>/settings.json`, which wins over the default. A
    value that is not a number, or out of range, is ignored.
    """

    budget: int = 60 * 1024  # bytes a session may receive, all injections together
    gate: float = 0.35  # stage 1: share of the query's idf mass the description fields must hold
    body_gate: float = 0.5  # paragraph search: the same, for one paragraph
    candidates: int = 10  # stage 1 admits at most this many memories
    limit: int = 5  # snippets per injection at most
    cut: float = 0.5  # snippets scoring below this share of the best are held back
    min_query_chars: int = 4  # the paragraph search needs a query at least this long
    lang: str = ""  # "en" or "zh"; empty: follow the query's script
    task: str = ""  # the task whose checkpoint to point at (SAGEMEM_TASK_ID); else the session
    archive_project_days: int = 90  # idle days before a project memory is an archive candidate
    archive_reference_days: int = 180
    archive_user_days: int = 365
    snapshot_keep: int = 10  # snapshots kept besides the last 3 taken before rollbacks
    scopes: tuple[str, ...] = SCOPE_NAMES  # the scopes of the memory set to use
    rules: bool = True  # "How to save a memory" at a session's start, where the harness has none
    debug: bool = False  # one diagnostic line per call on stderr
    dream_base_url: str = ""  # the model endpoint of `sagemem dream` (docs/maintenance.md)
    dream_model: str = ""
    dream_max_rounds: int = 24  # model requests a dream run may make
    dream_max_tokens: int = 600_000  # tokens a dream run may spend, all requests together
    dream_auto: str = ""  # "report" or "apply": SessionStart starts a run when one is due
    dream_min_hours: int = 24  # ... at least this long after the last run
    dream_min_sessions: int = 5  # ... and after this many sessions since
    dream_sessions: bool = False  # automatic runs may search past transcripts (SAGEMEM_DREAM_SESSIONS)

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


_OFF = ("", "0", "false", "no", "off")
# name -> (environment variable, lowest, highest)
_RANGES: dict[str, tuple[str, float, float]] = {
    "budget": ("SAGEMEM_BUDGET", 4096, 512 * 1024),
    "gate": ("SAGEMEM_GATE", 0.0, 1.0),
    "body_gate": ("SAGEMEM_BODY_GATE", 0.0, 1.0),
    "candidates": ("SAGEMEM_CANDIDATES", 1, 50),
    "limit": ("SAGEMEM_LIMIT", 1, 30),
    "cut": ("SAGEMEM_CUT", 0.0, 1.0),
    "min_query_chars": ("SAGEMEM_MIN_QUERY_CHARS", 1, 100),
    "archive_project_days": ("SAGEMEM_ARCHIVE_PROJECT_DAYS", 1, 3650),
    "archive_reference_days": ("SAGEMEM_ARCHIVE_REFERENCE_DAYS", 1, 3650),
    "archive_user_days": ("SAGEMEM_ARCHIVE_USER_DAYS", 1, 3650),
    "snapshot_keep": ("SAGEMEM_SNAPSHOT_KEEP", 1, 1000),
    "dream_max_rounds": ("SAGEMEM_DREAM_MAX_ROUNDS", 1, 200),
    "dream_max_tokens": ("SAGEMEM_DREAM_MAX_TOKENS", 1000, 50_000_000),
    "dream_min_hours": ("SAGEMEM_DREAM_MIN_HOURS", 1, 720),
    "dream_min_sessions": ("SAGEMEM_DREAM_MIN_SESSIONS", 1, 200),
}


_SPENDING = {
    "dream_max_rounds": min,
    "dream_max_tokens": min,
    "dream_min_hours": max,
    "dream_min_sessions": max,
}


def load_settings(state_dir: Path, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    stored = _stored(state_dir)[0]
    values: dict[str, object] = {}
    defaults = Settings()
    for name, (variable, low, high) in _RANGES.items():
        kind = type(getattr(defaults, name))
        for raw, source in ((env.get(variable), "environment"), (stored.get(name), "settings")):
            value = _number(raw, kind)
            if value is not None and low <= value <= high:
                # A settings file (a clone may bring one) can make dream runs rarer and
                # smaller than the defaults, never more frequent or costlier.
                if source == "settings" and name in _SPENDING:
                    value = _SPENDING[name](value, getattr(defaults, name))
                values[name] = value
                break
    lang = env.get("SAGEMEM_LANG") or stored.get("lang")
    if isinstance(lang, str) and lang.lower()[:2] in ("en", "zh"):
        values["lang"] = lang.lower()[:2]
    scopes = env.get("SAGEMEM_SCOPES") or stored.get("scopes")
    names = scopes.split(",") if isinstance(scopes, str) else scopes if isinstance(scopes, list) else None
    if names is not None:
        values["scopes"] = tuple(n.strip() for n in names if isinstance(n, str) and n.strip() in SCOPE_NAMES)
    rules = env.get("SAGEMEM_RULES", stored.get("rules"))
    if isinstance(rules, bool) or isinstance(rules, str):
        values["rules"] = rules if isinstance(rules, bool) else rules.strip().lower() not in _OFF
    for name in ("dream_base_url", "dream_model"):  # the environment's own are read where used
        text = stored.get(name)
        if isinstance(text, str) and text.strip() and len(text) < 2048:
            values[name] = text.strip()
    # From the environment only: a settings file can come with a clone, and must not make
    # every session start model runs on the person's key.
    auto = env.get("SAGEMEM_DREAM_AUTO", "").strip().lower()
    if auto in ("report", "apply"):
        values["dream_auto"] = auto
    values["dream_sessions"] = env.get("SAGEMEM_DREAM_SESSIONS", "").strip().lower() not in _OFF
    values["debug"] = env.get("SAGEMEM_DEBUG", "") not in ("", "0", "false", "no")
    values["task"] = env.get("SAGEMEM_TASK_ID", "")
    return Settings(**values)  # type: ignore[arg-type]


def settings_problems(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for a settings file that cannot be read, or that holds a value
    `load_settings` ignores (of the wrong type, or out of its range)."""
    path = state_dir / "settings.json"
    stored, why = _stored(state_dir)
    if why:
        return [(path, f"{why}; no setting is read from it, the defaults are used")]
    wrong = [f"{name} {what}" for name, raw in stored.items() if (what := _ignored(name, raw))]
    if not wrong:
        return []
    return [(path, f"{'; '.join(wrong)}: ignored, the default (or the environment's value) is used")]


def _stored(state_dir: Path) -> tuple[dict[str, object], str]:
    """The settings file's values, and what is wrong with it when it cannot be read (a link,
    a FIFO, too large, not a JSON object): then it holds none."""
    try:
        found = shape.load(state_dir / "settings.json", MAX_SETTINGS_BYTES, shape.obj({}), under=state_dir)
    except shape.Damaged as exc:
        return {}, exc.why
    return found or {}, ""


def _ignored(name: str, raw: object) -> str:
    """Why `load_settings` ignores the stored value `raw` of setting `name` ("" when it
    does not; unknown names and those read from the environment only are not judged)."""
    if name in _RANGES:
        _, low, high = _RANGES[name]
        value = _number(raw, type(getattr(Settings(), name)))
        fits = value is not None and low <= value <= high
        shown = [str(int(n)) if n == int(n) else str(n) for n in (low, high)]
        return "" if fits else f"is not a number from {shown[0]} to {shown[1]}"
    if name == "lang":
        return "" if isinstance(raw, str) and raw.lower()[:2] in ("en", "zh") else "is not en or zh"
    if name == "scopes":
        names = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else None
        if names is None or not all(isinstance(n, str) and n.strip() in SCOPE_NAMES for n in names):
            return f"is not a list of scope names ({', '.join(SCOPE_NAMES)})"
        return ""
    if name == "rules":
        return "" if isinstance(raw, (bool, str)) else "is not true or false"
    if name in ("dream_base_url", "dream_model"):
        fine = isinstance(raw, str) and raw.strip() and len(raw) < 2048
        return "" if fine else "is not text (of at most 2047 characters)"
    return ""


def _number(raw: object, kind: type) -> float | int | None:
    if raw is None or isinstance(raw, bool) or raw == "":
        return None
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value):
        return None
    return int(value) if kind is int and value == int(value) else (value if kind is float else None)
