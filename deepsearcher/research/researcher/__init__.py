"""One researcher per section of a research plan, one module per concept:

- ``section``: the researcher's steps for its subtask (``research_section``): the deep-search
  loop, then the tool loop and the hypotheses; the ``SectionResult`` it hands back;
- ``workspace``: its working state (``Workspace``) and what researchers share
  (``ResearcherDeps``): the budget share, the evidence it may cite by short id;
- ``evidence``: passages as ``Evidence`` keyed by passage, findings of a cited answer;
- ``tool_loop``: the bounded tool loop and the tools it offers (search, web, calculator,
  think, findings);
- ``registry``: ``Tool`` and ``ToolRegistry``, tool calls native or parsed from JSON;
- ``calculator``: the strict arithmetic evaluator behind the calculator tool;
- ``hypotheses``: a hypothesis tested for and against.

The stages of the run (``research.gather``) use ``research_section`` and ``ResearcherDeps``
only."""

from __future__ import annotations

from deepsearcher.research.researcher.section import research_section
from deepsearcher.research.researcher.workspace import ResearcherDeps

__all__ = ["ResearcherDeps", "research_section"]
