"""Host integrations: read what a coding agent host records (transcripts, hook
input) and turn it into om-mcp messages; render what a hook prints back.

Pure functions only: the hook command (`om-mcp hook <host>`) wires these to
the store and engine. The exception is `hosts.setup`, which edits a host's
config files for `om-mcp setup` (and nothing else).
"""
