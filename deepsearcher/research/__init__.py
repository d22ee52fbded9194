"""Research reports: a request becomes a brief, a plan of sections,
concurrent deep-search researchers sharing one budget, a cited draft, a quality check and
gap-filling revisions. ``run_research`` returns a typed ``Report``; ``stream_research``
yields the stage events."""

from __future__ import annotations

from deepsearcher.research.events import ResearchEvent
from deepsearcher.research.models import Report, ResearchRequest
from deepsearcher.research.run import run_research, stream_research

__all__ = ["Report", "ResearchEvent", "ResearchRequest", "run_research", "stream_research"]
