"""What the server tells a model about itself and each tool, in one place.

Read on every session by the model that uses us: each sentence says when to
call what, or how not to get it wrong.
"""

SERVER_INSTRUCTIONS = """\
Long-term memory across conversations.
- thread_id: one per conversation, stable for its whole life (use the host's conversation id if you have one; \
otherwise make one up at the start and reuse it). resource_id: the user or project that owns the thread; leave it \
out to use the default.
- Before replying: get_context, and put its system_text into your context.
- After each exchange: append_messages with user= and assistant= (or messages=[...] for tool calls).
- recall finds older messages, other threads, or searches everything (use distinctive words)."""

# `om-mcp serve --hooks` (the Claude Code plugin): the hooks store every turn and bring the memory in at
# session start, so an agent that also appended and fetched would store everything twice and pay for it.
SERVER_INSTRUCTIONS_HOOKS = """\
Long-term memory across conversations. This host's hooks record every conversation and put the memory of \
earlier sessions into your context at session start: do not call append_messages or get_context.
- recall finds older messages, other sessions, or searches everything (use distinctive words); pass the thread_id \
and resource_id that the session-start memory names.
- get_working_memory / update_working_memory: a short note about the user or project (same resource_id)."""

APPEND_MESSAGES = """\
Store a thread's newest messages in order: user="..." and/or assistant="...", or messages=[{role, content}] \
(content: text or typed parts). Re-sending is harmless: a message is stored once per id; without ids, a repeat of \
the thread's last messages is skipped. Never waits for a model."""

GET_CONTEXT = """\
Call before each reply: system_text (memory of earlier conversation, the current task, working memory) for your \
system context, and the thread's newest messages that fit max_tokens."""

RECALL = """\
Look back through raw history. mode="search" with a few distinctive words (names, numbers, rare terms): matches \
across the user's threads, a line each; cursor=<id> page=0 reads one with its neighbours. mode="messages" pages a \
thread (target_thread_id: another one) from a cursor (page=1 on, -1 back) or anchor="start"/"end"; detail="high" \
with part_index shows a part whole. mode="threads" lists threads. Each result ends with the call that continues it."""

GET_WORKING_MEMORY = """\
The working memory: a small Markdown note or JSON object about the user or task, shared by their threads \
(get_context includes it)."""

UPDATE_WORKING_MEMORY = """\
Save something durable (a name, preference, goal, decision). Markdown mode: send the whole note (it replaces the \
old one). Schema mode: send only the changed fields (merged; null deletes). An invalid update changes nothing."""

UPDATE_THREAD = """\
Rename a thread (title, then kept), set metadata keys (null removes one), correct an observation line \
(observation_id + text, kept as the user's word), or keep words the user asked you to remember (remember)."""

DELETE_THREAD = """\
Forget for good, no undo: the whole thread (its messages, search entries, observations, working memory), or only \
message_id, observation_id, or every message and observation holding match (a preview until confirm=true)."""

OBSERVE = """\
Turn the thread's unobserved messages into observations now (normally automatic at a threshold). A model failure \
changes nothing."""

REFLECT = """\
Condense the thread's observation log into a shorter generation now (normally automatic; old generations stay \
readable)."""

# Argument descriptions, kept short: they are read with every tools/list.
OBSERVATION_ID = "line or group id (observations resource)"
CORRECTED = "the corrected line"
REMEMBER = "what the user asked to remember, in their words"
# Prompts (prompts/list): what a user picks in a host, not what a model calls.
PROMPT_MEMORY = "What om-mcp remembers, to start a conversation with (a thread's memory, or the newest one's)"
PROMPT_REMEMBER = "Remember this, word for word (kept through every reflection)"
PROMPT_THREAD = "the conversation's id"
PROMPT_RESOURCE = "the user or project (default: yours)"
AS_OF = "ISO date or date-time: memory as it was then"
MATCH = "text to forget wherever stored"
THREAD_ID = "stable conversation id"
RESOURCE_ID = "owner (user/project); default: the thread's"
