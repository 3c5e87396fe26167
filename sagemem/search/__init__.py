"""Search: from a user's message to the text injected into the agent's prompt.

Tokens, BM25, the persisted index, two-stage retrieval, the per-session ledger, the injected
text, and the tools that measure them (`bench`, `eval`). It imports only the store.
"""
