"""What the server tells a model about itself and each tool, in one place."""

SERVER_INSTRUCTIONS = """\
Long-term memory for this conversation and the user's other conversations.
Before answering, call get_context for the thread and put its system_text and messages into your context.
After each exchange, call append_messages with the new user and assistant messages.
Use recall to read older raw messages, list threads, or search everything the user has said.
Keep stable facts about the user in working memory (get_working_memory / update_working_memory)."""

APPEND_MESSAGES = """\
Store new messages of a conversation thread. Call it after every user message and every assistant reply \
(tool calls and results included), in order. Each message has a role (user, assistant, system, tool), content \
(a string, or a list of parts: text, tool-call, tool-result, reasoning, image, file), and optionally an id and an \
ISO-8601 created_at. Sending the same id again is harmless (it is skipped and counted), so retry freely after a \
timeout. The thread is created on its first message; a thread belongs to one resource (user or project) for life. \
Returns how many were stored and the memory status; it never waits for a model."""

GET_CONTEXT = """\
Get what you should know before replying in a thread: system_text (memory of earlier parts of the conversation, \
the current task, working memory) to place in your system context, and the most recent raw messages that fit \
max_tokens, oldest first. Call it before each reply. status shows how full the message and observation windows \
are. Older messages that do not fit can be read with recall."""

RECALL = """\
Look back through raw history. mode='messages' pages through a thread: from its start (anchor='start') or end \
(anchor='end'), or from a message id given as cursor (page=1 forward, page=-1 backward); target_thread_id reads \
another thread of the same user. detail='low' shows every part clipped with a hint to read more; detail='high' \
shows one part whole (continue with part_index and char_offset as the result says). part_type and tool_name filter \
parts. mode='threads' lists the user's threads, newest first (before/after filter by creation date). mode='search' \
finds messages matching query words across the user's threads (scope='thread' for this thread only); use a \
result's message_id as cursor to read around it."""

GET_WORKING_MEMORY = """\
Read the working memory: a small persistent note (Markdown) or JSON object about the user or this task, shared \
by all of the user's threads unless configured per thread. It is also included in get_context's system_text."""

UPDATE_WORKING_MEMORY = """\
Update the working memory when you learn something durable (a name, a preference, a goal, a decision). In \
template (Markdown) mode send the complete updated Markdown: it replaces the old note, so keep what is still true. \
In schema mode send only the changed fields as a JSON object: objects merge, arrays are replaced, null deletes a \
key, and the result must match the schema. Invalid updates are refused with the reason and change nothing."""

UPDATE_THREAD = """\
Rename a thread or change its metadata (keys given are set; a null value removes a key). A title set here is \
pinned: automatic titling will not change it."""

DELETE_THREAD = """\
Delete a thread for good: its messages, search index entries, observations and thread working memory. Nothing of \
it can be found afterwards. This cannot be undone."""

OBSERVE = """\
Turn the thread's unobserved messages into observations now, instead of waiting for the token threshold \
(this normally happens on its own). Optional instruction adds guidance for this run. Reports progress while the \
model works; a model failure changes nothing and the messages stay unobserved."""

REFLECT = """\
Condense the thread's observation log now into a shorter new generation (this normally happens on its own when \
the log passes its threshold; earlier generations stay readable). Optional instruction says what to keep."""
