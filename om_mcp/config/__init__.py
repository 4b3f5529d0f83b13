"""Configuration: one pydantic model, loaded from TOML, `OM_*` variables and flags.

Precedence: flags > environment > file > defaults.
"""

from om_mcp.config.budget import BudgetConfig
from om_mcp.config.extractors import Extractor
from om_mcp.config.loader import ConfigError, load_config
from om_mcp.config.memory import (
    HooksConfig,
    Limits,
    ObservationalMemoryConfig,
    ObservationConfig,
    OtherThreadsConfig,
    ReflectionConfig,
    RetrievalConfig,
    UserConfig,
)
from om_mcp.config.privacy import PrivacyConfig
from om_mcp.config.server import (
    AuthConfig,
    HttpConfig,
    OAuthConfig,
    ServerConfig,
    TokenEntry,
    check_https_url,
    hash_token,
    is_loopback_host,
)
from om_mcp.config.settings import Config
from om_mcp.config.working_memory import WorkingMemoryConfig

__all__ = [
    "AuthConfig",
    "BudgetConfig",
    "Config",
    "ConfigError",
    "HttpConfig",
    "TokenEntry",
    "check_https_url",
    "hash_token",
    "is_loopback_host",
    "Extractor",
    "HooksConfig",
    "Limits",
    "ObservationConfig",
    "OtherThreadsConfig",
    "UserConfig",
    "ObservationalMemoryConfig",
    "PrivacyConfig",
    "ReflectionConfig",
    "RetrievalConfig",
    "OAuthConfig",
    "ServerConfig",
    "WorkingMemoryConfig",
    "load_config",
]
