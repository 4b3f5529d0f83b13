"""The `[observational_memory.budget]` section: spend caps for observation and reflection together.

    [observational_memory.budget]
    daily_usd = 0.50          # dollars per UTC day, priced from litellm's offline cost map
    monthly_tokens = 2000000  # tokens (in + out) per UTC month, for any backend, priced or not

Unset means no cap. A value that is not a positive number stops start-up naming the key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    daily_usd: float | None = Field(None, description="dollars per UTC day")
    monthly_usd: float | None = Field(None, description="dollars per UTC month")
    daily_tokens: int | None = Field(None, description="model tokens (in + out) per UTC day")
    monthly_tokens: int | None = Field(None, description="model tokens (in + out) per UTC month")

    @field_validator("daily_usd", "monthly_usd", mode="before")
    @classmethod
    def _dollars(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value > 0):
            raise ValueError(f"must be a positive number of dollars, got {value!r}")
        return value

    @field_validator("daily_tokens", "monthly_tokens", mode="before")
    @classmethod
    def _tokens(cls, value: Any) -> Any:
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if value is not None and (isinstance(value, bool) or not whole or not value > 0):
            raise ValueError(f"must be a positive whole number of tokens, got {value!r}")
        return value

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.daily_usd, self.monthly_usd, self.daily_tokens, self.monthly_tokens))
