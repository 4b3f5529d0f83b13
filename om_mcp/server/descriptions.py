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
Store the newest messages of a thread, in order. Simplest: user="..." and/or assistant="...". Or messages=[{role, \
content}], content a string or parts (text, tool-call, tool-result, reasoning, image, file). Re-sending is \
harmless: a message is stored once per id; without an id, messages that repeat the thread's last ones (same role \
and content, and created_at if given) are a re-send. Never waits for a model."""

GET_CONTEXT = """\
What to know before replying in a thread: system_text (memory of earlier conversation, current task, working \
memory) for your system context, and the newest raw messages that fit max_tokens. Call it before each reply."""

RECALL = """\
Look back through raw history. mode="search" with a few distinctive words (names, numbers, rare terms) lists \
matching messages across the user's threads, a line each: read those that matter by id, cursor=<id> page=0 (with \
the messages around it). mode="messages" pages a thread: from a message id as cursor (page=1 forward, page=-1 \
back), or anchor="start"/"end"; target_thread_id reads another thread. detail="high" with part_index shows \
one part whole. mode="threads" lists the user's threads. Each result ends with the call that continues it."""

GET_WORKING_MEMORY = """\
Read the working memory: a small note (Markdown) or JSON object about the user or task, shared by the user's \
threads. get_context already includes it."""

UPDATE_WORKING_MEMORY = """\
Save something durable (a name, preference, goal, decision). Markdown mode: send the complete note (it replaces \
the old one). Schema mode: send only changed fields as an object (merged; null deletes). Invalid updates are \
refused and change nothing."""

UPDATE_THREAD = """\
Rename a thread (the title is then kept), set metadata keys (null removes a key), correct an observation line \
(observation_id + text; kept as the user's word), or remember what the user asked you to, word for word (remember)."""

DELETE_THREAD = """\
Delete a thread for good: its messages, search entries, observations and thread working memory. With message_id, \
observation_id or match (the user's messages and observations holding it; a preview until confirm=true), forget \
only that. Cannot be undone."""

OBSERVE = """\
Turn the thread's unobserved messages into observations now (normally automatic at a token threshold). A model \
failure changes nothing."""

REFLECT = """\
Condense the thread's observation log now into a shorter generation (normally automatic; old generations stay \
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
THREAD_ID = "this conversation's id (stable for its life)"
RESOURCE_ID = "owner user/project; default: the thread's own"
