"""A memory's fields from one sentence, as a person says it: `remember "记住：我的猫叫芝麻"`.

A person who says what to remember should not have to name, describe and type it first. The
sentence, less the words that only ask for it to be remembered (`remember that`, `记住：`),
is the body; its first line, cut at a word, the description; its first words the name. The
caller says what was chosen, so it can be changed.
"""

from __future__ import annotations

import re

from .errors import InvalidMemory
from .records import Record

MAX_DESCRIPTION = 150  # characters: one line in MEMORY.md, as a person writes one
MAX_NAME = 40

# The words that ask to remember, at the start: English and Chinese, with what follows them
# (a colon, a comma, `that`).
_ASK = re.compile(
    r"^\s*(?:(?:please|pls)[\s,]+)?(?:remember|note|keep in mind|don't forget)(?:\s+that)?\b\s*[:：,，-]?\s*"
    r"|^\s*(?:请|帮我|麻烦)?(?:记住|记一下|记下|记得|备忘)(?:一下)?\s*[:：,，]?\s*",
    re.IGNORECASE,
)
_BLANKS = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


class Fields(Record):
    name: str
    description: str
    body: str


def fields_from(text: str) -> Fields:
    """The name, description and body of a memory that says `text`; `InvalidMemory` when it
    says nothing once the asking words are taken off."""
    said = _ASK.sub("", text.strip(), count=1).strip()
    if not said:
        raise InvalidMemory("(the text to remember)", "says nothing to remember")
    first = _BLANKS.sub(" ", said.split("\n", 1)[0]).strip()
    name = _cut(first, MAX_NAME).rstrip(".,;:!?。，；：！？")
    return Fields(name, _cut(first, MAX_DESCRIPTION), said + "\n")


def _cut(line: str, limit: int) -> str:
    """`line` at most `limit` characters, cut at a blank when it has words (CJK anywhere)."""
    if len(line) <= limit:
        return line
    cut = line[:limit]
    blank = cut.rfind(" ")
    if blank > limit // 2 and not _CJK.search(cut[blank:]):
        cut = cut[:blank]
    return cut.rstrip() + "…"
