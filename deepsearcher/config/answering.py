"""The answering sections: the chat model, deep search, research reports and web search."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deepsearcher.config.fields import AgentName, ChatModelName, Section, WebSearchName


class LLMSettings(Section):
    provider: ChatModelName = Field("openai", description="OpenAI-compatible chat API.")
    model: str = Field("gpt-4o-mini", description="Chat model name.")
    base_url: str | None = Field(
        None, description="API base URL (OpenAI if unset): DeepSeek, Azure, vLLM, Ollama, ..."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Env variable holding the API key.")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(1024, ge=1, description="Max completion tokens per call.")
    timeout_s: float = Field(60.0, gt=0, description="Timeout of one call.")
    max_retries: int = Field(3, ge=0, le=10, description="Retries on timeout, 429 and 5xx.")
    max_concurrency: int = Field(
        16,
        ge=1,
        le=256,
        description="LLM calls in flight at once; 2-4 for a local server that queues requests.",
    )
    tool_calls: Literal["auto", "native", "json"] = Field(
        "auto",
        description="How research tools are called: 'native' sends OpenAI tool schemas, 'json' "
        "has the model write the call as JSON in its reply (small local models), 'auto' tries "
        "native and falls back to JSON when the server rejects tools.",
    )
    judge_threshold: float | None = Field(
        None,
        le=10,
        ge=-20,
        description="The relevance judge's log P(YES) - log P(NO) threshold calibrated for this "
        "model (benchmarks/judge_calibration.py measures it on labelled passages); unset: "
        "query.judge_threshold.",
    )


class QuerySettings(Section):
    agent: AgentName = Field("deep", description="Default agent.")
    max_sub_queries: int = Field(4, ge=1, le=10)
    # These bounds also hold for the per-question QueryOptions that override them.
    top_k: int = Field(10, ge=1, le=100, description="Chunks per query per collection.")
    max_iter: int = Field(3, ge=1, le=10)
    max_gap_queries: int = Field(3, ge=0, le=10)
    rerank: Literal["lookup", "llm", "llm-batch", "none"] = Field(
        "lookup",
        description="How a round's passages are judged YES/NO: 'lookup' in the round's lookup "
        "call itself (the passages it names useful are YES: no call of its own), 'llm-batch' "
        "one call for the round (a margin per passage where the server gives "
        "log-probabilities), 'llm' one call per passage, 'none' no verdicts. All read the "
        "passages the round's other calls read, so a server with prefix caching reads them "
        "once.",
    )
    rerank_batch_size: int = Field(10, ge=1, le=64, description="Chunks per llm-batch call.")
    # The loop's worst case with rerank: llm: route + plan + 3 rounds x (10 verdicts + 4
    # extractions + 4 reflections) + answer + repair = 58 calls, so the default budget only
    # trips when something goes wrong.
    max_llm_calls: int = Field(120, ge=1, description="Budget: LLM calls per question.")
    max_tokens: int = Field(200_000, ge=1, description="Budget: tokens per question.")
    timeout_s: float = Field(300.0, gt=0, description="Budget: seconds per question.")
    max_context_chunks: int = Field(
        14,
        ge=1,
        description="Passages the answer is written from: the last round's, each lookup's "
        "passage and the best of earlier rounds.",
    )
    min_evidence: int = Field(
        5,
        ge=0,
        le=100,
        description="Evidence floor of deep search: when the relevance judge keeps fewer "
        "passages than this, the best-ranked retrieved passages it rejected are added to the "
        "answer's context, marked unverified (evidence: unverified, with a note). 0 trusts the "
        "judge alone.",
    )
    attribution_threshold: float = Field(
        0.76,
        ge=0,
        le=1,
        description="A sentence the model left uncited is attributed to a passage that holds "
        "its numbers and key terms when 0.9 x cosine (the embedder's) + 0.1 x term overlap "
        "reaches this (calibrated on labelled sets: benchmarks/attribution_calibration.py).",
    )
    judge_threshold: float = Field(
        -2.0,
        le=10,
        ge=-20,
        description="With a server that returns log-probabilities, a passage is kept when "
        "log P(YES) - log P(NO) of the judge's verdict is at least this: 0 keeps what the "
        "judge says, below 0 also keeps passages it rejects with doubt (small models say NO "
        "too often). Without log-probabilities the YES/NO word decides.",
    )


class ResearchSettings(Section):
    """``deepsearcher research``, ``DeepSearcher.research`` and the server's research model."""

    max_sections: int = Field(
        4, ge=1, le=12, description="Sections of a report's plan, one researcher each."
    )
    max_revisions: int = Field(
        1,
        ge=0,
        le=5,
        description="Revision rounds after the quality check, only for a must-answer question "
        "no cited sentence covers or a contradiction not yet researched; 0 keeps the first "
        "draft.",
    )
    max_concurrency: int = Field(
        1,
        ge=1,
        le=32,
        description="Researchers running at once (their LLM calls still share "
        "llm.max_concurrency). 1 suits a server that runs one request at a time (llama.cpp, "
        "Ollama): each section's calls then share the server's prompt cache (a three-section "
        "brief 2x faster with the local model); raise it for a server that runs requests in "
        "parallel (vLLM).",
    )
    budget_factor: float = Field(
        4.0,
        gt=0,
        description="A run's default budget: this many times one question's "
        "(query.max_llm_calls, query.max_tokens, query.timeout_s), shared by every stage and "
        "researcher. The explicit limits below win over it.",
    )
    max_llm_calls: int | None = Field(
        None, ge=5, description="LLM calls for a whole report (unset: budget_factor x query's)."
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Tokens for a whole report (unset: budget_factor x query's)."
    )
    timeout_s: float | None = Field(
        None, gt=0, description="Seconds for a whole report (unset: budget_factor x query's)."
    )
    clarify: bool = Field(
        True,
        description="Ask the brief's clarifying question when the request is ambiguous and the "
        "front end can ask (a terminal, a chat client of the deepsearcher-research model); "
        "false: the brief records the assumption it made instead.",
    )
    max_tool_steps: int = Field(
        0,
        ge=0,
        le=10,
        description="Replies of each researcher's tool loop after its deep search (search, "
        "web_search/fetch with web on, calculator with figures on, think, findings, "
        "hypotheses); 0 (the default): the deep search only, as a small model gains nothing "
        "from the loop (docs/research.md).",
    )
    max_hypotheses: int = Field(
        2,
        ge=0,
        le=6,
        description="Hypotheses each researcher tests when its tool loop proposes them "
        "(max_tool_steps > 0), searching for evidence for and against each (2 searches and 1 "
        "LLM call apiece).",
    )


class WebSearchSettings(Section):
    enabled: bool = False
    provider: WebSearchName = "tavily"
    base_url: str | None = Field(None, description="SearXNG instance URL (or Tavily override).")
    api_key_env: str = Field("TAVILY_API_KEY")
    max_results: int = Field(5, ge=1, le=50)
    timeout_s: float = Field(10.0, gt=0)
    fetch_pages: bool = Field(False, description="Fetch result pages and extract main text.")
    max_page_bytes: int = Field(2_000_000, ge=1024)
    allow_private_hosts: bool = Field(False, description="Allow fetching private/loopback hosts.")
