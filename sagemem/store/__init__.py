"""The store: the memory directory on disk and every change a person or an agent asks of it.

Memory files and their format, names, MEMORY.md, safe file I/O, locks, the version guard
and its conflicts, archive and locks, the access ledger, secret refusal, and where the
directories and settings are. It imports nothing else of sagemem (docs/architecture.md).
This file imports nothing, so the hook pays only for the modules it uses.
"""
