"""Research reports: a request becomes a brief, a plan of sections, concurrent deep-search
researchers sharing one budget, a cited draft, a quality check and gap-filling revisions.
``stream_research`` yields the stage events, the last carrying the typed ``Report``."""

from __future__ import annotations

from deepsearcher.research.events import ResearchEvent
from deepsearcher.research.models import Report, ResearchRequest
from deepsearcher.research.run import stream_research

__all__ = ["Report", "ResearchEvent", "ResearchRequest", "stream_research"]
