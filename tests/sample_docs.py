"""A four-document company corpus (robots, travel, offices, security) that the agent and CLI
tests load and ask about; each fact sits in one file, so a test can tell which one was cited."""

from __future__ import annotations

from pathlib import Path

DOCS = {
    "robots.txt": (
        "The NR-7 robot carries a payload of twelve kilograms on its arm.\n\n"
        "The NR-7 battery lasts ten hours and is supplied by Kestrel Energy."
    ),
    "travel.md": (
        "# Travel policy\n\nTravel expenses above 500 dollars need approval from the CFO.\n\n"
        "The international per diem is 95 dollars per day."
    ),
    "offices.txt": (
        "The Austin office assembles the NR-7 robot.\n\n"
        "Rafael Ortega is the office manager in Austin.\n\n"
        "The Lyon office has forty employees and a robotics lab."
    ),
    "security.md": (
        "# Security\n\nAdministrator passwords change every ninety days.\n\n"
        "A lost laptop must be reported within four hours."
    ),
}


def write_docs(root: Path, docs: dict[str, str] = DOCS) -> Path:
    """Write ``docs`` (name -> text) into the folder ``root`` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (root / name).write_text(text, encoding="utf-8")
    return root
