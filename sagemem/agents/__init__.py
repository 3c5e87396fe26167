"""The doors to agents: harness hooks, `install` for each harness, the MCP server, the
DeepSeek Harness plugin, Claude Code's auto memory, and `doctor`. Front ends: the library
never imports them.
"""
