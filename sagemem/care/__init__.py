"""Care: looking after a memory directory over time.

Health checks, archive candidates, snapshots, and the kept copies `check` reads and
`purge-secrets` cleans; the facade runs fixes and rollbacks with them. It imports only the
store.
"""
