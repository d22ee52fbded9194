"""Pieces shared by the agents: LLM calls within the run's budget, collection routing and the
``<document>`` rendering of passages. The cited answer step is ``agents.answer``."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from deepsearcher.agents import prompts
from deepsearcher.agents.parsing import parse_str_list
from deepsearcher.errors import BudgetExceeded, LLMError
from deepsearcher.prompting import ask as ask
from deepsearcher.prompting import document_block
from deepsearcher.prompting import escape_attribute as escape_attribute
from deepsearcher.prompting import escape_document as escape_document
from deepsearcher.prompting import messages_for as messages_for
from deepsearcher.retrieval import Retriever
from deepsearcher.run_context import RunContext
from deepsearcher.store import CollectionInfo
from deepsearcher.types import Answer, Citation, Event, Hit, Mode

logger = logging.getLogger(__name__)


def render_document(hit: Hit, n: int | None = None, *, text: str | None = None) -> str:
    """One passage as a ``<document>`` block; every field that comes from a file or a web
    result (path, heading, title, URL, text) is escaped."""
    attributes = [f'n="{n}"'] if n is not None else []
    attributes.append(f'source="{escape_attribute(passage_label(hit))}"')
    if hit.heading:
        attributes.append(f'heading="{escape_attribute(hit.heading)}"')
    if hit.kind == "web" and hit.title and hit.title != hit.source:
        attributes.append(f'title="{escape_attribute(hit.title)}"')
    return document_block(" ".join(attributes), hit.text if text is None else text)


def passage_label(hit: Hit) -> str:
    """A passage's source in prompts: file and page range, or ``(web) URL``."""
    return f"(web) {hit.label}" if hit.kind == "web" else hit.label


async def resolve_collections(
    retriever: Retriever, question: str, requested: Sequence[str] | None, ctx: RunContext
) -> tuple[list[str], list[Event]]:
    """The collections to search: those requested, else those the LLM routes the question to
    (when several are described), else all; only those embedded like the retriever's."""
    infos = await retriever.available_collections()
    retriever.check_requested(requested, infos)  # before routing spends an LLM call
    events: list[Event] = []
    chosen = None
    if not requested:
        chosen, events = await _route(question, infos, ctx)
    usable, notes = await retriever.searchable(requested, infos, chosen)
    events.extend(ctx.note(n) for n in notes)
    return usable, events


async def _route(
    question: str, infos: Sequence[CollectionInfo], ctx: RunContext
) -> tuple[list[str], list[Event]]:
    names = [i.name for i in infos]
    events: list[Event] = []
    described = [i for i in infos if i.meta and i.meta.description]
    if len(infos) == 1 or len(described) < 2 or ctx.llm is None or ctx.unreachable:
        return names, events
    # One routing call per question (not per sub-query): cheap, and stable across the loop.
    listing = "\n".join(
        f"- {i.name}: {(i.meta.description if i.meta else '') or '(no description)'}" for i in infos
    )
    try:
        picked = await ask(
            ctx,
            messages_for(prompts.ROUTE.format(collections=listing, question=question)),
            parse_str_list,
        )
    except (LLMError, BudgetExceeded) as exc:
        if ctx.unreachable is None:  # an unreachable LLM gets one note, from the agent
            events.append(ctx.note(f"collection routing failed ({exc.message}); searching all"))
        return names, events
    chosen = [n for n in picked if n in names]
    if not chosen:
        events.append(ctx.note("collection routing picked none; searching all"))
        return names, events
    events.append(ctx.note(f"searching collections: {', '.join(chosen)}"))
    return chosen, events


def hit_to_source(n: int, hit: Hit, verified: bool = False) -> Citation:
    return Citation(
        n=n,
        source=hit.source,
        text=hit.text,
        collection=hit.collection,
        verified=verified,
        **hit.location(),
    )


def new_answer(question: str, mode: Mode) -> Answer:
    return Answer(question=question, answer="", mode=mode)
