"""What a model costs per token, offline, for the spend caps' estimates (engine/budget.py).

The prices are litellm's own offline cost map (the JSON file bundled with it, which is what
`litellm.completion_cost` reads with `LITELLM_LOCAL_MODEL_COST_MAP`), read without importing
litellm (a 2.5 s import). `claude-cli/<alias>` is priced as the Anthropic model the alias
names; MCP sampling runs whatever model the host picks, so it has no price here. A model
litellm cannot price needs `budget.price_per_million_input` / `_output` under a dollar cap.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAP_FILE = "model_prices_and_context_window_backup.json"
# The Claude Code CLI's short names (`claude-cli/haiku`) and the model each stands for today.
CLI_MODELS = {"haiku": "claude-haiku-4-5", "sonnet": "claude-sonnet-4-5", "opus": "claude-opus-4-5"}


@cache
def _price_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / MAP_FILE
        if path.is_file():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                log.warning("litellm's price map %s cannot be read: %s", path, error)
                return {}
            return loaded if isinstance(loaded, dict) else {}
    return {}


def names(model: str) -> list[str]:
    """The names litellm may list the model under: as given, then without its provider prefix."""
    if model.startswith("claude-cli/"):
        alias = model.split("/", 1)[1]
        return [CLI_MODELS.get(alias, alias)]
    if model == "sampling" or model.startswith("sampling/"):
        return []  # the host's model, whichever it is
    out = [model]
    if "/" in model:
        out += [model.split("/", 1)[1], model.rsplit("/", 1)[1]]
    return list(dict.fromkeys(out))


def per_token(model: str) -> tuple[float, float] | None:
    """(dollars per input token, per output token) from litellm's map, or None when it has no price."""
    table = _price_map()
    for name in names(model):
        entry = table.get(name)
        if isinstance(entry, dict):
            rates = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if all(isinstance(r, int | float) for r in rates):
                return float(rates[0]), float(rates[1])  # type: ignore[arg-type]
    return None
