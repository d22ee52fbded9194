"""``describe_event``: the wording every front end shows for an event (the CLI's terminal lines,
MCP progress, the research chat's reasoning pane), and model text shown literally in a terminal."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from deepsearcher.describe import describe_event
from deepsearcher.research.events import (
    ResearcherFinishedEvent,
    ResearcherStartedEvent,
    ResearchNoteEvent,
)
from deepsearcher.types import (
    NoteEvent,
    ReflectionEvent,
    SearchEvent,
    SubQueriesEvent,
    VerdictEvent,
)


def _printed(markup: str) -> str:
    out = StringIO()
    Console(file=out, width=200).print(markup, highlight=False)
    return out.getvalue()


def test_a_search_step_is_one_plain_line_for_progress_displays() -> None:
    assert describe_event(SubQueriesEvent(queries=["a", "b"], iteration=1)) == "sub-queries: a; b"
    assert describe_event(SearchEvent(query="q", hits=3, new=1)) == "searched 'q': 3 hits, 1 new"
    assert describe_event(VerdictEvent(source="hr/travel.md", kept=True)) == "kept hr/travel.md"
    assert describe_event(ReflectionEvent()) == "reflection: follow-up queries none"


def test_research_and_search_notes_are_told_apart() -> None:
    # Both are type "note": the research pane capitalises its stages, the search progress not.
    assert describe_event(ResearchNoteEvent(message="m")) == "Note: m"
    assert describe_event(NoteEvent(message="m")) == "note: m"


def test_terminal_detail_only_when_verbose() -> None:
    started = ResearcherStartedEvent(section="Costs", budget=6)
    verdict = VerdictEvent(source="a.md", kept=False, margin=-1.5)
    assert describe_event(started, "terminal") is None
    assert describe_event(verdict, "terminal") is None
    assert "Costs (budget 6 calls)" in _printed(
        describe_event(started, "terminal", verbose=True) or ""
    )
    assert "NO  a.md (margin -1.50)" in _printed(
        describe_event(verdict, "terminal", verbose=True) or ""
    )


def test_terminal_lines_print_model_text_literally() -> None:
    events = [
        SubQueriesEvent(queries=["[/bold] budget", "[red]q2"], iteration=2),
        SearchEvent(query="[/] x", hits=1, new=1),
        NoteEvent(message="model said [/] here"),
        ResearcherFinishedEvent(section="[b]S", findings=2, calls=3),
    ]
    text = "".join(_printed(describe_event(e, "terminal") or "") for e in events)
    # A markup error would be a crash of the live view; a swallowed tag, a lost word.
    assert "▸ iteration 2" in text and "• [/bold] budget" in text and "• [red]q2" in text
    assert "search '[/] x': 1 hits, 1 new" in text
    assert "note: model said [/] here" in text
    assert "✓ [b]S: 2 finding(s), 3 calls" in text
