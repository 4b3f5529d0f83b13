"""`RecallQuery`: one request to look back through raw history (the recall tool's arguments)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PartType = Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"]
# Items per page when the call names no limit. A search answers with an index (one short line a hit; the
# messages by id), and its top 10 already hold what the top 20 did on LoCoMo at half the tokens
# (benchmarks/search_lab.py --tokens).
DEFAULT_LIMIT = {"messages": 20, "threads": 20, "search": 10}


class RecallQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_id: str = Field(description="the current thread")
    mode: Literal["messages", "threads", "search"] = "messages"
    resource_id: str | None = None
    query: str | None = Field(None, description="search words (mode search)")
    cursor: str | None = Field(None, description="a message id to page from (a range's first or last id)")
    target_thread_id: str | None = Field(None, description="another thread of the same resource; 'current' = this one")
    anchor: Literal["start", "end"] = "start"
    page: int = Field(1, ge=-1000, le=1000, description="+N forward from the cursor, -N backward, 0 around it")
    limit: int | None = Field(None, ge=1, le=50, description="items per page (20; search 10)")
    detail: Literal["low", "high"] = "low"
    part_type: PartType | None = None
    tool_name: str | None = None
    part_index: int | None = Field(None, ge=0)
    char_offset: int = Field(0, ge=0)
    before: str | None = Field(None, description="threads created before this ISO date")
    after: str | None = Field(None, description="threads created after this ISO date")
    scope: Literal["thread", "resource"] = "resource"
    max_tokens: int | None = Field(None, ge=50, description="hard bound on the result's size")

    @property
    def size(self) -> int:
        """Items per page: the limit asked for, else the mode's default."""
        return self.limit or DEFAULT_LIMIT[self.mode]


class RecallOut(BaseModel):
    """One representation: the text the model reads, how many items, and how to go on."""

    mode: Literal["messages", "threads", "search"]
    text: str
    count: int = 0
    next: str | None = Field(None, description="the call that continues, when there is more")
    truncated: bool = False
