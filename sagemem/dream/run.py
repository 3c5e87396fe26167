"""A dream run: the model tidies the directory through the tools, behind the store's promises.

Report mode (the default) gives the model read tools and proposal tools: no byte of a memory
changes. Apply mode gives it write tools; a snapshot is taken before the first change. One
run at a time; the round and token limits end a runaway run; whatever happens, the manifest
and the report say what was done.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..memory_store import MemoryStore
from ..search.tokenize import has_cjk
from ..store.archive import ARCHIVE_DIR
from ..store.errors import SagememError
from ..store.files import MAX_ARCHIVED_BYTES
from ..store.memory import version_of
from ..store.names import name_key
from . import auto, prompt, record, report
from . import sessions as sessions_module
from .model import ChatModel, Endpoint, ModelError, arguments, endpoint
from .tools import Toolbox, clean, on_disk, replay


def dream(
    store: MemoryStore,
    *,
    apply: bool = False,
    model: str | None = None,
    base_url: str | None = None,
    max_rounds: int | None = None,
    max_tokens: int | None = None,
    sessions: bool = False,
    today: dt.date | None = None,
    home: Path | None = None,
) -> dict[str, Any]:
    """Run the model over `store`; returns the manifest. The endpoint and model are checked
    before anything is written (`ModelError`); a second run meanwhile raises `DreamBusy`.
    With `sessions`, the model may search the harnesses' transcripts under `home`."""
    settings = store.settings()
    where = endpoint(settings, base_url=base_url, model=model)
    chat = ChatModel(where)
    checked = chat.check()
    round_limit = max_rounds or settings.dream_max_rounds
    token_limit = max_tokens or settings.dream_max_tokens
    mode = "apply" if apply else "report"
    run_id = record.new_id()
    with record.running(store.state_dir, run_id):
        manifest = _start(store, run_id, mode, where, checked)
        search = _session_search(store, home or Path.home()) if sessions else None
        toolbox = Toolbox(
            store,
            run_id,
            mode,
            _snapshotter(store, manifest),
            search,
            lambda box: _save(store, manifest, box),
        )
        manifest["sessions"] = sessions
        lang = settings.lang or _language(store)
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": prompt.system(lang, mode, str(today or dt.date.today()), str(store.memory_dir)),
            },
            {"role": "user", "content": prompt.START[lang]},
        ]
        try:
            while True:
                if manifest["rounds"] >= round_limit:
                    _stop(manifest, "stopped", f"round limit ({round_limit})")
                    break
                reply = chat.chat(messages, toolbox.schemas)
                manifest["rounds"] += 1
                manifest["tokens"] += reply.tokens
                messages.append(reply.message)
                for call in reply.calls:
                    try:
                        answer = toolbox.call(call.name, arguments(call))
                    except ModelError as exc:  # arguments that are no JSON object
                        toolbox.refuse(call.name, {}, str(exc))
                        answer = f"refused: {exc}"
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
                _keep(manifest, toolbox)
                if not reply.calls:
                    manifest["summary"] = clean(reply.content)
                    _stop(manifest, "done", "")
                    break
                if manifest["tokens"] >= token_limit:
                    _stop(manifest, "stopped", f"token limit ({token_limit})")
                    break
        except (SagememError, OSError) as exc:
            _stop(manifest, "failed", str(exc))
        except BaseException as exc:  # even an interrupt leaves the declaration of what was done
            _stop(manifest, "failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            _finish(store, manifest, toolbox)
    return manifest


def apply_proposals(store: MemoryStore, run_id: str) -> dict[str, Any]:
    """Carry out a report run's proposals, as reviewed, without asking the model again: a new
    run (mode apply, `source` the report run), snapshot first, each change guarded by the
    version its file had when it was proposed."""
    record.check_id(run_id)
    new_id = record.new_id()
    with record.running(store.state_dir, new_id):
        source = record.load(store.state_dir, run_id)  # under the lock: no second apply meanwhile
        if source["mode"] != "report":
            raise SagememError(f"{run_id}: not a report run; only a report run's proposals can be applied")
        if source.get("applied_by"):
            raise SagememError(f"{run_id}: its proposals were applied already, by run {source['applied_by']}")
        manifest = _start(store, new_id, "apply", None, True)
        manifest["source"] = run_id
        toolbox = Toolbox(
            store,
            new_id,
            "apply",
            _snapshotter(store, manifest),
            changed=lambda box: _save(store, manifest, box),
        )
        try:
            replay(toolbox, list(source["proposals"]))
            _stop(manifest, "done", "")
        except (SagememError, OSError) as exc:
            _stop(manifest, "failed", str(exc))
        finally:
            _finish(store, manifest, toolbox)
        if toolbox.changes:  # nothing carried out (all conflicts): it may be applied again later
            source["applied_by"] = new_id
            record.save(store.state_dir, source)
    return manifest


def rollback(store: MemoryStore, run_id: str, *, scope: str = "files") -> dict[str, Any]:
    """Undo a run, once (a second time is refused, nothing changed, unless the rollback left
    conflicts). `scope` is which parts, the command line's `--parts`. `files`: only what the
    run changed, from its manifest, newest change first; a file edited since the run is a
    conflict, left alone, and the rest is restored. `all`: the directory as it was before the
    run (its snapshot; memories made since go to `archive/`). Nothing is deleted; the present
    is snapshotted first."""
    if scope not in ("files", "all"):
        raise SagememError(f"scope must be 'files' or 'all' (got {scope!r})")
    record.check_id(run_id)
    with record.running(store.state_dir, f"rollback of {run_id}"):
        manifest = record.load(store.state_dir, run_id)  # under the lock: no rollback meanwhile
        done_before = record.rolled_back(manifest)
        if done_before:
            raise SagememError(
                f"{run_id}: rolled back already, at {done_before.get('at', '?')} (parts "
                f"{done_before.get('scope', '?')}); nothing was changed"
            )
        if scope == "all":
            if not manifest.get("snapshot"):
                raise SagememError(f"{run_id}: the run took no snapshot (it changed nothing)")
            outcome = store.rollback(manifest["snapshot"], scope="all")
            done: dict[str, Any] = {k: outcome[k] for k in ("restored", "retired", "kept", "protection")}
            done["conflicts"] = []
        else:
            if not manifest["changes"]:
                raise SagememError(f"{run_id}: the run changed nothing; there is nothing to roll back")
            protection = store.snapshot(label=f"before rolling back dream {run_id}", kind="protection")
            done = {"protection": protection.id, **_undo(store, run_id, manifest)}
        done.update(scope=scope, at=record.now())
        manifest.setdefault("rollbacks", []).append(done)
        record.save(store.state_dir, manifest)
        if manifest.get("source"):  # an apply run undone: its proposals may be applied again
            with contextlib.suppress(SagememError, OSError):
                source = record.load(store.state_dir, manifest["source"])
                if source.get("applied_by") == run_id:
                    source["applied_by"] = None
                    record.save(store.state_dir, source)
        _report(store, manifest)
    return done


def _undo(store: MemoryStore, run_id: str, manifest: dict[str, Any]) -> dict[str, list[str]]:
    writer = f"sagemem dream rollback {run_id}"
    restored: list[str] = []
    archived: list[str] = []
    left: list[tuple[str, str]] = []  # (file, why) left alone
    index = manifest.get("index") or {}
    # MEMORY.md goes back as it was before the run only if nobody edited it since.
    untouched = bool(index.get("after")) and record.sha256(store.index_bytes()) == index["after"]["sha256"]
    for change in reversed(manifest["changes"]):
        file, op = change["file"], change["op"]
        current = on_disk(store, file)
        try:
            if op in ("write", "create"):
                if current is None or record.sha256(current) != (change["after"] or {}).get("sha256"):
                    left.append((file, "changed after the run"))
                    continue
                if op == "write":
                    data = record.blob(store.state_dir, run_id, change["before_blob"])
                    store.put_back(file, data, expected_version=version_of(current), writer=writer)
                    restored.append(file)
                else:
                    store.archive(
                        file,
                        reason=f"made by dream {run_id}, rolled back",
                        expected_version=version_of(current),
                    )
                    archived.append(file)
            elif op == "archive":
                copy = on_disk(store, f"{ARCHIVE_DIR}/{file}", limit=MAX_ARCHIVED_BYTES)
                if current is not None:
                    left.append((file, "a live memory of that name exists"))
                elif copy is None or record.sha256(copy) != (change.get("archived") or {}).get("sha256"):
                    left.append((file, "its archived copy changed after the run"))
                else:
                    data = record.blob(store.state_dir, run_id, change["before_blob"])
                    back = store.restore(file)
                    if on_disk(store, back.file) != data:
                        store.put_back(back.file, data, expected_version=back.version, writer=writer)
                    restored.append(file)
        except (SagememError, OSError) as exc:
            left.append((file, str(exc)))
    if index.get("after") and not untouched:
        left.append(("MEMORY.md", "changed after the run; the lines of restored memories were refreshed"))
    elif untouched and index.get("before_blob"):
        data = record.blob(store.state_dir, run_id, index["before_blob"])
        if store.put_back_index(data, expected=store.index_bytes()):
            restored.append("MEMORY.md")
            # Memories made while the run went on get their line back (the old index never had it).
            there = {name_key(f) for f in index.get("files", [])}
            with contextlib.suppress(SagememError, OSError):
                for unlisted in store.check_index().unlisted:
                    if name_key(unlisted) not in there:
                        store.refresh_index_line(unlisted)
            for file, _ in left:
                with contextlib.suppress(SagememError, OSError):
                    store.refresh_index_line(file)
    return {"restored": restored, "archived": archived, "conflicts": [f"{f} ({why})" for f, why in left]}


def runs(store: MemoryStore) -> list[dict[str, Any]]:
    return record.listing(store.state_dir)


# What a listing shows of each run, besides how many changes, proposals and refusals it had.
_LISTED = "id mode status stop model started finished rounds tokens snapshot source applied_by".split()


def summaries(store: MemoryStore) -> list[dict[str, Any]]:
    """Every run, oldest first, as a listing shows it: what it was and how much it did. A run
    still `running` while no run holds the lock was cut short: it is `interrupted`. A run
    undone is `rolled back` (`rolled_back`: when), one whose rollback left conflicts `partly
    rolled back` (it may be rolled back again); `run_status` is how the run itself ended."""
    found = runs(store)
    cut_short = any(m["status"] == "running" for m in found) and not record.held(store.state_dir)
    listed = []
    for m in found:
        ended = "interrupted" if cut_short and m["status"] == "running" else m["status"]
        undone = record.rolled_back(m)
        status = "rolled back" if undone else "partly rolled back" if m.get("rollbacks") else ended
        listed.append(
            {
                **{key: m.get(key) for key in _LISTED},
                "status": status,
                "run_status": ended,
                "rolled_back": undone.get("at") if undone else None,
                **{key: len(m.get(key, [])) for key in ("changes", "proposals", "refused", "rollbacks")},
            }
        )
    return listed


def show(store: MemoryStore, run_id: str) -> dict[str, Any]:
    return record.load(store.state_dir, run_id)


def _start(
    store: MemoryStore, run_id: str, mode: str, where: Endpoint | None, checked: bool
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "schema": record.SCHEMA,
        "id": run_id,
        "mode": mode,
        "model": where.model if where else None,
        "base_url": where.base_url if where else None,
        "model_checked": checked,
        "memory_dir": str(store.memory_dir),
        "started": record.now(),
        "finished": None,
        "status": "running",
        "stop": "",
        "rounds": 0,
        "tokens": 0,
        "snapshot": None,
        "summary": "",
        "changes": [],
        "proposals": [],
        "refused": [],
        "audit_before": store.check().to_dict(),
        "audit_after": None,
    }
    record.save(store.state_dir, manifest)
    return manifest


def _snapshotter(store: MemoryStore, manifest: dict[str, Any]) -> Callable[[], None]:
    def take() -> None:
        made = store.snapshot(label=f"before dream {manifest['id']}", kind="auto")
        manifest["snapshot"] = made.id
        record.save(store.state_dir, manifest)

    return take


def _save(store: MemoryStore, manifest: dict[str, Any], toolbox: Toolbox) -> None:
    """The manifest as it stands, on disk: after every change, so that a run killed mid-way
    can still be rolled back."""
    _keep(manifest, toolbox)
    record.save(store.state_dir, manifest)


def _keep(manifest: dict[str, Any], toolbox: Toolbox) -> None:
    manifest["changes"] = toolbox.changes
    manifest["proposals"] = toolbox.proposals
    manifest["refused"] = toolbox.refused
    if toolbox.index is not None:  # the index lines the run's changes rewrote
        manifest["index"] = {**toolbox.index, "after": record.stamp(toolbox.store.index_bytes())}


def _stop(manifest: dict[str, Any], status: str, why: str) -> None:
    manifest["status"], manifest["stop"] = status, why


def _finish(store: MemoryStore, manifest: dict[str, Any], toolbox: Toolbox) -> None:
    """The declaration, whatever happened: the manifest first, then the report (a report
    that cannot be written is noted in the manifest, never a reason to lose it)."""
    _keep(manifest, toolbox)
    try:
        manifest["audit_after"] = store.check().to_dict()
    except (SagememError, OSError) as exc:
        manifest["audit_after"] = {"error": str(exc), "findings": [], "files": 0, "problems": 0}
    manifest["finished"] = record.now()
    record.save(store.state_dir, manifest)
    with contextlib.suppress(SagememError, OSError):
        auto.record_run(store.state_dir)
    _report(store, manifest)


def _report(store: MemoryStore, manifest: dict[str, Any]) -> None:
    try:
        report.write(store, manifest)
    except (SagememError, OSError) as exc:
        manifest["report_error"] = str(exc)
        record.save(store.state_dir, manifest)


def _session_search(store: MemoryStore, home: Path) -> Callable[[str], str]:
    """Search over the transcripts of this project (a project scope, `<root>/.sagemem/memory`),
    or of every project (any other directory)."""
    from ..store.native import claude_memory_dir

    root = store.memory_dir.parent.parent
    is_project = store.memory_dir.parent.name == ".sagemem" and root != home
    project = root if is_project else None  # `~/.sagemem/memory` is the user's, not a project's
    claude = claude_memory_dir(project, home, {"HOME": str(home)}).parent if project else None
    paths = sessions_module.transcripts(home, project, claude)
    return lambda query: sessions_module.search(paths, query)


def _language(store: MemoryStore) -> str:
    """The script of most descriptions: the prompt's language when no `lang` is set."""
    memories = store.scan().memories
    chinese = sum(1 for m in memories if has_cjk(m.description))
    return "zh" if memories and chinese * 2 > len(memories) else "en"
