"""Regenerate the binary sample documents in this folder from the text below.

    python scripts/make_sample_data.py

Writes ``nr7_product_spec.pdf`` (3 pages, reportlab, text only) and
``q3_2024_quarterly_report.docx`` (python-docx). The other samples (.md, .txt, .html,
.csv, .jsonl) are plain text and are edited by hand. Output is byte-for-byte reproducible:
the PDF is written in reportlab's invariant mode and the DOCX has fixed core properties and
fixed zip timestamps, so rerunning the script does not change the files (and an incremental
``deepsearcher load`` sees them as unchanged).

All content is fictional and original (Northwind Robotics does not exist); CC0.
Needs the dev extras: reportlab and python-docx.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "data"
PDF_PATH = HERE / "nr7_product_spec.pdf"
DOCX_PATH = HERE / "q3_2024_quarterly_report.docx"

FIXED_TIME = dt.datetime(2024, 10, 15, 9, 0, 0)

# ---------------------------------------------------------------------------------------------
# NR-7 product specification (PDF). One list entry per page: the facts are deliberately spread
# so that a cited answer has to name the right page (dimensions p.1, payload and battery p.2,
# firmware and assembly site p.3).
# Each page is a list of blocks: ("h", text) heading, ("p", text) paragraph,
# ("t", rows) table whose first row is the header.
# ---------------------------------------------------------------------------------------------

SPEC_TITLE = "NR-7 Autonomous Mobile Manipulator: Product Specification"
SPEC_DOCNO = "NR7-SPEC-0012 Rev C"

SPEC_PAGES: list[list[tuple[str, object]]] = [
    [
        ("title", SPEC_TITLE),
        (
            "p",
            f"Document {SPEC_DOCNO}, issued 30 August 2024. Product manager: Sofia Marquez. "
            "Approved by: Tomasz Wierzbicki, VP Engineering. Internal and customer use.",
        ),
        ("h", "1. Overview"),
        (
            "p",
            "The NR-7 is a mobile robot with a six-axis arm, built to pick totes and cases from "
            "warehouse shelving and carry them to packing stations. It drives itself on existing "
            "floors without reflectors or floor markings and shares aisles with people.",
        ),
        (
            "p",
            "Typical deployments run 10 to 40 robots per site, coordinated by the Northwind fleet "
            "console. A single robot replaces about 1.5 manual pick carts per shift.",
        ),
        ("h", "1.1 Dimensions and mobility"),
        (
            "t",
            [
                ["Property", "Value"],
                ["Length x width x height (arm stowed)", "1,050 x 720 x 1,480 mm"],
                ["Mass including battery", "148 kg"],
                ["Maximum drive speed", "1.8 m/s (1.2 m/s in zones shared with people)"],
                ["Turning", "On the spot (differential drive)"],
                ["Minimum aisle width", "1,100 mm"],
                ["Navigation sensors", "2 safety lidars, 3 depth cameras, wheel odometry"],
                ["Ingress protection", "IP54"],
            ],
        ),
        (
            "p",
            "Payload, battery and charging figures are given in section 2 (page 2). Software, "
            "connectivity, manufacturing and warranty are in section 3 (page 3).",
        ),
    ],
    [
        ("h", "2. Mechanical and power"),
        ("h", "2.1 Arm and payload"),
        (
            "t",
            [
                ["Property", "Value"],
                ["Arm", "6 axes, 1,200 mm reach"],
                ["Rated arm payload", "12 kg at full reach"],
                ["Deck (tote rack) payload", "150 kg, up to 6 standard totes"],
                ["Pick rate", "Up to 420 totes per hour"],
                ["Gripper", "Vacuum plus two-finger hybrid, tool change in under 60 s"],
            ],
        ),
        ("h", "2.2 Battery and charging"),
        (
            "p",
            "The NR-7 runs on a single 48 V lithium iron phosphate (LFP) battery pack, model "
            "KE-4850, supplied by Kestrel Energy Co., Ltd. The pack can be swapped by one person "
            "in under 2 minutes without tools.",
        ),
        (
            "t",
            [
                ["Property", "Value"],
                ["Battery pack", "Kestrel Energy KE-4850, 48 V LFP, 50 Ah (2.4 kWh)"],
                ["Runtime", "10 h typical mixed duty; 7 h at full payload"],
                ["Charge time", "0-80% in 75 min; 0-100% in 110 min"],
                ["Charger", "NR-DOCK 2 docking charger, 1.5 kW"],
                ["Cycle life", "3,000 cycles to 80% of rated capacity"],
                ["Opportunity charging", "Supported; does not reduce cycle life"],
            ],
        ),
        (
            "p",
            "Only KE-4850 packs are approved for the NR-7. Fitting any other pack voids the "
            "battery warranty and is blocked by the firmware.",
        ),
    ],
    [
        ("h", "3. Software, connectivity and manufacturing"),
        ("h", "3.1 Firmware"),
        (
            "t",
            [
                ["Property", "Value"],
                ["Current firmware", "NR-OS 4.2.1 (released 20 August 2024)"],
                ["Oldest supported firmware", "NR-OS 4.0.0"],
                ["Update method", "Over the air from the fleet console, scheduled per robot"],
            ],
        ),
        ("h", "3.2 Connectivity and environment"),
        (
            "t",
            [
                ["Property", "Value"],
                ["Networking", "Wi-Fi 6 (802.11ax); optional private 5G module"],
                ["Remote service", "Via the fleet console over NorthGate VPN only"],
                ["Operating temperature", "0 to 40 degrees C"],
                ["Humidity", "10 to 90% RH, non-condensing"],
            ],
        ),
        ("h", "3.3 Manufacturing and warranty"),
        (
            "p",
            "Every NR-7 is assembled and tested at the Northwind Robotics plant in Austin, Texas. "
            "Each robot completes a 4-hour burn-in and a 50-pick acceptance run before shipping.",
        ),
        (
            "p",
            "Warranty: 24 months parts and labour on the robot; 36 months or 3,000 cycles "
            "(whichever comes first) on the battery pack.",
        ),
        ("h", "3.4 Revision history"),
        (
            "t",
            [
                ["Rev", "Date", "Change"],
                ["A", "November 2023", "First release (firmware NR-OS 4.0.0)"],
                ["B", "March 2024", "Deck payload raised to 150 kg; firmware NR-OS 4.1.0"],
                ["C", "30 August 2024", "Firmware NR-OS 4.2.1; charge times updated"],
            ],
        ),
    ],
]

# ---------------------------------------------------------------------------------------------
# Q3 2024 quarterly business report (DOCX)
# Blocks: ("title"|"h1"|"h2", text), ("p", text), ("t", rows)
# ---------------------------------------------------------------------------------------------

REPORT_BLOCKS: list[tuple[str, object]] = [
    ("title", "Northwind Robotics: Quarterly Business Report, Q3 2024"),
    (
        "p",
        "Quarter ended 30 September 2024. Prepared by Finance (Priya Raman, CFO) for the "
        "operations leadership group. Issued 15 October 2024. Internal.",
    ),
    ("h1", "1. Summary"),
    (
        "p",
        "Revenue for Q3 2024 was USD 11.8 million, up 11% from USD 10.6 million in Q2 2024 and "
        "up 34% from USD 8.8 million in Q3 2023. Gross margin was 41.5% (Q2: 40.2%).",
    ),
    (
        "p",
        "We shipped 212 NR-7 robots against a plan of 234. The shortfall of 22 units was caused "
        "by late battery pack deliveries (see section 4.1); about USD 1.1 million of revenue "
        "moves into Q4 as a result.",
    ),
    ("h1", "2. Revenue by region"),
    (
        "t",
        [
            ["Region", "Q3 2024 (USD m)", "Q2 2024 (USD m)", "Change"],
            ["North America", "6.8", "6.2", "+9.7%"],
            ["EMEA", "3.1", "2.8", "+10.7%"],
            ["APAC", "1.9", "1.6", "+18.8%"],
            ["Total", "11.8", "10.6", "+11.3%"],
        ],
    ),
    (
        "p",
        "North America is served from Portland and Austin, EMEA from Leeds and Munich, and APAC "
        "from Singapore. Service contracts were 23% of total revenue (Q2: 21%). APAC grew "
        "fastest after two new distribution-centre customers went live in August.",
    ),
    ("h1", "3. Headcount"),
    ("p", "Headcount on 30 September 2024 was 240, up from 226 on 30 June 2024."),
    (
        "t",
        [
            ["Office", "30 Jun 2024", "30 Sep 2024"],
            ["Portland (HQ)", "61", "64"],
            ["Austin", "113", "121"],
            ["Leeds", "22", "23"],
            ["Munich", "17", "18"],
            ["Singapore", "13", "14"],
            ["Total", "226", "240"],
        ],
    ),
    (
        "t",
        [
            ["Department", "30 Sep 2024"],
            ["Engineering", "72"],
            ["Manufacturing", "98"],
            ["Sales and customer support", "41"],
            ["General and administrative", "29"],
            ["Total", "240"],
        ],
    ),
    (
        "p",
        "There are 14 open technician requisitions for the new second assembly shift, which "
        "starts on 4 November 2024.",
    ),
    ("h1", "4. Risks"),
    ("h2", "4.1 Battery supply (high)"),
    (
        "p",
        "All NR-7 battery packs (model KE-4850) come from one supplier, Kestrel Energy Co., Ltd. "
        "Kestrel's quoted lead time rose from 6 weeks in Q2 to 16 weeks in September, and "
        "stock on hand covers about 5 weeks of production. Kestrel has also announced a 6% "
        "price increase from 1 January 2025, which would lower NR-7 gross margin by about "
        "0.8 points.",
    ),
    (
        "p",
        "Mitigation: qualify a second battery supplier by 31 March 2025 (owner: Marcus Bell, "
        "Head of Operations) and raise safety stock to 8 weeks of production by the end of Q4.",
    ),
    ("h2", "4.2 Customer concentration (medium)"),
    (
        "p",
        "Our largest customer, Halvorsen Logistics, was 18% of Q3 revenue. Its framework "
        "agreement runs to June 2025; renewal talks start in Q1 2025.",
    ),
    ("h2", "4.3 Currency (medium)"),
    (
        "p",
        "About 35% of revenue is billed in GBP, EUR or SGD while most costs are in USD. We do "
        "not hedge today; Finance will bring a hedging proposal in Q4.",
    ),
    ("h2", "4.4 Information security (low)"),
    (
        "p",
        "Phishing attempts against VPN credentials rose in Q3. Hardware security keys for all "
        "VPN sign-ins will be mandatory from 31 October 2024.",
    ),
    ("h1", "5. Outlook for Q4 2024"),
    (
        "p",
        "We expect Q4 revenue of USD 12.5 to 13.2 million, including the units deferred from "
        "Q3, provided battery deliveries stay at September levels. The higher international "
        "per diem approved in September adds about USD 3,500 per quarter to travel costs.",
    ),
]


# ---------------------------------------------------------------------------------------------


def make_pdf(path: Path = PDF_PATH) -> Path:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import inch
    from reportlab.platypus import (
        PageBreak,
        Paragraph,
        SimpleDocTemplate,
        Spacer,
        Table,
        TableStyle,
    )

    styles = getSampleStyleSheet()
    n_pages = len(SPEC_PAGES)

    def on_page(canv, doc) -> None:  # header and footer on every page
        canv.saveState()
        canv.setFont("Helvetica", 8)
        canv.drawString(inch, letter[1] - 0.6 * inch, f"Northwind Robotics | {SPEC_DOCNO}")
        canv.drawRightString(letter[0] - inch, 0.6 * inch, f"Page {doc.page} of {n_pages}")
        canv.drawString(inch, 0.6 * inch, "Fictional sample document (CC0)")
        canv.restoreState()

    story: list = []
    for i, page in enumerate(SPEC_PAGES):
        for kind, content in page:
            if kind == "title":
                story.append(Paragraph(str(content), styles["Title"]))
            elif kind == "h":
                story.append(Paragraph(str(content), styles["Heading2"]))
            elif kind == "p":
                story.append(Paragraph(str(content), styles["BodyText"]))
                story.append(Spacer(1, 4))
            elif kind == "t":
                rows = [[Paragraph(c, styles["BodyText"]) for c in r] for r in content]  # type: ignore[attr-defined]
                ncols = len(rows[0])
                widths = (
                    [2.4 * inch, 4.1 * inch] if ncols == 2 else [0.6 * inch, 1.6 * inch, 4.3 * inch]
                )
                table = Table(rows, colWidths=widths)
                table.setStyle(
                    TableStyle(
                        [
                            ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
                            ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
                            ("VALIGN", (0, 0), (-1, -1), "TOP"),
                        ]
                    )
                )
                story.append(table)
                story.append(Spacer(1, 8))
            else:
                raise ValueError(kind)
        if i < n_pages - 1:
            story.append(PageBreak())

    doc = SimpleDocTemplate(
        str(path),
        pagesize=letter,
        title=SPEC_TITLE,
        author="Northwind Robotics (fictional)",
        subject=SPEC_DOCNO,
        invariant=1,
    )
    doc.build(story, onFirstPage=on_page, onLaterPages=on_page)
    return path


def _normalize_zip(data: bytes) -> bytes:
    """Rewrite a zip with fixed timestamps and member order, so the bytes are reproducible."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=FIXED_TIME.timetuple()[:6])
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            dst.writestr(zi, src.read(info.filename))
    return out.getvalue()


def make_docx(path: Path = DOCX_PATH) -> Path:
    import docx

    d = docx.Document()
    cp = d.core_properties
    cp.title = "Quarterly Business Report Q3 2024"
    cp.author = "Northwind Robotics Finance (fictional)"
    cp.last_modified_by = "Northwind Robotics Finance (fictional)"
    cp.comments = "Fictional sample document, CC0"
    cp.created = FIXED_TIME
    cp.modified = FIXED_TIME
    cp.last_printed = FIXED_TIME
    cp.revision = 1

    for kind, content in REPORT_BLOCKS:
        if kind == "title":
            d.add_heading(str(content), level=0)
        elif kind == "h1":
            d.add_heading(str(content), level=1)
        elif kind == "h2":
            d.add_heading(str(content), level=2)
        elif kind == "p":
            d.add_paragraph(str(content))
        elif kind == "t":
            rows = content  # type: ignore[assignment]
            table = d.add_table(rows=len(rows), cols=len(rows[0]))  # type: ignore[arg-type]
            table.style = "Table Grid"
            for r, row in enumerate(rows):  # type: ignore[arg-type]
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
                    if r == 0:
                        for run in table.cell(r, c).paragraphs[0].runs:
                            run.bold = True
            d.add_paragraph("")
        else:
            raise ValueError(kind)

    buf = io.BytesIO()
    d.save(buf)
    path.write_bytes(_normalize_zip(buf.getvalue()))
    return path


def main() -> None:
    for p in (make_pdf(), make_docx()):
        print(f"wrote {p.relative_to(HERE.parent)} ({p.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
