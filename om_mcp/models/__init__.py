"""Models: the only place in om_mcp that calls an LLM.

Importing this package does not import litellm (a ~2.5 s import); that
happens on the first real call, in `litellm_client.load_litellm`. The config
types of a model choice live in `om_mcp.config.models` and are re-exported here.
"""

from typing import TYPE_CHECKING

from om_mcp.config.models import (
    AUTO,
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_MODEL,
    ByInputSize,
    CallPolicy,
    ModelChoice,
    ModelSettings,
    ModelTarget,
    effective_max_output_tokens,
    is_default_selection,
    map_model_name,
    normalize_choice,
    parse_model_choice,
)
from om_mcp.lazy import face
from om_mcp.models.base import Completion, Meter, ModelClient, Usage
from om_mcp.models.errors import (
    CapReached,
    ModelError,
    ModelSelectionError,
    ModelUnavailable,
    TransientModelError,
    UnusableAnswer,
    is_transient,
)
from om_mcp.models.sampler import NO_CLIENT, NoSampler, Sampler

# The router pulls in the breaker and its clients: imported when first used,
# so that reading the configuration does not pay for it.
__getattr__ = face(__name__, {"ModelRouter": "router"})

if TYPE_CHECKING:
    from om_mcp.models.router import ModelRouter


__all__ = [
    "NO_CLIENT",
    "AUTO",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_MODEL",
    "ByInputSize",
    "CallPolicy",
    "Completion",
    "ModelChoice",
    "ModelClient",
    "ModelError",
    "ModelRouter",
    "ModelSelectionError",
    "ModelSettings",
    "ModelTarget",
    "ModelUnavailable",
    "NoSampler",
    "Sampler",
    "CapReached",
    "Meter",
    "TransientModelError",
    "UnusableAnswer",
    "Usage",
    "effective_max_output_tokens",
    "is_default_selection",
    "is_transient",
    "map_model_name",
    "normalize_choice",
    "parse_model_choice",
]
