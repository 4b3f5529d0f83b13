"""`om-mcp hook <host>`: record a coding agent's session as it happens, and give
the next session the project's memory.

Runs on every prompt and reply, so it is built to be quick and harmless:
plain `sqlite3` through the store's synchronous functions, no event loop, no
pydantic, no model, no MCP; every failure is one line in a log file and exit 0.
Observation itself runs in a live om-mcp process (a server, or a worker this
hook starts when none is running): see `background.py`.
"""
