"""The one neutralising step for text we did not write, and the blocks we hand a model or the agent.

Observation text comes from a model that read the conversation; a message, a working memory
note, a thread title or a project's folder name comes from anyone. Each could carry
`</observations><current-task>...` and end one of our blocks early, writing instructions of its
own into the agent's context or the Observer's prompt. So every block of such text is built by
`block` (or, around blocks we built, `fence`), and every foreign text inside passes `neutralise`:

1. it is normalised as a model reads it: every character whose compatibility form (NFKC) is
   made of ASCII letters and the punctuation tags are written with is replaced by that form (a
   fullwidth `＜／ｏｂｓｅｒｖａｔｉｏｎｓ＞` is `</observations>`, a mathematical `𝐬𝐲𝐬𝐭𝐞𝐦` is
   `system`, the ligature `ﬆ` is `st`; an ellipsis, a superscript or Chinese punctuation stays as
   written), and the characters a reader does not see are removed: Unicode TAG characters
   (U+E0000-E007F, which carry whole instructions invisibly), bidirectional embeddings,
   overrides, isolates and marks, zero-width spaces, word joiners, byte-order marks, soft
   hyphens, and the zero-width joiners and variation selectors that sit beside an ASCII character
   (where they can split a tag; between emoji or in Persian they stay);
2. then every tag, anywhere (ours, `<system...>`, an extractor's, anyone's: a tag list would miss the
   next one), and the chat templates' control tokens (`<|im_start|>`, `<|endoftext|>`,
   `<|start_header_id|>`, `[INST]`, `<<SYS>>`, `<s>`, `<start_of_turn>`, ...) get a look-alike `‹` for
   their `<` (or `[`), which no parser or template reads as a tag and a reader still understands
   (`‹b>bold‹/b>`; `a < b` and `2<3` are no tags).

What we stored is not changed: this is done on the way out, each time. A recalled message is read
whole, as written, outside our blocks: `neutralise_inline` makes only our tags, `<system...>` tags
and control tokens inert there, so a file's code stays code. `defuse` is the narrow form for a fence
around text we composed ourselves (our own `<thread>` sections inside): only the fence's own tag is
neutralised there.
"""

from __future__ import annotations

import re
import string
import unicodedata

# Every tag our blocks are written in: `block` and `fence` refuse another, so a new block's tag is
# neutralised in every foreign text the day it is added (tests/test_neutralise.py renders every block).
SECTION_TAGS = (
    "observations",
    "current-task",
    "suggested-response",
    "thread-title",
    "working-memory",
    "working_memory",
    "schema",
    "other-conversations",
    "other-conversation",
    "system-reminder",
    "thread",
    "extracted",
    "conversation",
    "previous-observations",
    "memory-log",
    "edits",
    "user-memory",
    "archive",
    "observer-rules",
)
LOOK_ALIKE = "‹"

# Never seen by a reader: TAG characters, bidirectional controls and marks, zero-width spaces and
# joiners, word joiner and invisible operators, byte-order mark, soft hyphen, Mongolian vowel
# separator, interlinear annotation marks.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)
# Joiners and variation selectors have a use between two non-ASCII characters (an emoji sequence, a
# Persian word); beside an ASCII character they can only split something (a keycap's 1️⃣ keeps its own,
# an emoji its selector before a space).
_BESIDE_ASCII = re.compile(
    r"(?<![^\x00-\x7f])[\u200c\u200d]|[\u200c\u200d](?![^\x00-\x7f])"
    r"|(?<=[\x00-\x7f])(?<![0-9#*])[\ufe00-\ufe0f]|[\ufe00-\ufe0f](?=[A-Za-z<>/|\[\]!?])"
)
# The control tokens of chat templates: ChatML, Llama 3, Phi, DeepSeek, harmony (`<|...|>`), Llama 2
# and Mistral (`[INST]`, `<<SYS>>`, `<s>`, `[SYSTEM_PROMPT]`, ...), Gemma (`<start_of_turn>`), and the
# reasoning models' `<think>`.
_CONTROL = (
    r"<\|[^\n<>|]{1,64}\|>"
    r"|<</?SYS>>"
    r"|</?(?:s|bos|eos|pad|start_of_turn|end_of_turn|think|tool_call|tool_response)>"
    r"|\[/?(?:INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT|THINK)\]"
)
_JOINERS = frozenset("\u200c\u200d" + "".join(chr(c) for c in range(0xFE00, 0xFE10)))
# Any tag, anywhere: `<` (or `</`) then a name (or `!`, `?`); spaced out (`< /x >`) only when a `>`
# closes it on the line, so that `a < b` stays a comparison.
_TAG = r"<(?=/?[A-Za-z!?]|\s*/?\s*[A-Za-z!?][^<>\n]{0,80}>)\s*(?P<slash>/?)\s*(?P<name>[A-Za-z!?])"
_ANY = re.compile(rf"{_TAG}|(?P<control>{_CONTROL})")
# For text read whole as written (recall): only our tags, `<system...>` tags and control tokens.
_NAMES = "|".join(map(re.escape, SECTION_TAGS))
_OURS = re.compile(rf"<\s*(?P<slash>/?)\s*(?P<name>(?:{_NAMES})\b|system)|(?P<control>{_CONTROL})", re.IGNORECASE)


def _inert(match: re.Match[str]) -> str:
    control = match.group("control")
    if control is None:
        return f"{LOOK_ALIKE}{match.group('slash')}{match.group('name')}"
    if control.startswith("<<"):  # <<SYS>>: both of its brackets
        return LOOK_ALIKE * 2 + control[2:]
    return LOOK_ALIKE + control[1:]


_TAG_CHARS = frozenset(string.ascii_letters + "<>/|[]_-!?=")
_FOLDED: dict[str, str] = {}  # a character seen before -> what it is replaced by


def _fold(char: str) -> str:
    if char not in _FOLDED:
        form = unicodedata.normalize("NFKC", char)
        if _INVISIBLE.match(char):
            form = ""
        elif not form or not set(form) <= _TAG_CHARS:
            form = char
        _FOLDED[char] = form
    return _FOLDED[char]


def normalise(text: str) -> str:
    """`text` as a model reads it, with nothing that spells a tag another way (the module's 1)."""
    if text.isascii():
        return text
    table = {ord(c): form for c in set(text) if not c.isascii() and (form := _fold(c)) != c}
    if table:
        text = text.translate(table)
    return _BESIDE_ASCII.sub("", text) if _JOINERS.intersection(text) else text


def neutralise(text: str) -> str:
    """`text` normalised, with every tag (ours, `<system...>`, an extractor's, anyone's) and every
    chat-template token made inert."""
    return _ANY.sub(_inert, normalise(text))


def neutralise_inline(text: str) -> str:
    """`text` normalised, with our tags, `<system...>` tags and chat-template tokens made inert, and
    other markup as written: for text read whole as it was written, outside our blocks (a recalled
    message: a file's code stays code)."""
    return _OURS.sub(_inert, normalise(text))


def defuse(text: str, tag: str) -> str:
    """Only `tag` made inert: for a fence around text whose parts were neutralised already."""
    return re.sub(rf"<\s*(/?)\s*({re.escape(tag)})\b", rf"{LOOK_ALIKE}\1\2", text, flags=re.IGNORECASE)


def block(tag: str, text: str, attributes: str = "", *, extractor: bool = False) -> str:
    """One of our blocks around text we did not write: `<tag attributes>`, the text neutralised,
    `</tag>`. `extractor`: the tag is an extractor's slug (the configuration checks those)."""
    if not extractor:
        _declared(tag)
    return f"<{tag}{attributes}>\n{neutralise(text).strip(chr(10))}\n</{tag}>"


def fence(tag: str, composed: str, attributes: str = "") -> str:
    """One of our blocks around text we composed of neutralised parts and blocks of our own (the log's
    `<thread>` sections, the other conversations): only the fence's own tag is made inert inside."""
    _declared(tag)
    return f"<{tag}{attributes}>\n{defuse(composed, tag).strip(chr(10))}\n</{tag}>"


def _declared(tag: str) -> None:
    if tag not in SECTION_TAGS:
        raise ValueError(f"<{tag}> is not one of our section tags (om_mcp/neutral.py: SECTION_TAGS)")
