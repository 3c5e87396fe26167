"""Small memory directories for retrieval and injection tests, written here for the tests."""

from __future__ import annotations

from pathlib import Path

from sagemem import MemoryStore

DANCE = {
    "project_studio_opening.md": """---
name: Studio opening
description: Opening the dance studio downtown in March, lease signed with the landlord
type: project
updated: 2026-01-10
---

## Lease

The lease for the studio on Fifth Street runs five years; rent is due on the first.

## Classes

Contemporary and hip-hop classes start the second week; the salsa teacher joins in April.
""",
    "user_dancer_profile.md": """---
name: Dancer profile
description: Jon is a contemporary dancer who lost his banking job and teaches evening classes
type: user
---

Jon prefers rehearsals in the evening and keeps Mondays free.
""",
    "reference_competition_rules.md": """---
name: Competition rules
description: Scoring rules of the regional dance competition, judges and time limits
type: reference
---

Each routine is scored by three judges out of ten points.

Routines longer than four minutes lose one point; the music cut must be sent a week early.

The regional final takes place at the Orpheum theatre, with the kerfuffle trophy for the best newcomer.
""",
    "feedback_舞蹈课.md": """---
name: 舞蹈课安排
description: 晚上的舞蹈课不要排在周一，学员反馈周一太累
type: feedback
---

周一晚上不排课。

**Why:** 学员周一下班最累，出勤率只有一半。

**How to apply:** 排课表时跳过周一，把周一的课挪到周三。
""",
}


QUESTION = "when does the studio lease start and what is the rent?"
OLD_PLAN = (
    "---\nname: Old plan\ndescription: the 2019 studio plan\ntype: project\ntags: [studio, plan]\n"
    "updated: 2019-05-01\n---\n\n# Plan\n\nA plan **nobody** uses any more.\n"
)
MUSIC = (
    "---\nname: Music\ndescription: playlists for each class\ntype: reference\ntags: [music]\n---\n\n"
    "- salsa\n- tango\n"
)


def make_project(root: Path) -> Path:
    """A project with the dance memories in `.sagemem/memory`, one of them a baseline."""
    files = dict(DANCE)
    files["user_me.md"] = "---\ndescription: who I am\nbaseline: true\n---\n\nI teach evening classes.\n"
    make(root / ".sagemem" / "memory", files)
    return root


def make(folder: Path, files: dict[str, str]) -> MemoryStore:
    store = MemoryStore(folder)
    store.init()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return store
