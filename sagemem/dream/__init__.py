"""`sagemem dream`: opt-in consolidation of a memory directory by a model (docs/maintenance.md).

`run` drives the model through the tools (`tools`), `record` keeps the manifest, the bytes
replaced and the lock, `report` writes what a person reads, `model` reaches the endpoint,
`prompt` holds what the model is told.
"""

from .record import DreamBusy
from .run import apply_proposals, dream, rollback, runs, show, summaries

__all__ = ["DreamBusy", "apply_proposals", "dream", "rollback", "runs", "show", "summaries"]
