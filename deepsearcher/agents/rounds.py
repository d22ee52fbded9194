"""What a deep search knows between its rounds, and what it does next.

`SearchState` holds one question's loop (plan, queries, passages, verdicts, each lookup's
answer); `next_round` decides the next round's queries and lookups from it; `context` picks the
answer's passages. No LLM is called here: the agent in deep_search.py does the calling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from deepsearcher.agents.hops import resolve
from deepsearcher.agents.plan import restates
from deepsearcher.agents.queries import standalone
from deepsearcher.agents.records import Rekey
from deepsearcher.types import Answer, Hit, Hop

_EARLIER_PASSAGES = 2  # best passages of earlier rounds the answer also gets (read cold)


@dataclass
class SearchState:
    """One question's loop: its plan, what it searched, retrieved, judged and found."""

    question: str
    answer: Answer
    collections: list[str]
    top_k: int
    rerank: str
    hops: list[Hop]
    queries: list[str] = field(default_factory=list)  # every query searched, in order
    retrieved: dict[str, Hit] = field(default_factory=dict)  # every passage, by id
    fused: dict[str, float] = field(default_factory=dict)  # chunk id -> RRF over all queries
    verdicts: dict[str, bool] = field(default_factory=dict)  # chunk id -> kept
    docs: list[Hit] = field(default_factory=list)  # the last round's passages, prompt order
    hits_of: dict[int, Hit] = field(default_factory=dict)  # hop -> the passage it came from
    keyed: dict[int, Rekey] = field(default_factory=dict)  # hop -> the key its record gave
    gaps: dict[int, list[str]] = field(default_factory=dict)  # hop -> reflection's queries
    searched: set[int] = field(default_factory=set)  # hops whose query was searched
    tried: set[int] = field(default_factory=set)  # hops whose answer was looked for
    judge_off: bool = False  # verdicts told nothing apart: later rounds rank by retrieval
    iteration: int = 0
    stopped: bool = False  # a step ended the loop (budget, unreachable LLM)

    def answers(self) -> dict[int, str]:
        return {h.index: h.answer for h in self.hops if h.status == "answered"}

    def finished(self, index: int) -> bool:
        """Whether hop ``index`` ended without an answer (nothing more will be tried)."""
        hop = self.hops[index - 1]
        return hop.status == "skipped" or (
            hop.index in self.tried and hop.index not in self.gaps and hop.status != "answered"
        )

    def usable(self, hits: Sequence[Hit]) -> list[Hit]:
        """The passages the judge did not drop (all of them when it judged none)."""
        return [h for h in hits if self.verdicts.get(h.id, True)]

    def context(self, limit: int) -> list[Hit]:
        """The answer's passages: the last round's (the prefix the server has read), then each
        lookup's passage and the best of earlier rounds that are not among them. Of the last
        round, the passages after the last one the judge kept are left out; one it rejected
        before that stays, unverified: taking it out would change the prefix, and the server
        would read every passage after it again."""
        kept = [i for i, h in enumerate(self.docs) if self.verdicts.get(h.id) is True]
        out = list(self.docs[: kept[-1] + 1] if kept else self.docs)
        ids = {h.id for h in out}
        extra = [self.hits_of[i] for i in sorted(self.hits_of)]
        extra += [self.keyed[i].hit for i in sorted(self.keyed)]
        earlier = sorted(
            self.usable(list(self.retrieved.values())), key=lambda h: -self.fused.get(h.id, 0.0)
        )
        for h in [*extra, *earlier[:_EARLIER_PASSAGES]]:
            if h.id not in ids:
                out.append(h)
                ids.add(h.id)
        return out[:limit]

    def rejected(self, shown: Sequence[Hit]) -> list[Hit]:
        """Judged-and-dropped passages not shown yet, best fused rank first."""
        ids = {h.id for h in shown}
        dropped = [
            self.retrieved[i] for i, kept in self.verdicts.items() if not kept and i not in ids
        ]
        return sorted(dropped, key=lambda h: -self.fused.get(h.id, 0.0))


@dataclass
class Work:
    """A round: the queries to search (none: the last round's passages serve) and the hops
    whose answers to extract from its passages."""

    queries: list[str]
    hops: list[Hop]


def next_round(s: SearchState, max_iter: int, max_queries: int) -> Work | None:
    """The queries and hops of the next round: the first round searches the question and
    every lookup that depends on nothing; later ones the lookups whose answers are now
    known, and reflection's queries for a lookup that found nothing. A query that
    restates one already searched is not searched again: its lookup is answered from the
    passages at hand. None when nothing is left (or no search round is left)."""
    answers = s.answers()
    work = Work([], [])
    if s.iteration == 0:
        work.queries.append(s.question)
    for hop in s.hops:
        if hop.status == "answered" or hop.status == "skipped":
            continue
        if any(d not in answers for d in hop.depends_on):
            # A lookup searched again this round (its reflection queries taken just above) is
            # not finished: what depends on it waits for the next round.
            this_round = {h.index for h in work.hops}
            if any(
                s.finished(d) and d not in this_round for d in hop.depends_on if d not in answers
            ):
                hop.status = "skipped"  # what it needs was not found
            continue
        if hop.index in s.gaps:
            work.queries += s.gaps.pop(hop.index)
            work.hops.append(hop)
        elif hop.index not in s.searched:
            hop.query = resolve(hop.question, answers)
            if not hop.depends_on:
                hop.query = standalone(hop.query, s.question)
            s.searched.add(hop.index)
            if not any(restates(hop.query, q) for q in [*s.queries, *work.queries]):
                work.queries.append(hop.query)
            work.hops.append(hop)
    work.queries = work.queries[:max_queries]
    if not work.hops and not work.queries:
        return None
    if work.queries and s.iteration >= max_iter:
        for hop in work.hops:
            hop.status = "skipped"  # no search round left for it
        return None
    return work
