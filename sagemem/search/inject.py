"""Injection: from a user's message to the text put into the agent's prompt (or nothing).

Without a session the call is stateless: retrieval, budget, rendering. With a session, the
session's ledger (`session.py`) adds what a conversation needs: baseline memories at the
start and after a reset, a byte budget for the whole session, no snippet twice (unless the
message asks to verify, correct or explain), nothing new for a message repeated back to
back, and a gap card when something relevant was found but not shown, or when a message
asks about shared history that no memory holds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ..store import ledger as access
from ..store import secrets
from ..store.command import command_line
from ..store.config import Scope, Settings, in_first_place, locks_of
from ..store.digests import sha256_hex
from ..store.errors import SagememError
from ..store.files import read_bytes, safe_folder
from ..store.log import log_once
from ..store.records import TYPE_CHECKING, Record
from ..store.text import split_lines
from . import corpus as corpus_module
from . import lexicon, render, retrieve
from .corpus import Corpus, Entry
from .retrieve import Hit
from .session import Ledger, open_ledger
from .tokenize import acknowledges, has_cjk

if TYPE_CHECKING:
    from typing import Any

MAX_BASELINE = 8
MAX_CARD_BYTES = 512
# Retrieval reads at most this much of a message: its start and its end (a question pasted
# around a long log). Tokenising 20 MB took longer than a harness waits for a hook.
MAX_QUERY_CHARS = 16_000

_INTENTS = {
    "verify": re.compile(
        r"\bright\s*\?|\bcorrect\s*\?|\bis (?:that|it|this) (?:true|so|still)\b|\bconfirm|\bverify|"
        r"\bdouble[- ]check|\bsure\s*\?|对吧|对吗|是吗|确认|核实|确定吗|没错吧|是不是真的",
        re.I,
    ),
    "correct": re.compile(
        r"(?:\bnot\b|n't)[^.?!]*\bany ?more\b|\bno longer\b|\binstead of\b|\bchanged? (?:it )?to\b|"
        r"\bswitch(?:ed)? to\b|\bwe now use\b|不用[^。？！]*了|不再|改成|改为|换成|其实是|更正|已经不",
        re.I,
    ),
    "why": re.compile(
        r"\bwhy\b|\breasons?\b|\bbased on what\b|\bevidence\b|为什么|为何|依据|原因|理由|出处", re.I
    ),
}
_HISTORY = re.compile(
    r"\blast time\b|\bdo you remember\b|\bremember when\b|\bpreviously\b|\bearlier\b|"
    r"\bwe (?:decided|agreed|discussed|said)\b|"
    r"\bwhat did (?:we|i)\b|之前|上次|以前|记得|先前|我们(?:定|说|讨论|商量)过",
    re.I,
)
# Blanks, not `\s`: `\s*` at a line start also crosses blank lines, quadratic in their number.
_DONE_ITEM = re.compile(r"^[ \t]*[-*] \[[xX]\][ \t]+(.+)$", re.M)
# Evidence that a checklist item was done: a command or path in backticks, a file name, a
# path from the root or home, or a test result.
_EVIDENCE = re.compile(
    r"`[^`]+`|\b[\w-]+\.(?:py|js|ts|tsx|go|rs|md|json|ya?ml|toml|sh|sql|java|kt|swift|c|h|cpp|rb|php)\b|"
    r"(?:^|\s)(?:~|\.{1,2})?/[\w.-]+|\b\d+ (?:passed|failed|tests?)\b|\b(?:passed|green)\b|✓|✔|通过",
    re.I,
)

CARD_TEXT = {
    "en": {
        "held": "Memory gap: {n} more related memor{ies} found but not shown ({why}). "
        "Best lead: {file} — {description}. To read it: `{cmd} read {file}`.",
        "held-secret": "Memory gap: {n} more related memor{ies} found but not shown ({why}). "
        "Best lead: {file} — {description}. It holds a likely secret, so do not read it whole: "
        "`{cmd} search` shows it redacted, and `{cmd} check` names the secret for the user to move out.",
        "budget": "session budget",
        "score": "lower score",
        "none": "Memory gap: no memory matches this message. Do not guess what was decided before: "
        "ask the user, or look with `{cmd} search` / `{cmd} list`.",
        "conflicted": "Memory notice: {files} left out of memory: unresolved git merge conflict "
        "markers. Resolve them (keep one side) and the memory is found again; `{cmd} check` lists them.",
        "archived-changed": "Memory notice: {files} changed after being archived (a merge carried an "
        "edit into archive/), so that change is in no live memory. Tell the user; `{cmd} check` says more.",
        "task": "Task checkpoint: {task} (rev {rev}) in {path}; read it before you continue.{undone}",
        "undone": " {n} item(s) marked done without evidence (a path, a command or a test result): {items}.",
    },
    "zh": {
        "held": "记忆缺口：另有 {n} 条相关记忆已找到但未显示（{why}）。"
        "最值得看的是 {file} — {description}。读取：`{cmd} read {file}`。",
        "held-secret": "记忆缺口：另有 {n} 条相关记忆已找到但未显示（{why}）。"
        "最值得看的是 {file} — {description}。它含有疑似密钥，不要整篇读取："
        "`{cmd} search` 会打码显示，`{cmd} check` 会指出密钥，请用户把它移出记忆。",
        "budget": "会话预算已满",
        "score": "得分较低",
        "none": "记忆缺口：没有记忆与这条消息相关。不要猜测之前的决定：请问用户，"
        "或用 `{cmd} search` / `{cmd} list` 查找。",
        "conflicted": "记忆提示：{files} 含未解决的 git 合并冲突标记，暂不注入。"
        "解决冲突（保留一方）后即可再次找到；`{cmd} check` 会列出它们。",
        "archived-changed": "记忆提示：{files} 在归档之后又被修改（合并把一处修改带进了 archive/），"
        "这处修改不在任何生效的记忆里。请告诉用户；`{cmd} check` 有详情。",
        "task": "任务检查点：{task}（版本 {rev}），位于 {path}；继续之前先读它。{undone}",
        "undone": "其中 {n} 项标为完成却没有证据（路径、命令或测试结果）：{items}。",
    },
}


class Injection(Record):
    """The text to inject ("" for nothing) and what went into it."""

    text: str
    snippets: tuple[render.Snippet, ...]
    baseline: tuple[str, ...]
    omitted: int
    card: str
    session_used: int
    budget: int
    diagnostics: dict[str, Any]  # for SAGEMEM_DEBUG; not part of the result
    # (memory dir, state dir, index file) of each scope whose index holds files only the
    # pattern pass has read: the hook has them read again with the full scan, once it answers.
    unscanned: tuple[tuple[Path, Path, Path], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "snippets": [
                {"file": s.file, "lines": [s.start, s.end], "description": s.description, "text": s.text}
                for s in self.snippets
            ],
            "baseline": list(self.baseline),
            "omitted": self.omitted,
            "card": self.card,
            "session_used": self.session_used,
            "budget": self.budget,
        }


def intents(message: str) -> set[str]:
    """Which of "verify", "correct", "why" and "history" a message expresses."""
    found = {name for name, pattern in _INTENTS.items() if pattern.search(message)}
    return found | ({"history"} if _HISTORY.search(message) else set())


def clip_query(query: str) -> str:
    """The part of a message retrieval reads: all of it, or its start and its end."""
    if len(query) <= MAX_QUERY_CHARS:
        return query
    half = MAX_QUERY_CHARS // 2
    return query[:half] + "\n…\n" + query[-half:]


def reserve_for(budget: int) -> int:
    """The part of the budget kept for gap cards: 5 %, at least 1 KiB, at most 4 KiB."""
    return min(4096, max(1024, budget * 5 // 100))


def inject(
    memory_dir: Path,
    state_dir: Path,
    query: str,
    settings: Settings,
    *,
    session: str | None = None,
    reset: bool = False,
    task: str | None = None,
    corpus: Corpus | None = None,
    max_bytes: int | None = None,
    care: Sequence[tuple[str, str]] = (),
    deadline: float | None = None,
) -> Injection:
    """What to inject for `query` from one memory directory (see `inject_set`)."""
    scope = Scope("", memory_dir, state_dir, "", locks_of(memory_dir))
    return inject_set(
        [scope],
        query,
        settings,
        session=session,
        reset=reset,
        task=task,
        corpora=None if corpus is None else [corpus],
        max_bytes=max_bytes,
        care=care,
        deadline=deadline,
    )


def inject_set(
    scopes: Sequence[Scope],
    query: str,
    settings: Settings,
    *,
    session: str | None = None,
    reset: bool = False,
    task: str | None = None,
    corpora: Sequence[Corpus] | None = None,
    max_bytes: int | None = None,
    care: Sequence[tuple[str, str]] = (),
    deadline: float | None = None,
    rules: Callable[[], Rules | None] | None = None,
) -> Injection:
    """What to inject for `query` from a memory set, ranked as one collection. The session's
    ledger is in the first scope's state; each scope counts its own uses. `max_bytes` caps
    this one injection (a harness's limit); `care` holds (check, file) findings to tell the
    session once, at its start (archived memories changed after archiving); past `deadline`
    (`time.monotonic()`), files not yet indexed are left for the next call and the answer
    comes from what is indexed; `rules`, what tells how a harness's model may save a memory
    (None: it needs no rules from sagemem), asked only while the session has not settled it,
    adds "How to save a memory" once a session, with its first hook."""
    asked = _Asked(session, reset, task, max_bytes, tuple(care), deadline, rules)
    query = clip_query(query)
    if corpora is None:
        return corpus_module.using_all(
            [(s.memory_dir, s.state_dir) for s in scopes],
            lambda own: _injected(scopes, own, query, settings, asked),
            deadline=deadline,
        )
    return _injected(scopes, corpora, query, settings, asked)


class _Asked(Record):
    """What a caller of `inject_set` asks besides the query and where to look."""

    session: str | None
    reset: bool
    task: str | None
    max_bytes: int | None
    care: tuple[tuple[str, str], ...]
    deadline: float | None
    rules: Callable[[], Rules | None] | None


def _injected(
    scopes: Sequence[Scope], corpora: Sequence[Corpus], query: str, settings: Settings, asked: _Asked
) -> Injection:
    """`inject_set` over corpora already open: rank, plan within the session's ledger, and
    count what was injected in each scope's own ledger."""
    named = len(scopes) > 1  # one directory: plain file names, as always
    shelves = [retrieve.Shelf(s.name if named else "", c) for s, c in zip(scopes, corpora, strict=True)]
    # A thank-you is no question: nothing is searched for it (a session's start still gets
    # its baseline).
    with lexicon.opened(asked.deadline) as words:
        result = retrieve.recall(shelves, "" if acknowledges(query) else query, settings, words)
    lang = settings.lang or ("zh" if has_cjk(query) else "en")
    if not settings.lang and not query.strip():  # a session's start: the memories' language
        from .rules import describes_lang

        lang = describes_lang(d for shelf in shelves for d in shelf.corpus.descriptions_sample())
    plan = _Plan(scopes, shelves, result, query, settings, lang, asked.task or settings.task or asked.session)
    plan.max_bytes = asked.max_bytes
    plan.care = asked.care
    rules = asked.rules
    if rules is not None and settings.rules:
        plan.rules = lambda: _rules_text(rules(), scopes, shelves, settings)
    if asked.session is None:
        injection = plan.run(Ledger(""), stateless=True)
    else:
        injection = _in_session(plan, scopes[0].state_dir, asked.session, asked.reset)
    states = {(s.name if named else ""): s.state_dir for s in scopes}
    for scope, files in _by_scope(injection.snippets).items():
        try:
            access.record(states[scope], "injected", files)
        except (OSError, SagememError) as exc:
            injection.diagnostics["access_error"] = str(exc)
            log_once(states[scope], f"access ledger not written: {_reason(exc)}")
    return injection


def _in_session(plan: _Plan, state_dir: Path, session: str, reset: bool) -> Injection:
    """`plan` run within the session's ledger. An unwritable state dir (a sandbox) moves the
    ledger to the temp dir, and failing that costs the session its memory, never the
    injection."""

    def run(place: Path) -> Injection:
        with open_ledger(place, session, reset=reset) as ledger:
            return plan.run(ledger, stateless=False)

    try:
        injection, failure = in_first_place(state_dir, run)
    except (OSError, SagememError) as exc:
        injection, failure = plan.run(Ledger(session), stateless=False), exc
    if failure is not None:
        log_once(state_dir, f"session ledger not written in the state dir: {_reason(failure)}")
        injection.diagnostics["ledger_error"] = str(failure)
    return injection


class Rules(Record):
    """How a harness's model may save a memory: through the MCP tools, named as the harness
    shows them (`tool`, their prefix), or at the command line."""

    mcp: bool
    tool: str = ""


def _rules_text(
    rules: Rules | None, scopes: Sequence[Scope], shelves: Sequence[retrieve.Shelf], settings: Settings
) -> str:
    """The saving rules' text; "" when the harness needs none."""
    from .rules import describes_lang, saving_rules

    if rules is None:
        return ""

    lang = settings.lang or describes_lang(d for shelf in shelves for d in shelf.corpus.descriptions_sample())
    places = {
        "project": "this repository's .sagemem/memory",
        "user": "your own ~/.sagemem/memory",
    }
    named = {s.name: places[s.name] for s in scopes if s.name in places} if len(scopes) > 1 else None
    return saving_rules(lang, mcp=rules.mcp, command=command_line(), scopes=named, tool=rules.tool)


def _by_scope(snippets: Sequence[render.Snippet]) -> dict[str, list[str]]:
    """Each scope's file names among `snippets` (their own names, without the scope)."""
    found: dict[str, list[str]] = {}
    for snippet in snippets:
        own = snippet.file.split(":", 1)[1] if snippet.scope else snippet.file
        found.setdefault(snippet.scope, []).append(own)
    return found


class _Plan:
    """One injection's inputs, so the same work can run with the session ledger or without."""

    def __init__(
        self,
        scopes: Sequence[Scope],
        shelves: Sequence[retrieve.Shelf],
        result: retrieve.Result,
        query: str,
        settings: Settings,
        lang: str,
        task: str | None,
    ) -> None:
        self.shelves, self.result, self.scopes = shelves, result, scopes
        self.dirs = {shelf.scope: scope.memory_dir for shelf, scope in zip(shelves, scopes, strict=True)}
        # A harness's own folder: its index lines are in the model's context already.
        self.native = {shelf.scope for shelf, scope in zip(shelves, scopes, strict=True) if scope.native}
        self.state_dir = scopes[0].state_dir
        self.query, self.settings, self.lang, self.task = query, settings, lang, task
        self.max_bytes: int | None = None  # one injection's cap (a harness's output limit)
        # "How to save a memory", offered once a session: what gives its text ("" for none)
        self.rules: Callable[[], str] | None = None
        self.care: tuple[tuple[str, str], ...] = ()  # findings to tell at the session's start

    def run(self, ledger: Ledger, *, stateless: bool) -> Injection:
        budget = self.settings.budget
        reserve = reserve_for(budget)
        signature = sha256_hex(" ".join(self.query.split()).encode("utf-8"))[:16]
        repeated = not stateless and ledger.last_query == signature
        ledger.last_query = signature
        wants = intents(self.query)
        again = bool(wants & {"verify", "correct", "why"})

        baseline = [] if repeated or stateless or ledger.baseline_done else self._baseline()
        given = _ranges(ledger.injected, stateless)
        for snippet in baseline:  # a hit inside a baseline memory shown now is not shown twice
            given.setdefault(snippet.file, []).append((snippet.start, snippet.end))

        def already(hit: Hit) -> bool:
            # The matched paragraph itself: shown once, it is not shown again for the sake of
            # the paragraph after it.
            end = hit.own_end or hit.end
            return not again and any(s <= hit.start and end <= e for s, e in given.get(hit.file, ()))

        hits, held = ([], []) if repeated else self.result.pick(already)
        pending = [("baseline", s) for s in baseline]
        pending += [("hit", s) for h in hits if (s := self._snippet(h.scope, h.entry, h.start, h.end))]

        left_out = [
            f"{shelf.scope}:{file}" if shelf.scope else file
            for shelf in self.shelves
            for file, _ in shelf.corpus.left_out()
        ]
        # The rules for saving: once a session (again after a compaction), whenever the start
        # event comes; dsh runs it detached, so the first prompt's hook may have come first.
        # Settled once a session, whatever the text has become, and so when there is none: a
        # later prompt asks nothing (the harness's settings are read once).
        settle = self.rules is not None and not stateless and "rules" not in ledger.cards
        rules = self.rules() if settle and self.rules is not None else ""
        if settle and not rules:
            ledger.cards.append("rules")
        framing = self._framing(left_out, rules)
        chosen, omitted, spent = self._fit(pending, framing, budget - reserve - ledger.used)

        # Cards: a gap card, then (at the session's start) notices, each shown once a session
        # and paid from the reserve; a task checkpoint rides along with anything shown.
        starting = not stateless and not repeated and not ledger.baseline_done
        card = "" if repeated else self._card(omitted, held, bool(chosen), wants)
        if not chosen and ledger.used + framing > budget - reserve:
            card = ""  # not even the framing fits: stay silent
        offered = [card] if card else []
        offered += self._notices(left_out) if starting else []
        cards, taken = _cards_within(offered, ledger, reserve, stateless)
        checkpoint = self._checkpoint() if chosen or cards or baseline else ""

        text, base = "", ledger.used
        while chosen or cards or checkpoint or rules:
            extra = cards + ([checkpoint] if checkpoint else [])
            text, used = self._draw(chosen, extra, len(held) + len(omitted), left_out, base, spent, rules)
            if self.max_bytes is None or len(text.encode("utf-8")) <= self.max_bytes:
                break
            # Over this injection's cap (a long fence, a long path): give up the last snippet,
            # then the checkpoint, then the last card, until it fits or nothing is left.
            text = ""
            if chosen:
                _, dropped, part = chosen.pop()
                omitted.insert(0, dropped)
                spent -= len(part.encode("utf-8")) + 2
            elif checkpoint:
                checkpoint = ""
            elif cards:
                cards.pop()
                taken.pop()
            else:
                rules = ""
        if text:
            ledger.used = used
            ledger.reserve_used += sum(len(c.encode("utf-8")) for c in cards)
            ledger.cards.extend(taken + (["rules"] if rules else []))
        else:
            chosen, cards = [], []
        card = card if card in cards else ""
        for _, snippet, _ in chosen:
            key = f"{snippet.file}:{snippet.start}-{snippet.end}"
            ledger.injected[key] = sha256_hex(snippet.text.encode("utf-8"))[:16]
        if not stateless and not repeated:
            ledger.baseline_done = True
        snippets = tuple(snippet for _, snippet, _ in chosen)
        return Injection(
            text=text,
            snippets=snippets,
            baseline=tuple(s.file for kind, s, _ in chosen if kind == "baseline"),
            omitted=len(held) + len(omitted),
            card=card,
            session_used=ledger.used,
            budget=budget,
            diagnostics=self._diagnostics(held, len(omitted), snippets, text, repeated, wants),
            unscanned=tuple(
                (scope.memory_dir, scope.state_dir, index)
                for shelf, scope in zip(self.shelves, self.scopes, strict=True)
                if (index := shelf.corpus.unscanned) is not None
            ),
        )

    def _framing(self, left_out: list[str], rules: str) -> int:
        """The bytes of an injection's framing (intro, discipline, fence, status), paid once
        per injection: sized with the longest status line it can have."""
        budget = self.settings.budget
        framed = render.render(
            [""],
            lang=self.lang,
            memory_dir=self._shown_dirs(),
            used=budget,
            limit=budget,
            omitted=999,
            left_out=left_out,
            rules=rules,
        )
        return len(framed.encode("utf-8"))

    def _fit(
        self, pending: list[tuple[str, render.Snippet]], framing: int, room: int
    ) -> tuple[list[tuple[str, render.Snippet, str]], list[render.Snippet], int]:
        """The snippets that fit, in order, in `room` bytes of the session's budget (and under
        this injection's cap, cards aside), each as (kind, snippet, its text); those left out;
        and the bytes spent, the framing's included. A memory's description is shown once."""
        spent = framing
        chosen: list[tuple[str, render.Snippet, str]] = []
        omitted: list[render.Snippet] = []
        described: set[tuple[str, str]] = set()
        for kind, snippet in pending:
            repeat = (snippet.scope, snippet.file) in described
            part = render.snippet_part(snippet._replace(description="") if repeat else snippet, self.lang)
            size = len(part.encode("utf-8")) + 2
            over_call = self.max_bytes is not None and spent + size > self.max_bytes - 2 * MAX_CARD_BYTES
            if spent + size > room or over_call:
                omitted.append(snippet)
                continue
            spent += size
            described.add((snippet.scope, snippet.file))
            chosen.append((kind, snippet, part))
        return chosen, omitted, spent

    def _diagnostics(
        self,
        held: Sequence[Hit],
        omitted: int,
        snippets: Sequence[render.Snippet],
        text: str,
        repeated: bool,
        wants: set[str],
    ) -> dict[str, Any]:
        """What `--json` and `SAGEMEM_DEBUG` show of how this injection was decided."""
        return {
            "scanned": self.result.scanned,
            "terms": list(self.result.terms),
            "decision": self.result.verdict.why if self.result.verdict else "",
            "candidates": [[h.file, h.start, round(h.score, 3), h.stage] for h in self.result.ranked],
            "held_back": [[h.file, round(h.score, 3)] for h in held],
            "injected": [f"{s.file}:{s.start}-{s.end}" for s in snippets],
            "bytes": len(text.encode("utf-8")),
            "omitted": omitted,
            "repeated": repeated,
            "intents": sorted(wants),
            "not_indexed_yet": sum(shelf.corpus.pending for shelf in self.shelves),
        }

    def _draw(
        self,
        chosen: list[tuple[str, render.Snippet, str]],
        extra: list[str],
        count: int,
        left_out: list[str],
        base: int,
        spent: int,
        rules: str = "",
    ) -> tuple[str, int]:
        """The text, and the session's bytes after it: what was printed, cards and the
        checkpoint excepted (they have the reserve). Drawn twice, because the status line
        states the session's total including this injection."""

        def draw(used: int) -> str:
            return render.render(
                [part for _, _, part in chosen],
                lang=self.lang,
                memory_dir=self._shown_dirs(),
                used=used,
                limit=self.settings.budget,
                omitted=count,
                extra=extra,
                left_out=left_out,
                rules=rules,
            )

        free = sum(len(c.encode("utf-8")) + 2 for c in extra)
        used = base + len(draw(base + spent).encode("utf-8")) - free
        return draw(used), used

    def _baseline(self) -> list[render.Snippet]:
        every = [(shelf.scope, e) for shelf in self.shelves for e in shelf.corpus.baseline()]
        chosen = sorted(every, key=lambda item: (-item[1].baseline_priority, item[0], item[1].file))
        found = [self._snippet(scope, e, e.body_start, e.body_end) for scope, e in chosen[:MAX_BASELINE]]
        return [s for s in found if s is not None]

    def _snippet(self, scope: str, entry: Entry, start: int, end: int) -> render.Snippet | None:
        """The snippet to show, None when there is nothing to show: the file changed, or
        (in a harness's own folder, whose MEMORY.md lines the harness has put in the context
        already) a memory with no body, whose snippet would only repeat its index line."""
        found = read_snippet(self.dirs[scope], entry, start, end, scope=scope, limit=SHOWN_CHARS)
        if found is not None and scope in self.native and found.end < entry.body_start:
            return None
        return found

    def _shown_dirs(self) -> list[str]:
        return [str(folder) for folder in self.dirs.values()]

    def _card(self, omitted: list[render.Snippet], held: list[Hit], injected: bool, wants: set[str]) -> str:
        """A gap card, only for a real gap: found but not shown, or history asked and not held."""
        t = CARD_TEXT[self.lang]
        count = len(held) + len(omitted)
        if count:
            # The best lead: what the budget kept out (it scored higher), else the best held back.
            # One that holds a secret is not sent to a whole read: that would show it raw.
            file, description, secret = (
                (omitted[0].file, omitted[0].description, omitted[0].secret)
                if omitted
                else (held[0].file, held[0].description, bool(held[0].entry.secrets))
            )
            why = t["budget"] if omitted else t["score"]
            plural = "y" if count == 1 else "ies"
            text = t["held-secret" if secret else "held"]

            def card(shown: str) -> str:
                return text.format(
                    n=count, ies=plural, why=why, file=file, description=shown, cmd=command_line()
                )

            description = " ".join((description or file).split())
            # Shorten the description, never the action, to keep the card within its bytes.
            while len(card(description).encode("utf-8")) > MAX_CARD_BYTES and len(description) > 1:
                description = description[: max(1, len(description) * 3 // 4)].rstrip() + "…"
            return card(description)
        if not injected and not self.result.ranked and "history" in wants:
            return t["none"].format(cmd=command_line())
        return ""

    def _notices(self, left_out: list[str]) -> list[str]:
        """What a session is told once, at its start: memories left out for merge conflicts,
        and the findings the hook passed in (archived memories changed after archiving)."""
        t = CARD_TEXT[self.lang]
        groups = {"conflicted": list(left_out)}
        for check, file in self.care:
            groups.setdefault(check, []).append(file)
        found = []
        for check, files in groups.items():
            if files and check in t:
                found.append(_fit(functools.partial(_card, t[check]), files))
        return found

    def _checkpoint(self) -> str:
        """One line naming the task's WORKING.md, its revision, and done items without evidence."""
        if not self.task:
            return ""
        folder = re.sub(r"[^\w.-]", "_", self.task)[:100].strip(".") or "task"
        path = self.state_dir / "tasks" / folder / "WORKING.md"
        try:
            safe_folder(self.state_dir, "tasks", folder, create=False)  # no link on the way
            data = read_bytes(path)
        except (SagememError, OSError):
            return ""
        text = data.decode("utf-8", "replace")
        t = CARD_TEXT[self.lang]
        bare = [item.strip() for item in _DONE_ITEM.findall(text) if not _EVIDENCE.search(item)]
        undone = ""
        if bare:  # redacted whole, then cut: a cut secret is no longer found
            items = "; ".join(f'"{secrets.shown(item)[:60]}"' for item in bare[:3])
            undone = t["undone"].format(n=len(bare), items=items)
        rev = sha256_hex(data)[:8]
        line = t["task"].format(task=self.task, rev=rev, path=path, undone=undone)
        return secrets.shown(" ".join(line.split("\n")))  # a task named with a secret, too


def _cards_within(
    offered: list[str], ledger: Ledger, reserve: int, stateless: bool
) -> tuple[list[str], list[str]]:
    """The cards that fit in what is left of the session's reserve, each shown once a
    session, and their digests (recorded once they are shown)."""
    cards: list[str] = []
    taken: list[str] = []
    reserve_used = ledger.reserve_used
    for offer in offered:
        digest = sha256_hex(offer.encode("utf-8"))[:16]
        size = len(offer.encode("utf-8"))
        if (stateless or digest not in ledger.cards) and reserve_used + size <= reserve:
            reserve_used += size
            cards.append(offer)
            taken.append(digest)
    return cards, taken


def _card(template: str, names: str) -> str:
    return template.format(files=names, cmd=command_line())


def _fit(card: Callable[[str], str], files: list[str]) -> str:
    """`card` naming as many of `files` as fit in `MAX_CARD_BYTES` (the rest are counted)."""
    for shown in range(min(len(files), 5), 0, -1):
        names = ", ".join(files[:shown]) + (f" (+{len(files) - shown})" if len(files) > shown else "")
        text = card(names)
        if len(text.encode("utf-8")) <= MAX_CARD_BYTES:
            return text
    return card(f"{len(files)} file(s)")


def _ranges(injected: dict[str, str], stateless: bool) -> dict[str, list[tuple[int, int]]]:
    """The line ranges a session has received, by file."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    if stateless:
        return ranges
    for key in injected:
        file, _, lines = key.rpartition(":")
        first, _, last = lines.partition("-")
        if first.isdigit() and last.isdigit():
            ranges.setdefault(file, []).append((int(first), int(last)))
    return ranges


def _reason(exc: Exception) -> str:
    """A failure's cause without the parts that change on every call (temp file names)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({exc.filename2 or exc.filename})" if exc.filename2 else exc.strerror
    return str(exc)


def read_snippet(
    memory_dir: Path, entry: Entry, start: int, end: int, *, scope: str = "", limit: int | None = None
) -> render.Snippet | None:
    """Lines `start`..`end` of a memory, blank edge lines trimmed, its likely secrets redacted;
    None if the file changed since it was indexed (the next call sees the new text) or cannot
    be read. In a set of several scopes, the snippet is named with its scope
    (`user:user_profile.md`). With `limit`, the text is cut after that many characters (the
    rest is not shown: an injection shows the first `render.MAX_SNIPPET_CHARS`).

    What is redacted: the secrets the index found (the full scan's, when the file was indexed
    outside the prompt's deadline), a private key's block that begins above the lines, and
    what the pattern pass finds in the lines shown now, so an index that came with a clone,
    stale or forged, hides from no snippet what the pattern pass finds. Every snippet shown,
    injected or asked for (`search`, MCP `memory_search`), is read here. The file itself is not
    changed: it is the person's, and `check` names what it holds."""
    try:
        data = read_bytes(memory_dir / entry.file)
    except SagememError:
        return None
    if sha256_hex(data) != entry.version:
        return None
    text = data.decode("utf-8")
    every = split_lines(text)
    # A list item or table row comes under its heading and lead (`- stop the deploy` under
    # `## Rollback`, `Steps:`), with `…` where lines are left out between them.
    unit = next((p for p in entry.paragraphs if p.start == start), None)
    context = [n for n in unit.context if n < start and n <= len(every)] if unit else []
    first = sum(map(len, every[: min([start, *context]) - 1]))
    last = sum(map(len, every[:end]))
    found = [*entry.secrets, *secrets.private_keys(text, first, last)]
    source = split_lines(secrets.redact(text, found)) if found else every
    lines = source[start - 1 : end]
    above = [source[n - 1].rstrip("\r\n") + "\n" for n in context]
    if context and any(line.strip() for line in source[context[-1] : start - 1]):
        above.append("…\n")  # lines left out between the context and the unit
    while lines and not lines[0].strip():
        lines, start = lines[1:], start + 1
    while lines and not lines[-1].strip():
        lines, end = lines[:-1], end - 1
    if not lines:  # no body: the memory is its frontmatter, and its description says it all
        start, end, above = 1, max(1, entry.body_start - 1), []
    body = "".join(above) + "".join(line.rstrip("\r\n") + "\n" for line in lines)
    if limit is not None:  # a secret reaching into what is shown is read whole
        body = body[: limit + _SCAN_MARGIN]
    shown = secrets.shown(body)
    secret = bool(found) or shown != body
    name = f"{scope}:{entry.file}" if scope else entry.file
    age = render.age_days(entry.updated, entry.mtime)
    description = corpus_module.shown(entry.description)
    text = shown if limit is None else shown[:limit]
    return render.Snippet(name, start, end, description, text, age, scope, secret)


# What of a snippet an injection may show: `render` shows `MAX_SNIPPET_CHARS` of it and marks
# the cut; the pattern pass reads `_SCAN_MARGIN` further, so a secret that begins within them
# is found whole, and a huge paragraph costs no more than a short one.
SHOWN_CHARS = render.MAX_SNIPPET_CHARS + 256
_SCAN_MARGIN = 16 * 1024
