"""What every settings section shares: the base model and the provider-name field types."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from deepsearcher.config.registry import (
    AGENTS,
    CHAT_MODELS,
    EMBEDDERS,
    STORES,
    WEB_SEARCH_PROVIDERS,
)

# A provider setting is a plain string checked against its registry, so adding a provider to
# the registry is all it takes for the setting to accept it.
EmbedderName = Annotated[str, AfterValidator(EMBEDDERS.check)]
ChatModelName = Annotated[str, AfterValidator(CHAT_MODELS.check)]
StoreName = Annotated[str, AfterValidator(STORES.check)]
AgentName = Annotated[str, AfterValidator(AGENTS.check)]
WebSearchName = Annotated[str, AfterValidator(WEB_SEARCH_PROVIDERS.check)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
