"""The research run's typed records: their JSON forms stay what reports have carried."""

from __future__ import annotations

from deepsearcher.research import Report
from deepsearcher.research.models import Evidence


def test_evidence_json_is_the_report_form_whatever_it_carries() -> None:
    """Evidence shares the passages' location type, but the report's JSON keeps its own
    fields: a record id or a web title the passage had does not appear, the label does."""
    web = Evidence(
        "E1", "Rates rose.", "https://example.org/a", None, kind="web", title="Rates", record_id="r"
    )
    doc = Evidence(
        "E2", "Costs fell.", "/d/report.pdf", "docs", start=3, end=14, page=2, page_end=3
    )
    assert [e.to_dict() for e in (web, doc)] == [
        {
            "id": "E1",
            "text": "Rates rose.",
            "source": "https://example.org/a",
            "page": None,
            "page_end": None,
            "start": None,
            "end": None,
            "collection": None,
            "kind": "web",
            "label": "https://example.org/a",
        },
        {
            "id": "E2",
            "text": "Costs fell.",
            "source": "/d/report.pdf",
            "page": 2,
            "page_end": 3,
            "start": 3,
            "end": 14,
            "collection": "docs",
            "kind": "doc",
            "label": "/d/report.pdf p. 2–3",
        },
    ]
    assert Report("r", evidence=[doc]).to_dict()["evidence"] == [doc.to_dict()]
