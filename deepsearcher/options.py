"""``QueryOptions``: the per-question knobs, one frozen object shared by the library, the CLI,
the HTTP server and the eval runner; ``LoadOptions``, the same for a load. ``None`` means "the configured value" (``query.*`` and
``web_search.enabled`` in Settings); an option an agent has no use for (``max_iter`` for the
naive agent) is accepted and has no effect. A value out of range is refused here, when the
object is made, so every front end (library, CLI, HTTP, MCP) reports it the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from deepsearcher.config import QuerySettings
from deepsearcher.errors import DeepSearcherError
from deepsearcher.filters import Filter

T = TypeVar("T")


def or_configured(value: T | None, configured: T) -> T:
    """The option when it was given, else the configured value (``None`` alone means unset)."""
    return configured if value is None else value


class UnknownOptionError(DeepSearcherError):
    default_hint = "check the option names"


class InvalidOptionError(DeepSearcherError):
    """A query option with a value outside what it accepts (``top_k=0``, an unknown agent)."""

    default_hint = "leave the option unset to use the configured value"

    def __init__(self, option: str, value: object, reason: str, hint: str | None = None) -> None:
        super().__init__(f"invalid option {option}={value!r}: {reason}", hint)
        # Apart, so a front end can word the error its own way and still name the option.
        self.option = option
        self.value = value
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:  # pickles (a worker process) with its fields
        return type(self), (self.option, self.value, self.reason, self.hint)


def check_as_settings(
    section: type[BaseModel], section_name: str, values: Mapping[str, object]
) -> None:
    """Check per-run values against the settings of the same name in ``section``: a range or a
    list of names is declared once, on the setting, and holds for the option that overrides
    it. ``None`` values (unset) are not checked. Raises ``InvalidOptionError``."""
    validator = section.__pydantic_validator__
    for name, value in values.items():
        if value is None:
            continue
        try:
            validator.validate_assignment(section.model_construct(), name, value)
        except ValidationError as exc:
            # A registry's check raises ValueError; pydantic's "Value error, " says nothing.
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise InvalidOptionError(
                name,
                value,
                f"{msg[:1].lower()}{msg[1:]}",
                f"leave {name} unset to use {section_name}.{name}",
            ) from None


@dataclass(frozen=True)
class QueryOptions:
    """Options of one question; every field defaults to the configured value."""

    agent: str | None = None  # "deep" or "naive" (query.agent)
    collections: Sequence[str] | None = None  # search only these (default: all, or routed)
    top_k: int | None = None  # chunks per query (query.top_k)
    max_iter: int | None = None  # deep: search iterations (query.max_iter)
    rerank: str | None = None  # deep: "lookup", "llm", "llm-batch" or "none" (query.rerank)
    web: bool | None = None  # deep: also search the web (web_search.enabled)
    timeout_s: float | None = None  # the run's time budget (query.timeout_s)
    # Names the time budget in the "cut short" note, when it is not query.timeout_s (the
    # server's request timeout, say), so the user knows which limit to raise.
    budget_name: str | None = None
    # The collections this question may touch at all (an API key's access), whatever is
    # requested or routed to; None: every collection. Empty: none.
    allowed_collections: Sequence[str] | None = None
    # Metadata conditions every search must meet (source glob, type, dates, pages, loader
    # metadata); a request's JSON or a list of "KEY OP VALUE" strings is parsed into a Filter.
    filter: Filter | None = None

    def __post_init__(self) -> None:
        self._validate()
        if self.collections is not None:
            # A tuple keeps the object immutable and hashable whatever sequence was passed.
            object.__setattr__(self, "collections", tuple(self.collections) or None)
        if self.allowed_collections is not None:
            object.__setattr__(self, "allowed_collections", tuple(self.allowed_collections))
        if self.filter is not None and not isinstance(self.filter, Filter):
            object.__setattr__(self, "filter", Filter.from_json(self.filter))
        elif self.filter is not None and not self.filter:
            object.__setattr__(self, "filter", None)

    def _validate(self) -> None:
        names = ("agent", "top_k", "max_iter", "rerank", "timeout_s")
        check_as_settings(QuerySettings, "query", {n: getattr(self, n) for n in names})

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> QueryOptions:
        """Options from loose keyword values (a request body, ``**kwargs``); an unknown name is
        an error listing the valid ones, never silently dropped."""
        return cls().with_values(values)

    def with_values(self, values: Mapping[str, object]) -> QueryOptions:
        """A copy with ``values`` set; unknown names raise ``UnknownOptionError``."""
        return _with_values(self, values, "query")


@dataclass(frozen=True)
class LoadOptions:
    """How one load runs, whatever starts it (library, CLI, HTTP, MCP, eval): the files go into
    a collection given beside these."""

    description: str | None = None  # what the collection holds (routing); None: keep it
    force: bool = False  # re-embed every file, changed or not
    prune: bool = False  # remove the chunks and records of files that are gone
    rebuild: bool = False  # drop and recreate the collection first

    def with_values(self, values: Mapping[str, object]) -> LoadOptions:
        """A copy with ``values`` set; unknown names raise ``UnknownOptionError``."""
        return _with_values(self, values, "load")


Options = TypeVar("Options", QueryOptions, LoadOptions)


def _with_values(options: Options, values: Mapping[str, object], kind: str) -> Options:
    valid = [f.name for f in fields(options)]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise UnknownOptionError(
            f"unknown {kind} option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            f"valid options: {', '.join(valid)}",
        )
    return replace(options, **values)  # type: ignore[arg-type]  # names checked above
