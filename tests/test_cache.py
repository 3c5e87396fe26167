"""The persisted index (`cache.py`): incremental, identical to a fresh build, safe when damaged,
unwritable or shared by concurrent processes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemem import MemoryStore
from sagemem.search import cache
from sagemem.search.corpus import Corpus, index_file, load
from sagemem.search.inject import inject
from sagemem.search.retrieve import search
from sagemem.store.config import Settings

from .memories import DANCE, make

EVAL = Path(__file__).resolve().parent.parent / "fixtures" / "eval"
QUERIES = ["studio lease rent", "周一 舞蹈课", "judges points routine", "the kerfuffle", "brouhaha trophy"]


@pytest.fixture
def dance(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", DANCE)


class Counting:
    """`index_file`, counting the files it is asked to tokenise."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str, data: bytes, mtime: float, full: bool = True) -> Any:
        self.names.append(name)
        return index_file(name, data, mtime, full)


def opened(store: MemoryStore, **kwargs: Any) -> tuple[Corpus, list[str]]:
    counting = Counting()
    snapshot = cache.open_index(store.memory_dir, store.state_dir, counting, **kwargs)
    return Corpus(snapshot), counting.names


def contents(corpus: Corpus) -> dict[str, Any]:
    """Everything retrieval can see, keyed by names and lines rather than ids."""
    conn = corpus.connection
    corpus.read_arrays()
    names = dict(conn.execute("SELECT doc, name FROM files WHERE entry IS NOT NULL"))
    terms: dict[str, Any] = {}
    for (term,) in conn.execute("SELECT term FROM terms"):
        described = corpus.descriptions.postings.get(term)
        paragraphs = corpus.paragraphs.postings.get(term)
        terms[term] = (
            sorted((names[d], f) for d, f in _pairs(described)),
            sorted(
                (names[corpus.owners[p]], corpus.starts[p], corpus.ends[p], f) for p, f in _pairs(paragraphs)
            ),
        )
    lengths = sorted(
        (names[corpus.owners[p]], corpus.starts[p], corpus.paragraphs.lengths[p])
        for p in range(len(corpus.owners))
        if corpus.owners[p] != cache.DEAD
    )
    return {
        "entries": [e._asdict() for e in corpus.entries()],
        "terms": terms,
        "description_lengths": sorted((n, corpus.descriptions.lengths[d]) for d, n in names.items()),
        "paragraph_lengths": lengths,
        "stats": (
            corpus.count,
            corpus.descriptions.total,
            corpus.paragraphs.documents,
            corpus.paragraphs.total,
        ),
    }


def _pairs(packed: bytes | None) -> list[tuple[int, int]]:
    from array import array

    numbers = array("I")
    numbers.frombytes(packed or b"")
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def fresh(store: MemoryStore) -> Corpus:
    return load(store.memory_dir, store.state_dir, use_cache=False)


def test_injections_are_identical_with_and_without_the_cache_on_the_eval_set(tmp_path: Path) -> None:
    """Every eval query, injected from a cache that was built, then changed file by file,
    gives the same text as a build in memory."""
    memory = tmp_path / "memory"
    shutil.copytree(EVAL / "memory", memory)
    state = tmp_path / "state"
    queries = [
        json.loads(line)["query"] for line in (EVAL / "queries.jsonl").read_text("utf-8").splitlines() if line
    ]
    options = Settings()

    def texts(corpus: Corpus) -> list[str]:
        return [inject(memory, state, q, options, corpus=corpus).text for q in queries]

    load(memory, state)  # built and stored
    names = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    first, second, third = (memory / n for n in names[:3])
    first.write_text(first.read_text("utf-8") + "\nA late addition about quarterly okr reviews.\n", "utf-8")
    second.rename(memory / "project_renamed_note.md")
    third.unlink()
    shutil.copy(memory / names[4], memory / "project_copy_of_a_note.md")
    os.utime(memory / names[5])
    cached = load(memory, state)
    assert contents(cached) == contents(load(memory, state, use_cache=False))
    assert texts(cached) == texts(load(memory, state, use_cache=False))


def test_a_warm_call_reads_no_file_and_a_change_reads_only_that_file(dance: MemoryStore) -> None:
    _, read = opened(dance)
    assert sorted(read) == sorted(DANCE)
    _, read = opened(dance)
    assert read == []
    path = dance.memory_dir / "reference_competition_rules.md"
    path.write_text(path.read_text().replace("kerfuffle", "brouhaha"))
    corpus, read = opened(dance)
    assert read == ["reference_competition_rules.md"]
    assert [h.file for h in search(corpus, "brouhaha trophy").hits] == [path.name]
    assert search(corpus, "kerfuffle trophy").hits == ()


def test_a_touch_changes_the_stamp_but_tokenises_nothing(dance: MemoryStore) -> None:
    opened(dance)
    path = dance.memory_dir / "project_studio_opening.md"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 86_400 * 10**9))
    corpus, read = opened(dance)
    assert read == []
    entry = next(e for e in corpus.entries() if e.file == path.name)
    assert entry.mtime == path.stat().st_mtime_ns / 1e9  # the freshness label follows the stat
    assert contents(corpus) == contents(fresh(dance))


def test_edits_creates_deletes_and_renames_are_followed(
    dance: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "_ROWS_AT_ONCE", 3)  # each change's term rows in many parts

    def found(query: str) -> list[str]:
        return [h.file for h in search(load(dance.memory_dir, dance.state_dir), query).hits]

    assert found("kerfuffle trophy") == ["reference_competition_rules.md"]
    path = dance.memory_dir / "reference_competition_rules.md"
    path.write_text(path.read_text().replace("kerfuffle", "brouhaha"))
    assert found("kerfuffle trophy") == [] and found("brouhaha trophy") == [path.name]
    os.rename(path, dance.memory_dir / "reference_rules.md")
    assert found("brouhaha trophy") == ["reference_rules.md"]
    (dance.memory_dir / "project_new.md").write_text("---\ndescription: zither lessons\n---\n\nzither\n")
    assert found("zither lessons") == ["project_new.md"]
    (dance.memory_dir / "project_new.md").unlink()
    assert found("zither lessons") == []
    (dance.memory_dir / "project_broken.md").write_text("---\ndescription: [unclosed\n---\nzither\n")
    assert found("zither lessons") == []  # not a memory: listed, never indexed
    assert contents(load(dance.memory_dir, dance.state_dir)) == contents(fresh(dance))


def test_postings_added_later_are_parts_of_a_term_merged_at_the_limit(
    dance: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that only adds postings to a term writes them as one more part (the row is not
    rewritten); at `MAX_PARTS` the parts are merged into one; the postings read are always
    those of a fresh build."""
    monkeypatch.setattr(cache, "MAX_PARTS", 3)
    parts = []
    for i in range(7):
        (dance.memory_dir / f"project_zither_{i}.md").write_text(
            f"---\ndescription: zither lesson {i}\n---\n\nzither practice {i}\n"
        )
        snapshot = cache.open_index(dance.memory_dir, dance.state_dir, index_file)
        parts.append(snapshot.conn.execute("SELECT count(*) FROM terms WHERE term = 'zither'").fetchone()[0])
        corpus = Corpus(snapshot)
        assert contents(corpus) == contents(fresh(dance))
        assert [h.file for h in search(corpus, "zither practice").hits][:1] != []
    assert parts == [1, 2, 3, 1, 2, 3, 1]


def test_a_large_build_reads_in_worker_processes_with_the_same_result(
    dance: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(30):
        (dance.memory_dir / f"project_extra_{i}.md").write_text(
            f"---\ndescription: extra note {i} 部署 回滚\n---\n\nparagraph {i} about rollback\n\n第二段 {i}\n"
        )
    expected = contents(fresh(dance))
    monkeypatch.setattr(cache, "PARALLEL_FROM", 5)
    corpus = load(dance.memory_dir, dance.state_dir)
    assert contents(corpus) == expected


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["create", "edit", "delete", "rename", "touch", "break"]),
        st.integers(0, 5),
        st.lists(
            st.sampled_from(["alpha", "beta", "gamma", "部署", "回滚", "delta", "epsilon"]), max_size=12
        ),
    ),
    max_size=12,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=OPERATIONS)
def test_any_sequence_of_changes_leaves_the_index_a_fresh_build_would(
    tmp_path: Path, steps: list[Any]
) -> None:
    folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
    store = make(folder, {"project_seed.md": "---\ndescription: seed alpha\n---\n\nalpha beta\n"})
    load(store.memory_dir, store.state_dir)
    for operation, slot, words in steps:
        path = store.memory_dir / f"project_n{slot}.md"
        text = " ".join(words)
        body = "\n\n".join(" ".join(words[i : i + 3]) for i in range(0, len(words), 3))
        if operation in ("create", "edit"):
            path.write_text(f"---\ndescription: {text}\n---\n\n{body}\n", "utf-8")
        elif operation == "break":
            path.write_text("---\ndescription: [\n---\n", "utf-8")
        elif path.exists() and operation == "delete":
            path.unlink()
        elif path.exists() and operation == "rename":
            path.rename(store.memory_dir / f"project_n{(slot + 1) % 6}.md")
        elif path.exists() and operation == "touch":
            os.utime(path, ns=(1, path.stat().st_mtime_ns + 10**9))
        cached = load(store.memory_dir, store.state_dir)
        assert cached.repaired == ""  # kept up to date, never found damaged and built again
    assert contents(cached if steps else load(store.memory_dir, store.state_dir)) == contents(fresh(store))


@pytest.mark.parametrize("damage", ["garbage", "truncate", "format", "arrays", "slices"])
def test_a_damaged_index_is_rebuilt_not_trusted(
    dance: MemoryStore, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [search(fresh(dance), q) for q in QUERIES]
    monkeypatch.setattr(cache, "SLICE", 4)  # several slices to each array
    load(dance.memory_dir, dance.state_dir).close()
    db = dance.state_dir / "cache" / cache.db_name(dance.memory_dir)
    if damage == "garbage":
        db.write_bytes(b"not a database at all" * 100)
    elif damage == "truncate":
        db.write_bytes(db.read_bytes()[:4096])
    else:
        with sqlite3.connect(db) as conn:
            if damage == "format":
                conn.execute("UPDATE meta SET value = 99 WHERE key = 'format'")
            elif damage == "arrays":
                conn.execute("UPDATE arrays SET data = x'010203' WHERE name = 'paragraph_owners'")
            else:  # the first slice numbered where none belongs; the rest as they were
                conn.execute("UPDATE arrays SET slice = -1 WHERE name = 'paragraph_owners' AND slice = 0")
        conn.close()
    corpus, read = opened(dance)
    assert sorted(read) == sorted(DANCE)  # rebuilt from the files
    assert [search(corpus, q) for q in QUERIES] == expected
    assert contents(corpus) == contents(fresh(dance))


def test_an_unwritable_state_dir_moves_the_cache_and_changes_no_result(
    dance: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [search(fresh(dance), q) for q in QUERIES]
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state dir should be")
    corpus = load(dance.memory_dir, blocked / "state")
    assert [search(corpus, q) for q in QUERIES] == expected
    assert (tmp_path / "home" / ".cache" / "sagemem" / cache.db_name(dance.memory_dir)).is_file()
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked / "cache"))  # nowhere to write at all
    corpus = load(dance.memory_dir, blocked / "state")
    assert [search(corpus, q) for q in QUERIES] == expected


WORKER = """
import sys
from pathlib import Path
from sagemem.search.corpus import load
from sagemem.search.retrieve import search
memory, state, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
for i in range(rounds):
    if sys.argv[4] == "writer":
        (memory / f"project_w{i % 7}.md").write_text(
            f"---\\ndescription: writer note {i} zither{i}\\n---\\n\\nround {i} body zither{i}\\n"
        )
        if i % 5 == 4:
            (memory / f"project_w{(i + 3) % 7}.md").unlink(missing_ok=True)
    load(memory, state)
print("ok")
"""


def test_concurrent_updaters_leave_a_consistent_index(dance: MemoryStore, tmp_path: Path) -> None:
    """Four processes refresh the same index while one of them keeps changing files."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    args = [str(dance.memory_dir), str(dance.state_dir), "25"]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args, "writer" if i == 0 else "reader"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert out.strip() == "ok"
    assert contents(load(dance.memory_dir, dance.state_dir)) == contents(fresh(dance))


def test_one_odd_file_is_left_out_and_the_index_is_kept(dance: MemoryStore) -> None:
    """A file the YAML parser chokes on (a 5,000-digit number) or cannot read is not a
    reason to throw the index away."""
    opened(dance)
    (dance.memory_dir / "project_odd.md").write_text(f"---\nname: {'1' * 5000}\n---\nbody\n")
    corpus, read = opened(dance)
    assert read == ["project_odd.md"]
    assert [h.file for h in search(corpus, "kerfuffle trophy").hits] == ["reference_competition_rules.md"]
    _, read = opened(dance)
    assert read == []  # stored as "not a memory", not retried on every call


def test_a_build_where_worker_processes_cannot_start_reads_in_process(
    dance: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import concurrent.futures

    class Forbidden(concurrent.futures.ProcessPoolExecutor):
        def map(self, *args: Any, **kwargs: Any) -> Any:
            raise PermissionError("process creation is not allowed here")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Forbidden)
    monkeypatch.setattr(cache, "PARALLEL_FROM", 2)
    expected = contents(fresh(dance))
    assert contents(load(dance.memory_dir, dance.state_dir)) == expected
    assert (
        dance.state_dir / "cache" / cache.db_name(dance.memory_dir)
    ).is_file()  # built in the state dir all the same


def test_another_versions_index_and_a_planted_link_are_left_alone(dance: MemoryStore, tmp_path: Path) -> None:
    folder = dance.state_dir / "cache"
    folder.mkdir(parents=True, exist_ok=True)
    other = folder / "index-v3.sqlite"
    other.write_bytes(b"another sagemem version's index")
    elsewhere = tmp_path / "elsewhere.db"
    (folder / cache.db_name(dance.memory_dir)).symlink_to(elsewhere)  # as a cloned repository could ship it
    expected = [search(fresh(dance), q) for q in QUERIES]
    assert [search(load(dance.memory_dir, dance.state_dir), q) for q in QUERIES] == expected
    assert other.read_bytes() == b"another sagemem version's index"
    assert not elsewhere.exists()  # nothing was written through the link


def test_directories_sharing_a_state_dir_never_share_an_index(tmp_path: Path) -> None:
    """SAGEMEM_STATE_DIR set once for several projects: each keeps its own index, even where
    they hold files of the same name."""
    state = tmp_path / "state"
    one = make(tmp_path / "one", {"project_notes.md": "---\ndescription: zither lessons\n---\n\nzither\n"})
    two = make(tmp_path / "two", {"project_notes.md": "---\ndescription: oboe lessons\n---\n\noboe\n"})
    for _ in range(2):
        for store, word in ((one, "zither"), (two, "oboe")):
            hits = search(load(store.memory_dir, state), f"{word} lessons").hits
            assert [h.description for h in hits] == [f"{word} lessons"]


@pytest.mark.parametrize("damage", [b"\x01\x02\x03", (10**6).to_bytes(4, "little") * 2])
def test_postings_found_damaged_by_a_query_are_rebuilt(dance: MemoryStore, damage: bytes) -> None:
    """A blob SQLite cannot know is wrong (cut short, or naming a document that does not exist)
    is noticed when a query reads it: the index is built again, the answer is right."""
    expected = [h.file for h in dance.search("kerfuffle trophy").hits]
    db = dance.state_dir / "cache" / cache.db_name(dance.memory_dir)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE terms SET paragraphs = ? WHERE term = 'kerfuffl' OR term = 'kerfuffle'", (damage,)
        )
        assert conn.total_changes
    conn.close()
    assert [h.file for h in dance.search("kerfuffle trophy").hits] == expected
    injected = dance.inject("kerfuffle trophy")
    assert [s.file for s in injected.snippets] == expected


@pytest.mark.parametrize(
    ("column", "damage"), [("terms", '{"a": 1, "b": 2}'), ("terms", "[1, 2]"), ("pids", b"\x01\x02\x03")]
)
def test_a_file_row_found_damaged_by_a_change_rebuilds(dance: MemoryStore, column: str, damage: Any) -> None:
    """What a row keeps to take a file's postings out again (its terms, its paragraph ids) is
    checked when the file changes: a row no sagemem wrote gets the index built again."""
    dance.search("kerfuffle trophy")
    db = dance.state_dir / "cache" / cache.db_name(dance.memory_dir)
    with sqlite3.connect(db) as conn:
        conn.execute(
            f"UPDATE files SET {column} = ? WHERE name = 'reference_competition_rules.md'",  # noqa: S608
            (damage,),
        )
        assert conn.total_changes
    conn.close()
    path = dance.memory_dir / "reference_competition_rules.md"
    path.write_text(path.read_text().replace("kerfuffle", "brouhaha"))
    corpus = load(dance.memory_dir, dance.state_dir)
    assert corpus.repaired
    assert [h.file for h in search(corpus, "brouhaha trophy").hits] == [path.name]
    assert contents(corpus) == contents(fresh(dance))


def test_a_call_with_a_deadline_indexes_what_it_can_and_the_next_goes_on(tmp_path: Path) -> None:
    """The prompt hook's budget: past its deadline a call answers from what is indexed, at
    least one file further each time, and ends where a build without a deadline ends."""
    files = {
        f"project_zh{n}.md": f"---\ndescription: 部署说明 {n}\n---\n\n上线步骤 第{n}条\n" for n in range(5)
    }
    store = make(tmp_path / "mem", files)
    left = []
    for _ in range(10):
        corpus = load(store.memory_dir, store.state_dir, deadline=time.monotonic() - 1)  # passed already
        left.append(corpus.pending)
        corpus.close()
        if not left[-1]:
            break
    assert left == [4, 3, 2, 1, 0]
    assert contents(load(store.memory_dir, store.state_dir)) == contents(fresh(store))


def test_jieba_cuts_at_most_a_bounded_part_of_one_memory() -> None:
    from sagemem.search.tokenize import MAX_SEGMENTED_CHARS, document_tokens

    text = "部署上线回滚" * (MAX_SEGMENTED_CHARS // 3)
    whole, paired = document_tokens(text), document_tokens(text, words=0)
    assert set(paired) <= set(whole) and "部署" in paired  # the pairs are always there
    assert len(whole) - len(paired) < len(document_tokens(text[:MAX_SEGMENTED_CHARS]))


def test_a_query_reads_the_slices_its_terms_name_and_a_change_writes_the_slices_it_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-id arrays cost a query what its terms' postings name, not the directory's size:
    with slices of 4 ids, a word one memory holds reads one slice per array."""
    files = {
        f"project_n{n:02d}.md": f"---\ndescription: note {n} word{n}\n---\n\nfirst word{n}\n\nsecond {n}\n"
        for n in range(40)
    }
    store = make(tmp_path / "mem", files)
    expected = contents(fresh(store))
    wanted = [h.file for h in search(fresh(store), "word17 second").hits]
    monkeypatch.setattr(cache, "SLICE", 4)
    load(store.memory_dir, store.state_dir).close()  # built with slices of 4 ids

    statements: list[str] = []
    corpus = load(store.memory_dir, store.state_dir)
    corpus.connection.set_trace_callback(statements.append)
    assert [h.file for h in search(corpus, "word17").hits] == ["project_n17.md"]
    reads = [s for s in statements if "FROM arrays" in s]
    # one slice of description lengths; one of each paragraph array
    assert len(reads) == 5 and all(s.rstrip().endswith(")") and "," not in s.split("IN (")[1] for s in reads)
    assert [h.file for h in search(corpus, "word17 second").hits] == wanted  # more slices, same answer
    assert contents(corpus) == expected
    corpus.close()

    (store.memory_dir / "project_n39.md").write_text("---\ndescription: note 39 changed\n---\n\nnew text\n")
    db = store.state_dir / "cache" / cache.db_name(store.memory_dir)
    with sqlite3.connect(db) as conn:
        before = dict(((n, i), d) for n, i, d in conn.execute("SELECT name, slice, data FROM arrays"))
    conn.close()
    corpus = load(store.memory_dir, store.state_dir)
    corpus.close()
    with sqlite3.connect(db) as conn:
        after = dict(((n, i), d) for n, i, d in conn.execute("SELECT name, slice, data FROM arrays"))
    conn.close()
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    assert changed and len(changed) < len(before) / 4  # the last ids' slices, not all
    assert contents(load(store.memory_dir, store.state_dir)) == contents(fresh(store))
