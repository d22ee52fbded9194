"""Metadata filters (source glob, file type, modified date, pages, loader metadata): parsed from
the CLI and JSON forms, compiled to escaped Milvus expressions, and applied by real Milvus Lite
in the dense and the BM25 search, through the library, the CLI, /v1/query, the OpenAI chat
route and the MCP search tool. No LLM: retrieval-only answers list the passages found."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from deepsearcher.cli import app
from deepsearcher.config import load_settings
from deepsearcher.embedding import Embedder
from deepsearcher.filters import Filter, FilterError
from deepsearcher.options import QueryOptions
from deepsearcher.searcher import DeepSearcher
from deepsearcher.server import create_app
from deepsearcher.store.milvus_filter import compile_filter
from deepsearcher.types import Chunk
from tests.fixture_files import make_pdf
from tests.server_fixtures import _client, _uvicorn

QUESTION = "What does the company policy say?"
ODD = 'it\'s "odd" 100%_a.txt'  # quotes, a backslash-free LIKE wildcard pair, a space


def _mtime(path: Path, day: str) -> None:
    ts = datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp()
    os.utime(path, (ts, ts))


def _eml(path: Path, sender: str, date: str, subject: str, body: str) -> None:
    path.write_text(
        f"From: {sender}\nTo: team@example.com\nSubject: {subject}\nDate: {date}\n\n{body}\n",
        encoding="utf-8",
    )


def write_corpus(root: Path) -> Path:
    """hr/ and finance/ folders: md, txt, a 3-page PDF and two e-mails, with set mtimes."""
    files = {
        "hr/leave_2025.md": (
            "# Leave policy 2025\n\nParental leave lasts 20 weeks.\n",
            "2025-03-10",
        ),
        "hr/archive/leave_2023.txt": (
            "Leave policy 2023: parental leave lasts 16 weeks.\n",
            "2023-05-01",
        ),
        f"hr/{ODD}": ("Odd file policy: desks are cleaned on Fridays.\n", "2025-12-31"),
        "finance/travel.md": (
            "# Travel policy\n\nMeals are refunded up to 45 euros.\n",
            "2025-06-01",
        ),
    }
    for rel, (text, day) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        _mtime(path, day)
    # Each page long enough (~250 tokens) to be chunked on its own.
    topics = [
        "the budget policy covers all departments",
        "spending above 500 euros needs the CFO",
        "the audit policy runs every spring",
    ]
    pages = [
        f"# Section {n}\n" + "\n".join(f"Page {n}, line {i}: {topic}." for i in range(18))
        for n, topic in enumerate(topics, start=1)
    ]
    pdf = make_pdf(root / "finance" / "report.pdf", pages)
    _mtime(pdf, "2026-01-15")
    mail = root / "mail"
    mail.mkdir()
    _eml(
        mail / "approval.eml",
        "Alice <alice@example.com>",
        "Sat, 01 Mar 2025 10:00:00 +0000",
        "Policy approval",
        "The new remote work policy is approved.",
    )
    _eml(
        mail / "old.eml",
        "Bob <bob@example.com>",
        "Mon, 01 Jan 2024 09:00:00 +0000",
        "Old policy",
        "The old remote work policy allowed two days.",
    )
    for eml in mail.iterdir():
        _mtime(eml, "2025-04-01")
    return root


def _names(sources: list[str]) -> set[str]:
    return {Path(s).name for s in sources}


ALL = {
    "leave_2025.md",
    "leave_2023.txt",
    ODD,
    "travel.md",
    "report.pdf",
    "approval.eml",
    "old.eml",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[DeepSearcher]:
    tmp = tmp_path_factory.mktemp("filters")
    settings = load_settings(
        overrides={"vector_store": {"uri": str(tmp / "milvus.db")}}, environ={}
    )
    ds = DeepSearcher(settings, embedder=embedder)
    report = ds.load([write_corpus(tmp / "docs")], "docs")
    assert report.files_failed == 0, report.failures
    try:
        yield ds
    finally:
        ds.close()


@pytest.fixture(scope="module")
def server(corpus: DeepSearcher, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app_ = create_app(corpus, corpus.settings, upload_dir=tmp_path_factory.mktemp("uploads"))
    with _uvicorn(app_) as url:
        yield url


def _search(ds: DeepSearcher, exprs: list[str], *, hybrid: bool) -> list[Any]:
    store = ds.store
    vectors = ds.retriever.embedder.embed_query([QUESTION])
    return store.search(
        "docs", vectors, 50, texts=[QUESTION], hybrid=hybrid, filter=Filter.parse(exprs)
    )[0]


# -- the store: each filter kind, dense and hybrid (BM25 + dense) ----------------------------

CASES = [
    ([], ALL),
    (["source=hr/**"], {"leave_2025.md", "leave_2023.txt", ODD}),
    (["path=hr/*"], {"leave_2025.md", ODD}),  # one segment: not hr/archive/
    (["source=**/*.md"], {"leave_2025.md", "travel.md"}),
    ([f"source=hr/{ODD}"], {ODD}),  # quotes, % and _ taken literally
    (['source=hr/it\'s "odd" 100%x_a.txt'], set()),
    (["type=pdf,eml"], {"report.pdf", "approval.eml", "old.eml"}),
    (["type!=pdf,eml"], {"leave_2025.md", "leave_2023.txt", ODD, "travel.md"}),
    (
        ["modified>=2025-01-01", "modified<2026-01-01"],
        {"leave_2025.md", ODD, "travel.md", "approval.eml", "old.eml"},
    ),
    (["modified<=2025-12-31", "source=hr/**"], {"leave_2025.md", "leave_2023.txt", ODD}),
    (["modified=2025-03-10"], {"leave_2025.md"}),
    (["meta.date>=2025-01-01"], {"approval.eml"}),
    (["meta.from~alice@"], {"approval.eml"}),
    (["meta.subject=Old policy"], {"old.eml"}),
]


@pytest.mark.parametrize("hybrid", [False, True], ids=["dense", "hybrid"])
@pytest.mark.parametrize(
    ("exprs", "expected"), CASES, ids=[" & ".join(c[0]) or "none" for c in CASES]
)
def test_store_search_narrows_to_the_matching_files(
    corpus: DeepSearcher, exprs: list[str], expected: set[str], hybrid: bool
) -> None:
    hits = _search(corpus, exprs, hybrid=hybrid)
    assert _names([h.source for h in hits]) == expected


def test_page_filter_keeps_chunks_touching_the_range(corpus: DeepSearcher) -> None:
    hits = _search(corpus, ["type=pdf", "page>=2", "page<=2"], hybrid=True)
    assert hits and all(h.page is not None and h.page <= 2 <= (h.page_end or h.page) for h in hits)
    assert any("CFO" in h.text for h in hits)
    assert not any("audit policy" in h.text for h in hits if h.page == h.page_end == 3)
    every = _search(corpus, ["type=pdf"], hybrid=True)
    assert {h.page for h in every} == {1, 2, 3} and len(hits) < len(every)


@pytest.mark.parametrize(
    "hostile",
    [
        'meta.subject=x") or 1==1 or ("y',
        'meta.from=x" or meta["doc"]["from"] like "%',
        'source=") or source like "%',
        "meta.subject=\\",
        "meta.from~%",
        'type=pdf" or 1==1 or "',
    ],
)
def test_hostile_values_match_nothing_and_raise_nothing(corpus: DeepSearcher, hostile: str) -> None:
    try:
        flt = Filter.parse([hostile])
    except FilterError:
        return  # refused by validation: also safe
    hits = corpus.store.search(
        "docs", corpus.retriever.embedder.embed_query([QUESTION]), 50, filter=flt
    )[0]
    assert hits == []


def test_a_collection_loaded_before_filters_gets_a_note(corpus: DeepSearcher) -> None:
    """Chunks written without the filter keys (an older version) match no date filter; the
    run says why instead of answering from nothing."""
    store = corpus.store
    meta = store.get_meta("docs")
    assert meta is not None
    store.ensure_collection("legacy", meta)
    chunk = Chunk("l1", "dl", "/old/a.txt", "h", 0, "An old policy text.", 0, 19, file_type="txt")
    store.upsert_chunks("legacy", [chunk], corpus.retriever.embedder.embed([chunk.text]))
    answer = corpus.query(
        QUESTION,
        QueryOptions(collections=["legacy"], filter=Filter.parse(["modified>=2020-01-01"])),
    )
    assert answer.sources == []
    assert any("reload with --force" in n and "legacy" in n for n in answer.notes)
    # type and source were always stored: no note, and they still match
    answer = corpus.query(
        QUESTION, QueryOptions(collections=["legacy"], filter=Filter.parse(["type=txt"]))
    )
    assert [s.source for s in answer.sources] == ["/old/a.txt"] and not any(
        "reload" in n for n in answer.notes
    )
    store.drop_collection("legacy")


# -- the interfaces ---------------------------------------------------------------------------


def test_cli_query_filter_json_and_usage_errors(tmp_path: Path) -> None:
    env = {"DEEPSEARCHER_VECTOR_STORE__URI": str(tmp_path / "cli.db")}
    docs = write_corpus(tmp_path / "docs")
    res = CliRunner().invoke(app, ["load", str(docs), "--collection", "docs"], env=env)
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(
        app,
        [
            "query",
            QUESTION,
            "--json",
            "--top-k",
            "30",
            "--filter",
            "source=hr/**",
            "--filter",
            "modified>=2025-01-01",
        ],
        env=env,
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mode"] == "retrieval-only"
    assert _names([s["source"] for s in out["sources"]]) == {"leave_2025.md", ODD}
    bad = CliRunner().invoke(app, ["query", QUESTION, "--filter", "color=blue"], env=env)
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert (
        "error: unknown filter key 'color'" in bad.stderr
        and "hint: write KEY OP VALUE" in bad.stderr
    )


def test_http_query_with_filter_object_and_strings(server: str) -> None:
    body = {"question": QUESTION, "top_k": 30}
    out = httpx.post(
        f"{server}/v1/query",
        json={**body, "filter": {"type": ["eml"], "meta": {"date": {"gte": "2025-01-01"}}}},
        timeout=60,
    ).json()
    assert _names([s["source"] for s in out["sources"]]) == {"approval.eml"}
    out = httpx.post(
        f"{server}/v1/query", json={**body, "filter": ["source=finance/**", "page>=3"]}, timeout=60
    ).json()
    assert out["sources"] and all(s["source"].endswith("report.pdf") for s in out["sources"])
    resp = httpx.post(
        f"{server}/v1/query",
        json={**body, "filter": {"modified": {"gte": "last year"}}},
        timeout=60,
    )
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "invalid_filter" and "modified needs a date" in error["message"]
    assert "KEY OP VALUE" in error["hint"]


def test_openai_chat_sends_the_filter_in_extra_body(server: str) -> None:
    reply = _client(server).chat.completions.create(
        model="deepsearcher",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"filter": ["type=md"], "top_k": 30},
    )
    sources = reply.model_extra["sources"]  # type: ignore[index]
    assert _names([s["source"] for s in sources]) == {"leave_2025.md", "travel.md"}


def test_mcp_search_tool_filters_and_refuses_a_bad_filter(server: str) -> None:
    from tests.test_mcp import _data, _error, _http

    async def calls() -> tuple[dict[str, Any], str]:
        async with _http(server, None) as session:
            found = _data(
                await session.call_tool(
                    "search",
                    {"query": QUESTION, "top_k": 30, "filter": ["source=hr/archive/**"]},
                )
            )
            refused = _error(
                await session.call_tool("search", {"query": QUESTION, "filter": ["page>=zero"]})
            )
            return found, refused

    found, refused = anyio.run(calls)
    assert _names([p["source"] for p in found["passages"]]) == {"leave_2023.txt"}
    assert "page must be a whole number" in refused and "hint: write KEY OP VALUE" in refused


@pytest.mark.parametrize("wrong", [123, [1, 2], [["source=a"]], True])
def test_a_filter_of_the_wrong_json_type_is_invalid_filter_everywhere(
    server: str, wrong: Any
) -> None:
    from tests.test_mcp import _error, _http

    forms = ['["source=hr/**", "page<=5"]', '{"source": "hr/**"']
    for path, body in [
        ("/v1/query", {"question": QUESTION, "filter": wrong}),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": QUESTION}], "filter": wrong},
        ),
    ]:
        resp = httpx.post(f"{server}{path}", json=body, timeout=60)
        assert resp.status_code == 400, (path, resp.text)
        error = resp.json()["error"]
        assert error["code"] == "invalid_filter", (path, error)
        assert all(f in error["message"] for f in forms), error["message"]

    async def calls() -> list[str]:
        async with _http(server, None) as session:
            return [
                _error(await session.call_tool("search", {"query": QUESTION, "filter": wrong})),
                _error(
                    await session.call_tool("deep_search", {"question": QUESTION, "filter": wrong})
                ),
            ]

    for refused in anyio.run(calls):
        assert all(f in refused for f in forms), refused


# -- parsing and compiling ----------------------------------------------------------------------


def test_string_and_object_forms_parse_alike() -> None:
    strings = Filter.parse(
        [
            "source=hr/**",
            "type=PDF,.docx",
            "modified>=2025-01-01",
            "modified<2026-01-01",
            "page<=5",
            "meta.date>2025-03-01",
            "meta.from~alice",
        ]
    )
    obj = Filter.from_json(
        {
            "source": "hr/**",
            "type": ["pdf", "docx"],
            "modified": {"gte": "2025-01-01", "lt": "2026-01-01"},
            "page": {"lte": 5},
            "meta": {"date": {"gt": "2025-03-01"}, "from": {"contains": "alice"}},
        }
    )
    assert strings == obj and hash(strings) == hash(obj)
    assert str(strings).startswith("source=hr/** AND type=docx,pdf AND modified>=2025-01-01")
    assert QueryOptions.from_mapping({"filter": ["type=pdf"]}).filter == Filter.parse(["type=pdf"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["colour=red"], "unknown filter key 'colour'"),
        (["source>hr"], "source takes a glob with '='"),
        (["page>=0"], "page must be a whole number"),
        (["modified>=yesterday"], "modified needs a date"),
        (["meta.a-b=1"], "cannot read filter"),
        (["meta.x=a\nb"], "control character"),
        (["type="], "has no value"),
        ({"page": {"between": [1, 2]}}, "unknown filter operator 'between'"),
        (42, "filter must be a list of condition strings"),
    ],
)
def test_bad_filters_say_what_is_wrong_with_the_accepted_forms(value: Any, message: str) -> None:
    with pytest.raises(FilterError) as info:
        Filter.from_json(value)
    assert message in info.value.message and info.value.hint


def test_compiled_expressions_escape_every_value() -> None:
    expr = compile_filter(
        Filter.parse(
            [
                "source=/d/hr/**",
                'meta.subject=x") or 1==1 or ("y',
                "meta.from~50%_\\",
                "page>=2",
                "modified<=2025-12-31",
            ]
        )
    )
    assert expr.post is None  # a trailing ** is exact in LIKE
    assert expr.expr == (
        '(source like "/d/hr/%") and '
        '(meta["doc"]["subject"] == "x\\") or 1==1 or (\\"y") and '
        '(meta["doc"]["from"] like "%50\\\\%\\\\_\\\\\\\\%") and '
        '(meta["page_end"] >= 2) and '
        '(meta["modified"] < "2026-01-01")'
    )
    glob = compile_filter(Filter.parse(["source=hr/*.md"]))
    assert glob.expr == '(source like "hr/%.md" or source like "%/hr/%.md")'
    assert glob.post is not None
    assert (
        glob.post("/x/hr/a.md") and not glob.post("/x/hr/sub/a.md") and not glob.post("/x/ahr/a.md")
    )
    assert compile_filter(None).expr is None and compile_filter(Filter(())).expr is None
