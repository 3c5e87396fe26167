"""sagemem: file-based Markdown memory for AI agents.

    >>> from sagemem import MemoryStore
    >>> store = MemoryStore("~/.sagemem/memory")        # doctest: +SKIP
    >>> memory = store.get("project_deploy_flow.md")     # doctest: +SKIP
    >>> store.update(memory.file, expected_version=memory.version, tags=["ci"])  # doctest: +SKIP

The names below are imported on first use, so that `import sagemem.<module>` on the hook
path pays only for what it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "MemoryStore": "store",
    "MemorySet": "memory_set",
    "Memory": "memory",
    "SagememError": "errors",
    "VersionConflict": "errors",
    "InvalidMemory": "errors",
    "InvalidName": "errors",
    "MemoryNotFound": "errors",
    "StoreNotFound": "errors",
}
__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from .errors import InvalidMemory as InvalidMemory
    from .errors import InvalidName as InvalidName
    from .errors import MemoryNotFound as MemoryNotFound
    from .errors import SagememError as SagememError
    from .errors import StoreNotFound as StoreNotFound
    from .errors import VersionConflict as VersionConflict
    from .memory import Memory as Memory
    from .memory_set import MemorySet as MemorySet
    from .store import MemoryStore as MemoryStore


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sagemem' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
