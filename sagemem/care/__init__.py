"""Care: looking after a memory directory over time.

Health checks, archive candidates, mechanical fixes, snapshots and rollback, secret purging
in kept copies. It imports the store and search (to verify the search index), nothing else.
"""
