"""Tokens for BM25, English and Chinese alike, the same rules for memories and queries.

Latin script: NFKC and case folding, then words and identifiers. An identifier such as
`v2.3`, `err_42` or `deploy-staging` is kept whole and also split into its parts, so both
`ERR_42` and `err 42` find it. Plain words get the Snowball English stemmer, as Lucene-style
engines do (`deployment`, `deployed`, `deploying` -> `deploy`). Stop words and one-letter
words are dropped.

Chinese: memories are segmented by jieba (rjieba, its Rust port, when installed) in search
mode (the dictionary words inside a long word are tokens too); words of two or more
characters are kept, and a lone character only when it stands alone between non-Chinese
text. Queries are *not* segmented: loading a dictionary takes a tenth of a second to a
second, more than the whole hook. Each Chinese run of a query is matched against the
vocabulary of the memories themselves, taking every substring that is a known token. This can
differ from how jieba would cut the query, but only in ways that cannot add a false match: a
query word that no memory contains cannot match anything either way. Its characters are kept
as unknown terms (in pairs), so the relevance gate still counts them; a single character
left between known words and stop words counts as nothing.
"""

from __future__ import annotations

import _thread
import functools
import operator
import re
import unicodedata
from collections.abc import Container, Iterable, Iterator

from ..store.records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A Chinese run, or a Latin word/identifier: starts and ends with a letter or digit, and may
# hold `_`, `.` and `-` inside. Patterns with the CJK ranges take milliseconds to compile,
# which the hook would pay on every prompt, so text is first cut into runs of word characters
# (`_WORDS`, cheap); only a run that is not ASCII is cut again at its Chinese characters, with
# one such pattern compiled on first use. The result is that of `RUNS` (a test checks it).
RUNS = rf"[{CJK}]+|[^\W_{CJK}](?:(?:[^\W{CJK}]|[.\-])*[^\W_{CJK}])?"
_WORDS = re.compile(r"[^\W_](?:[\w.\-]*[^\W_])?")
_PARTS = re.compile(r"[^\W_]+")
MAX_WORD_CHARS = 8
# Characters of one memory that jieba segments; the rest is indexed by character pairs. A
# memory of ordinary length never comes near it; a half-megabyte one would cost seconds.
MAX_SEGMENTED_CHARS = 50_000
# Stop words that still end an English compound (setup, workout, shutdown, backup, signoff).
_PARTICLES = frozenset({"up", "out", "down", "off", "over"})

STOP_EN = frozenset(
    """a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could did didn do does doesn doing don down
    during each few for from further had has have having he her here hers herself him himself his
    how i if in into is isn it its itself just let me more most my myself no nor not now of off on
    once only or other ought our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under
    until up very was wasn we were what when where which while who whom why will with won would
    you your yours yourself yourselves please thanks thank tell know get got make made want need
    like use using used ok okay yes yeah hi hello hey
    good great nice cool fine sure right never mind sound sounds awesome perfect bye hmm lol wow
    confirm verify reason reasons evidence correct anymore longer instead""".split()
)
STOP_ZH = frozenset(
    """我们 你们 他们 她们 它们 咱们 自己 什么 怎么 怎么样 怎样 如何 为什么 为何 哪里 哪儿 哪个 哪些
    这个 那个 这些 那些 这里 那里 这样 那样 一个 一些 一下 一点 可以 可能 应该 需要 没有 不是 就是
    还是 但是 因为 所以 如果 然后 而且 或者 已经 现在 时候 知道 觉得 请问 帮我 告诉 一般 还有 以及
    是否 是不是 有没有 能不能 可不可以 的话 之后 之前 以后 以前 关于 对于 这么 那么 多少 几个
    由谁 是谁 多大 多久 多长 多远 多高 哪一 哪年 哪天 何时 何地 什么样 哪种 怎么办 有哪些 是什么
    为了 通过 进行 其中 之一 主要 一种 一起 这种 那种
    确认 核实 依据 理由 出处 对吧 对吗 是吗 没错 确定
    你好 您好 大家好 谢谢 多谢 好的 好吧 再见 拜拜 哈哈 嗯嗯 晚安 早安 早上好 晚上好
    要不要 会不会 用不用 能否 可否 是用来 用来 一共 总共 大概 大约 具体 到底 平时 通常 干嘛 干什么
    好不好 对不对 行不行 该不该 需不需要 有几 几台 几次 几种 几位 几家 几所 哪位 哪家 哪所
    为啥 干啥 啥样 咋样 咋办 来着""".split()
)


def _by_first(words: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The words by their first character, longest first."""
    found: dict[str, tuple[str, ...]] = {}
    for word in sorted(words, key=len, reverse=True):
        found[word[0]] = (*found.get(word[0], ()), word)
    return found


_STOP_BY_FIRST = _by_first(STOP_ZH)  # every stop word has two characters or more
# Characters that never start or end a content word: pairs holding one are not terms.
PARTICLES = frozenset("的了吗呢吧啊呀哦嗯么啥咋哎")
STOP_ZH_CHARS = frozenset(
    "的了是在我你他她它和与就都也还要会能吗呢吧啊呀哦嗯么着过把被给让从向对这那有没不很再又好您"
)


# A message that only acknowledges ("thanks, that worked!", "ok great, fixed it") is no
# question: words of thanks or assent, and words of an outcome, nothing else.
_THANKS = frozenset("thanks thank thx ty ok okay great nice cool perfect awesome brilliant".split())
# What may stand beside them: no negation, no question word ("ok, it did not work" asks).
_FILLERS = frozenset("that it this is was now all just so very really a lot much again s".split())
_OUTCOMES = frozenset("work worked works working fixed fixes helped helps solved resolved did".split())


# The same in Chinese: thanks, then an outcome, then particles (谢谢，问题解决了！).
_THANKS_ZH = ("谢谢", "多谢", "感谢", "好的", "太好了", "完美", "搞定")
_OUTCOMES_ZH = ("问题解决", "解决", "可以了", "好了", "成功", "能用了", "没问题")


def acknowledges(text: str) -> bool:
    """Whether `text` only thanks or assents, with at most words of an outcome (`worked`,
    `fixed`, `解决了`) besides: the prompt hook gives it nothing, however many memories say
    `work` or `问题`."""
    folded = normalize(text)
    if "?" in folded or "？" in folded:
        return False
    pieces = list(runs(folded))
    words = [piece for piece, _, _, zh in pieces if not zh]
    chinese = "".join(piece for piece, _, _, zh in pieces if zh)
    if not any(word in _THANKS for word in words) and not any(w in chinese for w in _THANKS_ZH):
        return False
    for word in sorted(_THANKS_ZH + _OUTCOMES_ZH, key=len, reverse=True):
        chinese = chinese.replace(word, "")
    if any(char not in PARTICLES for char in chinese):
        return False
    return all(word in _THANKS or word in _OUTCOMES or word in _FILLERS for word in words)


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def stem(word: str) -> str:
    """The Snowball English stem of a plain word (`deployments`, `deploying` -> `deploy`;
    `invalidation`, `invalidated` -> `invalid`); identifiers and other scripts as they are."""
    return _stem(word) if _stemmed(word) else word


def stems(words: list[str]) -> list[str]:
    """`stem` of each word, in one call to the stemmer (for lists of many thousand words)."""
    plain = [i for i, word in enumerate(words) if _stemmed(word)]
    found = list(words)
    with _stemmer_lock:
        for i, term in zip(plain, _english().stemWords([words[i] for i in plain]), strict=True):
            found[i] = term
    return found


def _stemmed(word: str) -> bool:
    """Whether `word` is a plain English word long enough to stem."""
    return len(word) > 3 and word.isalpha() and word.isascii()


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    with _stemmer_lock:  # a Stemmer must not be called from two threads at once (the UI's)
        return _english().stemWord(word)


def _english() -> Any:
    """PyStemmer's English stemmer, Snowball's C build: about 1 ms to load, on first use."""
    global _stemmer
    if _stemmer is None:
        import Stemmer

        _stemmer = Stemmer.Stemmer("english")
    return _stemmer


def latin_tokens(piece: str) -> list[str]:
    """Tokens of one Latin word or identifier (already normalised)."""
    return list(_latin_terms(piece))


@functools.lru_cache(maxsize=65536)
def _latin_terms(piece: str) -> tuple[str, ...]:
    # Cached: a build meets the same few thousand words again and again.
    parts = _PARTS.findall(piece)
    if len(parts) == 1:
        word = stem(parts[0])
        return (word,) if len(word) > 1 and parts[0] not in STOP_EN else ()
    whole = (piece,) if len(piece) > 1 else ()
    return whole + tuple(stem(p) for p in parts if len(p) > 1 and p not in STOP_EN)


def document_tokens(text: str, *, words: int = MAX_SEGMENTED_CHARS) -> list[str]:
    """The tokens of memory text (jieba is loaded on the first Chinese text). jieba cuts
    words out of at most `words` characters of Chinese; the rest gets its character pairs
    only, as jieba takes seconds per hundred thousand characters."""
    tokens: list[str] = []
    text = normalize(text)
    if text.isascii():  # no Chinese run: every word is a Latin one (`runs` would say so)
        for piece in _WORDS.findall(text):
            tokens += _latin_terms(piece)
        return tokens
    for piece, _, _, chinese in runs(text):
        if not chinese:
            tokens += _latin_terms(piece)
            continue
        tokens += _segment(piece, piece[: max(words, 0)])
        words -= len(piece)
    return tokens


def runs(text: str) -> Iterator[tuple[str, int, int, bool]]:
    """The runs of `text` (see `RUNS`): (text, start, end, whether it is Chinese)."""
    for word in _WORDS.finditer(text):
        if word.group().isascii():
            yield word.group(), word.start(), word.end(), False
            continue
        # Chinese runs as they are; between them, Latin words cut as everywhere else.
        position = word.start()
        for run in _chinese().finditer(text, word.start(), word.end()):
            yield from _latin(text, position, run.start())
            yield run.group(), run.start(), run.end(), True
            position = run.end()
        yield from _latin(text, position, word.end())


def _latin(text: str, start: int, end: int) -> Iterator[tuple[str, int, int, bool]]:
    for word in _WORDS.finditer(text, start, end):
        yield word.group(), word.start(), word.end(), False


def query_tokens(text: str, vocabulary: Container[str]) -> list[str]:
    """The tokens of a query, Chinese matched against `vocabulary` (see the module docstring).

    Two English words in a row that the memories write as one (`roll back` for `rollback`,
    `set up` for `setup`, `data base`) become that one word, so the query asks for it once.
    Of the stop words only the particles of such compounds may be the second word: `in`
    is not one, since `feel in` would turn into the colloquial `feelin`."""
    tokens: list[str] = []
    previous: tuple[str, int, list[str]] | None = None  # a plain word, where it ended, its tokens
    folded = normalize(text)
    for piece, start, end, chinese in runs(folded):
        if chinese:
            tokens += _match_known(piece, vocabulary)
            previous = None
            continue
        own = latin_tokens(piece)
        plain = piece.isalpha()
        if (
            plain
            and previous
            and previous[2]
            and (own or piece in _PARTICLES)
            and not folded[previous[1] : start].strip()
        ):
            joined = stem(previous[0] + piece)
            if joined in vocabulary and len(previous[0] + piece) > 4:
                del tokens[len(tokens) - len(previous[2]) :]
                tokens.append(joined)
                previous = None
                continue
        tokens += own
        previous = (piece, end, own) if plain else None
    return tokens


def is_chinese(word: str) -> bool:
    """Whether `word` is Chinese characters only."""
    return bool(word) and not word.isascii() and _chinese().fullmatch(word) is not None


def has_cjk(text: str) -> bool:
    return not text.isascii() and _chinese().search(text) is not None


def _segment(run: str, head: str) -> list[str]:
    """jieba's words of two or more characters in `head` (the run, or as much of it as jieba
    is given), then every character pair of the run's content (stop words taken out): the
    pairs keep names and terms that jieba cuts into single characters findable."""
    if len(run) == 1:
        return [] if run in STOP_ZH_CHARS else [run]
    words = [w for w in _jieba().cut_for_search(head) if len(w) > 1 and w not in STOP_ZH] if head else []
    for part in _stop_words().split(run):
        words += _pairs(part)
    return words


def _match_known(run: str, vocabulary: Container[str]) -> list[str]:
    """The known words of a Chinese run of a query, then what no known word covers, in pairs,
    as unknown terms; a single character left between known words and stop words is too
    weak a signal to count either way."""
    if len(run) == 1:
        return [] if run in STOP_ZH_CHARS else [run]
    found: list[str] = []
    for part in _content(run):
        covered = [False] * len(part)
        for start in range(len(part)):
            for end in range(start + 2, min(len(part), start + MAX_WORD_CHARS) + 1):
                if part[start:end] in vocabulary:
                    found.append(part[start:end])
                    covered[start:end] = [True] * (end - start)
        uncovered = "".join(c if not done else " " for c, done in zip(part, covered, strict=True))
        for stretch in uncovered.split():
            if len([c for c in stretch if c not in PARTICLES and c not in STOP_ZH_CHARS]) > 1:
                found += stretch_pairs(stretch)
    return found


def _content(run: str) -> list[str]:
    """The stretches of a Chinese run left when stop words are taken out."""
    # At each place the longest stop word starting there, as a regular expression of them all
    # would find it; without one, whose compiling costs the prompt hook over a millisecond.
    # Most characters start no stop word: one dictionary lookup each.
    parts: list[str] = []
    start = i = 0
    starting = _STOP_BY_FIRST.get
    while i < len(run):
        for word in starting(run[i], ()):
            if run.startswith(word, i):
                if i > start:
                    parts.append(run[start:i])
                i = start = i + len(word)
                break
        else:
            i += 1
    if start < len(run):
        parts.append(run[start:])
    return parts


def _pairs(part: str) -> Iterable[str]:
    """Overlapping character pairs, leaving out pairs with a particle (的, 了, 吗 ...)."""
    if PARTICLES.isdisjoint(part):
        return map(operator.add, part, part[1:])
    pairs = zip(part, part[1:], strict=False)  # one fewer pair than characters
    return [a + b for a, b in pairs if a not in PARTICLES and b not in PARTICLES]


def stretch_pairs(stretch: str) -> list[str]:
    """Non-overlapping pairs of an unknown stretch, particles removed."""
    stretch = "".join(c for c in stretch if c not in PARTICLES)
    return [stretch[i : i + 2] for i in range(0, len(stretch) - 1, 2)]


@functools.cache
def _stop_words() -> re.Pattern[str]:
    """The Chinese stop words, longest first: splitting a run by it gives what `_content`
    gives (a test checks), with one regular expression instead of a loop. Compiled on first
    use: memory text is indexed by processes that segment many runs; a query has few, and
    `_content` spares the prompt hook the compiling."""
    return re.compile("|".join(map(re.escape, sorted(STOP_ZH, key=lambda w: (-len(w), w)))))


_stemmer: Any = None
_stemmer_lock = _thread.allocate_lock()  # `threading` costs the hook 1 ms to import
_chinese_run: re.Pattern[str] | None = None


def _chinese() -> re.Pattern[str]:
    """A run of Chinese characters, compiled on first use."""
    global _chinese_run
    if _chinese_run is None:
        _chinese_run = re.compile(f"[{CJK}]+")
    return _chinese_run


_segmenter = None


def _jieba():  # type: ignore[no-untyped-def]
    """The segmenter, imported on first use: only indexing Chinese memory text needs one.

    rjieba (jieba's algorithm and dictionary, in Rust) when it is installed: the same words
    as jieba on real Chinese text (a test compares them), many times faster and lighter to
    load. jieba itself otherwise (docs/decisions.md)."""
    global _segmenter
    if _segmenter is None:
        try:
            import rjieba

            _segmenter = rjieba
        except ImportError:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            _segmenter = jieba
    return _segmenter


def segmenter() -> str:
    """The name of the module that segments Chinese memory text (`rjieba` or `jieba`)."""
    return str(_jieba().__name__)
