"""sagemem: file-based Markdown memory for AI agents.

    >>> from sagemem import MemoryStore
    >>> store = MemoryStore("~/.sagemem/memory")        # doctest: +SKIP
    >>> memory = store.get("project_deploy_flow.md")     # doctest: +SKIP
    >>> store.update(memory.file, expected_version=memory.version, tags=["ci"])  # doctest: +SKIP

The names below are imported on first use, so that `import sagemem.<module>` on the hook
path pays only for what it uses.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as in store/records.py, without its `collections`: the relay's path

if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "MemoryStore": "memory_store",
    "MemorySet": "memory_set",
    "Memory": "store.memory",
    "SagememError": "store.errors",
    "VersionConflict": "store.errors",
    "InvalidMemory": "store.errors",
    "InvalidName": "store.errors",
    "MemoryNotFound": "store.errors",
    "StoreNotFound": "store.errors",
}
__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from .memory_set import MemorySet as MemorySet
    from .memory_store import MemoryStore as MemoryStore
    from .store.errors import InvalidMemory as InvalidMemory
    from .store.errors import InvalidName as InvalidName
    from .store.errors import MemoryNotFound as MemoryNotFound
    from .store.errors import SagememError as SagememError
    from .store.errors import StoreNotFound as StoreNotFound
    from .store.errors import VersionConflict as VersionConflict
    from .store.memory import Memory as Memory


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sagemem' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
