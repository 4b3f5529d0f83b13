"""The `[observational_memory.budget]` section: spend caps for observation and reflection together.

    [observational_memory.budget]
    daily_usd = 0.50          # dollars per UTC day, priced from litellm's offline cost map
    monthly_tokens = 2000000  # tokens (in + out) per UTC month, for any backend, priced or not
    price_per_million_input = 0.15   # dollars, for a model litellm cannot price (a local one,
    price_per_million_output = 0.60  # MCP sampling): needed with a *_usd cap on such a model

Unset means no cap. A value that is not a positive number stops start-up naming the key. How a
cap holds (a call's estimate reserved before it, settled after) is docs/budget.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    daily_usd: float | None = Field(None, description="dollars per UTC day")
    monthly_usd: float | None = Field(None, description="dollars per UTC month")
    daily_tokens: int | None = Field(None, description="model tokens (in + out) per UTC day")
    monthly_tokens: int | None = Field(None, description="model tokens (in + out) per UTC month")
    price_per_million_input: float | None = Field(
        None, description="dollars per million input tokens, for models litellm's cost map cannot price"
    )
    price_per_million_output: float | None = Field(
        None, description="dollars per million output tokens, for models litellm's cost map cannot price"
    )

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

    @field_validator("price_per_million_input", "price_per_million_output", mode="before")
    @classmethod
    def _price(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ValueError(f"must be a number of dollars, 0 or more, got {value!r}")
        return value

    @model_validator(mode="after")
    def _both_prices(self) -> BudgetConfig:
        given = [self.price_per_million_input is not None, self.price_per_million_output is not None]
        if any(given) and not all(given):
            missing = "price_per_million_output" if given[0] else "price_per_million_input"
            raise ValueError(f"{missing} must be set too: a configured price has both sides")
        return self

    @property
    def price(self) -> tuple[float, float] | None:
        """The configured price, in dollars per token (input, output), or None."""
        if self.price_per_million_input is None or self.price_per_million_output is None:
            return None
        return self.price_per_million_input / 1e6, self.price_per_million_output / 1e6

    @property
    def dollars(self) -> bool:
        """Is a cap in dollars set (then every model must have a price)?"""
        return self.daily_usd is not None or self.monthly_usd is not None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.daily_usd, self.monthly_usd, self.daily_tokens, self.monthly_tokens))
