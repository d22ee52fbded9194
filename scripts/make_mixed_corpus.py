"""Generate the mixed-format benchmark: a fictional company's shared folder and its questions.

    python scripts/make_mixed_corpus.py [--out benchmarks/mixed]

Writes ``<out>/corpus/`` (PDF, DOCX, PPTX, XLSX, CSV, HTML, EML, JSON, JSONL, Markdown; English,
Swedish and Chinese) and ``<out>/questions.jsonl`` (``id``, ``question``, ``answers``,
``gold_doc_ids`` relative to the corpus root, ``kind``, ``hops``, ``lang``). The facts the
questions ask for sit where real folders hide them: a table row far below its header (row 150 of
a 200-row staff directory), a PDF table continued on page 2, speaker notes only, e-mail headers,
JSON exports without a ``text`` field, a Chinese contract asked in English, and two-hop
questions whose bridge entity (a person, a supplier, a customer) is not named in the question.

Output is byte-for-byte reproducible: seeded random rows, reportlab's invariant mode, fixed
core properties and zip timestamps for the Office files, fixed e-mail dates and Message-IDs.
Everything is fictional (Norrsken Medical AB does not exist); CC0. Needs the dev extras:
reportlab, python-docx, python-pptx and openpyxl.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import random
import zipfile
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "mixed"
FIXED_TIME = dt.datetime(2025, 6, 30, 9, 0, 0)
COMPANY = "Norrsken Medical AB"
DOMAIN = "norrsken-medical.example"

# ---------------------------------------------------------------------------------------------
# People. Planted people carry facts that questions ask for; the rest are seeded filler rows.
# Row numbers are 1-based data rows (the header is row 0), chosen far from the header.
# ---------------------------------------------------------------------------------------------

FIRST = [
    "Anna",
    "Erik",
    "Lars",
    "Karin",
    "Johan",
    "Sara",
    "Per",
    "Lena",
    "Nils",
    "Emma",
    "Olof",
    "Frida",
    "Jonas",
    "Sofia",
    "Mats",
    "Elin",
    "Anders",
    "Klara",
    "Magnus",
    "Hanna",
    "Tobias",
    "Linnea",
    "Fredrik",
    "Ida",
    "Gustav",
    "Ebba",
    "Viktor",
    "Alva",
    "Oskar",
    "Tove",
    "Mikael",
    "Julia",
    "Stefan",
    "Moa",
    "Daniel",
    "Astrid",
    "Kristian",
    "Wilma",
    "Rasmus",
    "Signe",
    "Jukka",
    "Aino",
    "Mette",
    "Sigrid",
    "Tuomas",
]
LAST = [
    "Andersson",
    "Berg",
    "Carlsson",
    "Dahl",
    "Ek",
    "Forsberg",
    "Gustafsson",
    "Holm",
    "Isaksson",
    "Jansson",
    "Karlsson",
    "Lund",
    "Magnusson",
    "Nyström",
    "Olsson",
    "Persson",
    "Quist",
    "Rask",
    "Strand",
    "Törnqvist",
    "Wallin",
    "Åberg",
    "Öhman",
    "Virtanen",
    "Nieminen",
    "Hansen",
    "Nilsen",
    "Jensen",
    "Bergström",
    "Engström",
    "Hedlund",
    "Lindgren",
    "Sandberg",
    "Ström",
    "Wikström",
]
DEPARTMENTS = [
    "Quality Assurance",
    "Regulatory Affairs",
    "R&D Hardware",
    "R&D Software",
    "Service",
    "Supply Chain",
    "Finance",
    "Sales Nordics",
    "Warehouse",
    "HR",
    "IT",
]
SITES = ["Umeå", "Göteborg", "Tallinn", "Shenzhen"]
TITLES = ["Engineer", "Senior Engineer", "Specialist", "Coordinator", "Manager", "Analyst"]

PLANTED_STAFF = {
    150: ("Maja Lindqvist", "Regulatory Affairs", "Senior Specialist", "Umeå", "2019-08-19", 4150),
    163: ("Ingrid Halvorsen", "Quality Assurance", "CAPA Manager", "Umeå", "2014-03-03", 4471),
    171: ("Petter Sandvik", "Warehouse", "Site Manager", "Göteborg", "2018-11-05", 5206),
    187: ("Henrik Sjöberg", "Quality Assurance", "Head of Post-Market", "Umeå", "2016-02-01", 4409),
    194: ("Liu Wei", "Supply Chain", "Sourcing Manager", "Shenzhen", "2021-06-14", 8817),
}
PLANTED_NAMES = {v[0] for v in PLANTED_STAFF.values()} | {"Karin Öberg", "Tomas Westerlund"}


def staff_rows() -> list[list[str]]:
    rng = random.Random(2025)
    used = set(PLANTED_NAMES)
    rows: list[list[str]] = []
    for i in range(1, 201):
        if i in PLANTED_STAFF:
            name, dept, title, site, start, ext = PLANTED_STAFF[i]
        else:
            while True:
                name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                if name not in used:
                    break
            dept = rng.choice(DEPARTMENTS)
            title = rng.choice(TITLES)
            site = rng.choice(SITES)
            start = (dt.date(2008, 1, 7) + dt.timedelta(days=rng.randrange(0, 6200))).isoformat()
            ext = rng.randrange(4000, 8999)
        used.add(name)
        email = (
            name.lower()
            .replace(" ", ".")
            .translate(str.maketrans("åäöø", "aaoo"))
            .replace("é", "e")
        )
        rows.append([f"E{1000 + i}", name, dept, title, site, start, str(ext), f"{email}@{DOMAIN}"])
    return rows


# ---------------------------------------------------------------------------------------------
# Quality report (PDF): prose, then a CAPA log of 64 rows that continues onto page 2.
# ---------------------------------------------------------------------------------------------

CAPA_PLANTED = {
    47: ["CAPA-2025-047", "2025-04-22", "Aurora IP-3", "Occlusion alarm sounds late at low flow rates", "Ingrid Halvorsen", "2025-09-12", "Open"],
    55: ["CAPA-2025-055", "2025-05-06", "Aurora IP-3", "Battery latch cracks after drop test", "Henrik Sjöberg", "2025-07-31", "Closed"],
    61: ["CAPA-2025-061", "2025-05-27", "Lumen PM-2", "SpO2 reading freezes after firmware 4.2 update", "Tomas Westerlund", "2025-10-03", "In verification"],
}  # fmt: skip
CAPA_ISSUES = [
    "Label smudges after disinfection",
    "Door hinge loosens in transport",
    "Keypad membrane wear",
    "Incorrect language on boot screen",
    "Charging dock LED stays amber",
    "Power cord strain relief detached",
    "Pole clamp scratches finish",
    "User manual page order wrong",
    "Packaging foam insert missing",
    "Serial number label misprinted",
]


def capa_rows() -> list[list[str]]:
    rng = random.Random(47)
    owners = ["Karin Öberg", "Anders Holm", "Sara Lund", "Nils Ek", "Frida Dahl"]
    rows = [["CAPA", "Opened", "Product", "Issue", "Owner", "Due", "Status"]]
    for i in range(1, 65):
        if i in CAPA_PLANTED:
            rows.append(CAPA_PLANTED[i])
            continue
        opened = dt.date(2025, 1, 2) + dt.timedelta(days=int(i * 2.6))
        rows.append(
            [
                f"CAPA-2025-{i:03d}",
                opened.isoformat(),
                rng.choice(["Aurora IP-3", "Lumen PM-2", "Aurora IP-3 dock"]),
                rng.choice(CAPA_ISSUES),
                rng.choice(owners),
                (opened + dt.timedelta(days=rng.randrange(40, 160))).isoformat(),
                rng.choice(["Open", "Closed", "Closed", "In verification"]),
            ]
        )
    return rows


QUALITY_PROSE = [
    ("title", "Quality and Post-Market Surveillance Report, Q2 2025"),
    (
        "p",
        "Norrsken Medical AB, Quality Assurance. Document QA-REP-2025-02, issued 8 July 2025. "
        "Prepared by Karin Öberg, Director of Quality. Internal use only.",
    ),
    ("h", "1. Summary"),
    (
        "p",
        "Field complaints for the Aurora IP-3 infusion pump fell to 0.42 per 1,000 units in "
        "service during the second quarter, down from 0.61 in Q1. The Lumen PM-2 patient "
        "monitor stayed at 0.18 per 1,000 units. Two field safety notices were issued in the "
        "quarter; one of them (FSN-2025-03) concerned the battery latch and is tracked below.",
    ),
    (
        "p",
        "The notified body's surveillance audit at the Umeå plant took place on 3 and 4 June "
        "2025 and closed with two minor nonconformities and no major findings.",
    ),
    ("h", "2. Corrective and preventive actions (CAPA log)"),
    (
        "p",
        "Every CAPA opened in 2025 is listed below in order of opening, with its owner and due "
        "date. The list continues on the next page.",
    ),
]


# ---------------------------------------------------------------------------------------------
# Warehouse KPI report (PDF): a monthly table per site.
# ---------------------------------------------------------------------------------------------

KPI_ROWS = [
    ["Month", "Site", "Orders shipped", "On-time %", "Pick errors per 10,000 lines"],
    ["January", "Göteborg", "3,412", "96.1", "7.9"],
    ["January", "Tallinn", "611", "93.4", "11.2"],
    ["February", "Göteborg", "3,105", "97.0", "6.8"],
    ["February", "Tallinn", "588", "94.8", "10.1"],
    ["March", "Göteborg", "3,870", "95.2", "8.3"],
    ["March", "Tallinn", "702", "92.7", "12.6"],
    ["April", "Göteborg", "3,544", "98.3", "4.6"],
    ["April", "Tallinn", "655", "95.5", "9.4"],
    ["May", "Göteborg", "3,698", "97.9", "5.1"],
    ["May", "Tallinn", "690", "96.0", "8.8"],
    ["June", "Göteborg", "3,301", "96.6", "6.2"],
    ["June", "Tallinn", "640", "95.1", "9.9"],
]
KPI_PROSE = [
    ("title", "Distribution Performance, January to June 2025"),
    (
        "p",
        "Prepared by Supply Chain for the monthly operations review. The Göteborg warehouse "
        "ships to hospitals in Sweden, Norway and Denmark; the Tallinn service centre ships "
        "spare parts and refurbished pumps to the Baltic states and Finland.",
    ),
    (
        "p",
        "The drop in pick errors in Göteborg from April onwards follows the introduction of "
        "scan-to-confirm at the packing benches.",
    ),
]


def make_pdf(path: Path, title: str, prose: list[tuple[str, str]], table: list[list[str]],
             widths: list[float], tail: list[tuple[str, str]] | None = None) -> None:  # fmt: skip
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.lib.units import cm
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    small = styles["BodyText"].clone("small", fontSize=8, leading=9.5)

    def on_page(canv: Any, doc: Any) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 7)
        canv.drawString(2 * cm, A4[1] - 1.2 * cm, f"{COMPANY} | {title}")
        canv.drawRightString(A4[0] - 2 * cm, 1.2 * cm, f"Page {doc.page}")
        canv.drawString(2 * cm, 1.2 * cm, "Fictional benchmark document (CC0)")
        canv.restoreState()

    def blocks(items: list[tuple[str, str]]) -> list[Any]:
        out: list[Any] = []
        for kind, text in items:
            style = {"title": "Title", "h": "Heading2", "p": "BodyText"}[kind]
            out.append(Paragraph(text, styles[style]))
            out.append(Spacer(1, 4))
        return out

    story = blocks(prose)
    rows = [[Paragraph(c, small) for c in r] for r in table]
    t = Table(rows, colWidths=[w * cm for w in widths], repeatRows=1)
    t.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.4, colors.grey),
                ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
            ]
        )
    )
    story.append(t)
    if tail:
        story.append(Spacer(1, 8))
        story += blocks(tail)
    doc = SimpleDocTemplate(
        str(path),
        pagesize=A4,
        leftMargin=1.5 * cm,
        rightMargin=1.5 * cm,
        title=title,
        author=f"{COMPANY} (fictional)",
        invariant=1,
    )
    doc.build(story, onFirstPage=on_page, onLaterPages=on_page)


# ---------------------------------------------------------------------------------------------
# Office files (docx, pptx, xlsx)
# ---------------------------------------------------------------------------------------------


def _normalize_zip(data: bytes) -> bytes:
    """Rewrite a zip with fixed timestamps and member order, so the bytes are reproducible."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in sorted(src.infolist(), key=lambda i: (i.filename != "[Content_Types].xml",)):
            zi = zipfile.ZipInfo(info.filename, date_time=FIXED_TIME.timetuple()[:6])
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = _fix_core_dates(data)
            dst.writestr(zi, data)
    return out.getvalue()


def _fix_core_dates(xml: bytes) -> bytes:
    import re

    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    return re.sub(
        rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*(<)", rb"\g<1>" + stamp + rb"\2", xml
    )


def make_docx(path: Path, title: str, blocks: list[tuple[str, Any]]) -> None:
    import docx

    d = docx.Document()
    cp = d.core_properties
    cp.title = title
    cp.author = cp.last_modified_by = f"{COMPANY} (fictional)"
    cp.created = cp.modified = cp.last_printed = FIXED_TIME
    cp.revision = 1
    for kind, content in blocks:
        if kind == "title":
            d.add_heading(content, level=0)
        elif kind in ("h1", "h2"):
            d.add_heading(content, level=int(kind[1]))
        elif kind == "p":
            d.add_paragraph(content)
        elif kind == "li":
            d.add_paragraph(content, style="List Bullet")
        elif kind == "t":
            table = d.add_table(rows=len(content), cols=len(content[0]))
            table.style = "Table Grid"
            for r, row in enumerate(content):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        else:
            raise ValueError(kind)
    buf = io.BytesIO()
    d.save(buf)
    path.write_bytes(_normalize_zip(buf.getvalue()))


HANDBOOK = [
    ("title", "Employee Handbook 2025"),
    (
        "p",
        "Norrsken Medical AB. Applies to all employees in Sweden; the Tallinn and Shenzhen "
        "offices follow local supplements. Owner: HR. Version 7, effective 1 February 2025.",
    ),
    ("h1", "1. Working hours and flexitime"),
    (
        "p",
        "Normal working time is 40 hours a week. Core hours are 09:30 to 15:00 on weekdays; "
        "outside core hours you may start and finish when it suits your team. A flexitime "
        "balance of up to 40 hours may be carried over; anything above that is forfeited at "
        "the end of each calendar quarter unless your manager agreed otherwise in writing.",
    ),
    ("h1", "2. On-call duty for service engineers"),
    (
        "p",
        "Service engineers take part in the on-call rota for hospital customers. Compensation "
        "per on-call period depends on the required response time (tier) and is paid with the "
        "following month's salary.",
    ),
    (
        "t",
        [
            [
                "Tier",
                "Response time",
                "Weekday night (SEK)",
                "Weekend day (SEK)",
                "Public holiday (SEK)",
            ],
            ["Tier 1", "30 minutes", "620", "1,450", "2,100"],
            ["Tier 2", "2 hours", "410", "980", "1,400"],
            ["Tier 3", "Next business day", "150", "300", "450"],
        ],
    ),
    (
        "p",
        "An engineer may be on call at most two weekends in a row. Time worked during an "
        "on-call callout counts as overtime on top of the on-call compensation.",
    ),
    ("h1", "3. Business travel"),
    (
        "p",
        "Book trips through the travel portal at least 14 days ahead. Trains are the default "
        "for journeys under five hours. The daily allowance abroad follows the Swedish Tax "
        "Agency's rates; inside Sweden it is SEK 290 per full day.",
    ),
    ("h2", "3.1 Expense claims"),
    (
        "p",
        "Submit receipts in the expense app within 30 days of returning; claims older than 90 "
        "days are not reimbursed. Hotel nights above SEK 1,800 need your manager's approval "
        "before booking.",
    ),
    ("h1", "4. Equipment and security"),
    (
        "p",
        "Laptops are replaced every four years. Report a lost laptop or phone to the IT "
        "service desk within 24 hours; the device is wiped remotely. Personal USB sticks may "
        "not be used on production computers.",
    ),
    ("h1", "5. Parental leave top-up"),
    (
        "p",
        "On top of the Swedish parental benefit the company pays 10 % of salary for up to 180 "
        "days of parental leave taken before the child turns 18 months, provided the employee "
        "has been employed for at least 12 months.",
    ),
]

LAGERHANDBOK = [
    ("title", "Lagerhandbok – Göteborg"),
    (
        "p",
        "Norrsken Medical AB, centrallagret i Göteborg (Hisingen). Gäller all personal och "
        "inhyrd personal på lagret. Ansvarig: platschef Petter Sandvik. Version 3, maj 2025.",
    ),
    ("h1", "1. Inleverans"),
    (
        "p",
        "Inleveranser tas emot vardagar mellan 07:00 och 14:30. Transportörer som kommer "
        "senare hänvisas till nästa arbetsdag. Varje pall skannas mot följesedeln innan den "
        "lämnar godsmottagningen.",
    ),
    ("h1", "2. Kylrum och temperatur"),
    (
        "p",
        "Kylrummet för läkemedelsnära förbrukningsmaterial ska hålla mellan 2 och 8 °C. "
        "Temperaturen loggas var femte minut; vid larm ringer jourhavande lagerledare inom 15 "
        "minuter och flyttar godset till reservkylen i hall B.",
    ),
    ("h1", "3. Truckar och säkerhet"),
    (
        "p",
        "Endast personal med giltigt truckkort (A- och B-behörighet) får köra motviktstruck. "
        "Skyddsskor och varselväst är obligatoriska i hela lagret. Högsta hastighet inomhus "
        "är 7 km/h.",
    ),
    (
        "t",
        [
            ["Zon", "Innehåll", "Max staplingshöjd"],
            ["A", "Infusionspumpar, nya", "3 pallar"],
            ["B", "Reservdelar och reservkyl", "2 pallar"],
            ["C", "Returer och reklamationer", "1 pall"],
        ],
    ),
    ("h1", "4. Returer"),
    (
        "p",
        "Returnerade pumpar placeras i zon C och får inte öppnas förrän kvalitetsavdelningen "
        "har gett ett returnummer (RMA).",
    ),
]

SUPPLIER_AGREEMENT = [
    ("title", "供货框架协议"),
    ("p", "协议编号：NM-SZ-2024-017"),
    (
        "p",
        "甲方（买方）：Norrsken Medical AB，注册地址：瑞典于默奥。乙方（供方）：深圳华晶传感科技有限公司，"
        "注册地址：中国广东省深圳市南山区。双方经友好协商，就乙方向甲方供应压力传感器事宜达成如下协议。",
    ),
    ("h1", "第一条 产品与价格"),
    (
        "p",
        "乙方向甲方供应型号为 PS-220 的医用压力传感器，用于甲方的 Aurora 系列输液泵。单价为每件 3.85 美元"
        "（FCA 深圳），价格自 2025 年 1 月 1 日起有效，有效期十二个月。每批订单的最小起订量为 5,000 件。",
    ),
    ("h1", "第二条 交货"),
    (
        "p",
        "乙方应在收到甲方书面订单后 45 个自然日内交货。如乙方延迟交货，每延迟一日，应按延迟交付货物价值的"
        "百分之零点五（0.5%）向甲方支付违约金，违约金总额不超过该批货物价值的百分之十。",
    ),
    ("h1", "第三条 付款"),
    ("p", "甲方在收到乙方合格发票及货物验收合格后六十（60）日内以电汇方式付款。"),
    ("h1", "第四条 质量保证"),
    (
        "p",
        "乙方保证所供产品符合 ISO 13485 质量体系要求。产品质保期为自交货之日起二十四（24）个月。"
        "质保期内出现的质量问题，乙方应免费更换。",
    ),
    ("h1", "第五条 争议解决"),
    (
        "p",
        "因本协议引起的或与本协议有关的任何争议，双方应友好协商解决；协商不成的，任何一方均可将争议提交"
        "上海国际仲裁中心，按照申请仲裁时该中心现行有效的仲裁规则进行仲裁。仲裁裁决是终局的。",
    ),
    ("h1", "第六条 其他"),
    (
        "p",
        "本协议自双方签字盖章之日起生效，有效期三年。甲方代表：采购经理 Liu Wei；乙方代表：销售总监 陈建国。"
        "签订日期：2024 年 11 月 20 日。",
    ),
]


SLIDES = [
    (
        "Board update – first half 2025",
        ["Norrsken Medical AB", "Board meeting, Umeå, 27 August 2025"],
        "Welcome. Today: results, products, sites, and one strategic item at the end.",
    ),
    (
        "Results H1 2025",
        ["Net sales SEK 412 million (+9 %)", "EBIT margin 11.8 %", "Order backlog at record level"],
        "If asked: the Norwegian tender for 1,900 Aurora pumps is signed but not in net sales "
        "yet; deliveries start in October.",
    ),
    (
        "Product roadmap",
        [
            "Aurora IP-4: verification testing under way",
            "Lumen PM-2 firmware 4.3 released",
            "Home-care pump concept study started",
        ],
        "Not on the slide on purpose: the FDA 510(k) submission for the Aurora IP-4 is planned "
        "for 14 November 2025. Keep that date inside this room until regulatory affairs has "
        "confirmed it.",
    ),
    (
        "Sites",
        [
            "Umeå: production and R&D",
            "Göteborg: central warehouse",
            "Tallinn: service centre",
            "Shenzhen: sourcing office",
        ],
        "Heads-up for the board: the lease of the Tallinn service centre runs out in March "
        "2027. We plan to stay but want a shorter notice period.",
    ),
    (
        "Strategic item",
        ["Inorganic growth in diagnostics", "Discussion, no decision today"],
        "Confidential: we are in early talks to acquire Kestrel Diagnostics Oy in Oulu. "
        "Indicative price around SEK 180 million. Code name for the project is Lapwing.",
    ),
]


def make_pptx(path: Path) -> None:
    from pptx import Presentation

    prs = Presentation()
    cp = prs.core_properties
    cp.title = SLIDES[0][0]
    cp.author = cp.last_modified_by = f"{COMPANY} (fictional)"
    cp.created = cp.modified = FIXED_TIME
    cp.revision = 1
    for i, (title, bullets, notes) in enumerate(SLIDES):
        slide = prs.slides.add_slide(prs.slide_layouts[0 if i == 0 else 1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0]
        for b in bullets[1:]:
            body.add_paragraph().text = b
        slide.notes_slide.notes_text_frame.text = notes
    buf = io.BytesIO()
    prs.save(buf)
    path.write_bytes(_normalize_zip(buf.getvalue()))


BUDGET_OPEX = [
    ["Department", "Q1", "Q2", "Q3", "Q4", "Total"],
    ["Quality Assurance", "6.1", "6.3", "6.0", "6.4", "24.8"],
    ["Regulatory Affairs", "3.9", "4.2", "5.7", "4.1", "17.9"],
    ["R&D Hardware", "14.2", "14.9", "15.3", "15.0", "59.4"],
    ["R&D Software", "9.8", "10.1", "10.4", "10.6", "40.9"],
    ["Service", "7.7", "7.9", "7.5", "8.2", "31.3"],
    ["Supply Chain", "5.2", "5.4", "5.1", "5.6", "21.3"],
    ["Sales Nordics", "8.8", "9.6", "8.1", "10.2", "36.7"],
]
BUDGET_CAPEX = [
    ["Project", "Site", "Owner", "Budget (MSEK)", "Start"],
    ["Assembly line 4 automation", "Umeå", "R&D Hardware", "22.5", "2025-03"],
    ["Cold room extension", "Göteborg", "Warehouse", "3.8", "2025-05"],
    ["Test rig for Aurora IP-4", "Umeå", "R&D Hardware", "6.2", "2025-02"],
    ["Service workshop refit", "Tallinn", "Service", "1.9", "2025-09"],
    ["ERP upgrade", "Umeå", "IT", "8.4", "2025-01"],
]
BUDGET_HEADCOUNT = [
    ["Department", "FTE end 2024", "FTE plan end 2025", "Open roles"],
    ["Quality Assurance", "21", "23", "2"],
    ["Regulatory Affairs", "12", "15", "3"],
    ["R&D Hardware", "38", "41", "3"],
    ["R&D Software", "27", "31", "4"],
    ["Service", "34", "34", "0"],
    ["Warehouse", "29", "30", "1"],
]

PART_PLANTED = {
    97: ["NM-40213", "Pressure sensor PS-220", "Shenzhen Huajing Sensor", "B-14-03", "6,200", "5,000"],
    142: ["NM-40877", "Silicone tubing set 2.5 mm", "Gislaved Polymer AB", "A-02-11", "1,840", "2,500"],
    166: ["NM-41190", "Battery latch, reinforced (rev D)", "Tartu Plast OÜ", "B-07-09", "310", "400"],
}  # fmt: skip
PART_WORDS = [
    "Screw",
    "Washer",
    "Gasket",
    "Cable",
    "Connector",
    "Housing",
    "Bracket",
    "Spring",
    "Valve",
    "Filter",
    "Clip",
    "Seal",
    "Label",
    "Knob",
    "Hinge",
    "Foam",
    "Fuse",
    "Plug",
    "Board",
    "Lens",
]
PART_SUPPLIERS = ["Gislaved Polymer AB", "Tartu Plast OÜ", "Kuopio Metal Oy", "Rheinform GmbH"]


def part_rows() -> list[list[str]]:
    rng = random.Random(40213)
    rows = [["Part no", "Description", "Supplier", "Bin", "On hand", "Reorder point"]]
    for i in range(1, 181):
        if i in PART_PLANTED:
            rows.append(PART_PLANTED[i])
            continue
        rows.append(
            [
                f"NM-{30000 + i * 57}",
                f"{rng.choice(PART_WORDS)} {rng.choice(['M3', 'M4', 'small', 'large', 'type 2', 'grey', 'rev B'])}",
                rng.choice(PART_SUPPLIERS),
                f"{rng.choice('ABC')}-{rng.randrange(1, 20):02d}-{rng.randrange(1, 12):02d}",
                f"{rng.randrange(0, 4000):,}",
                f"{rng.randrange(50, 3000):,}",
            ]
        )
    return rows


def make_xlsx(path: Path, sheets: list[tuple[str, list[list[str]]]]) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    wb.properties.creator = f"{COMPANY} (fictional)"
    wb.properties.created = wb.properties.modified = FIXED_TIME
    for name, rows in sheets:
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    path.write_bytes(_normalize_zip(buf.getvalue()))


# ---------------------------------------------------------------------------------------------
# HTML, e-mail, JSON, Markdown
# ---------------------------------------------------------------------------------------------

IT_DESK_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>IT service desk – Norrsken intranet</title></head>
<body>
<nav><a href="/">Intranet</a> › <a href="/it">IT</a> › Service desk</nav>
<h1>IT service desk</h1>
<p>Log a ticket in the self-service portal or call the desk. For a lost or stolen device call
at once, whatever the time: the device is wiped remotely.</p>
<h2>Opening hours per site</h2>
<table>
<thead><tr><th>Site</th><th>Desk hours (local time)</th><th>Phone</th><th>On-site technician</th></tr></thead>
<tbody>
<tr><td>Umeå</td><td>07:00–18:00 Mon–Fri</td><td>ext. 4000</td><td>Yes, building 2</td></tr>
<tr><td>Göteborg</td><td>07:00–16:00 Mon–Fri</td><td>ext. 5000</td><td>Tuesdays and Thursdays</td></tr>
<tr><td>Tallinn</td><td>08:00–17:00 Mon–Fri</td><td>ext. 7000</td><td>No, remote only</td></tr>
<tr><td>Shenzhen</td><td>09:00–18:00 Mon–Fri</td><td>ext. 8000</td><td>No, remote only</td></tr>
</tbody></table>
<h2>Escalation</h2>
<table>
<thead><tr><th>Level</th><th>Who</th><th>When</th></tr></thead>
<tbody>
<tr><td>1</td><td>Service desk agent</td><td>Every ticket</td></tr>
<tr><td>2</td><td>Infrastructure team (lead: Jonas Wallin)</td><td>Outage affecting more than 10 users</td></tr>
<tr><td>3</td><td>CIO Tove Rask</td><td>Production or patient-data systems down over 1 hour</td></tr>
</tbody></table>
<h2>VPN</h2>
<p>Remote access uses the Norrsken VPN client with multi-factor authentication. Sessions are
disconnected after 12 hours; reconnect to continue.</p>
<footer>Fictional benchmark page (CC0). Last reviewed 2 June 2025.</footer>
</body></html>
"""

FRISKVARD_HTML = """<!DOCTYPE html>
<html lang="sv"><head><meta charset="utf-8"><title>Friskvårdsbidrag – Norrsken intranät</title></head>
<body>
<h1>Friskvårdsbidrag 2025</h1>
<p>Alla tillsvidareanställda i Sverige har rätt till ett friskvårdsbidrag på högst 4 500 kronor
per kalenderår. Bidraget betalas ut mot kvitto via utläggsappen och ska begäras senast
den 15 december.</p>
<h2>Vad bidraget täcker</h2>
<table>
<thead><tr><th>Aktivitet</th><th>Ingår</th><th>Kommentar</th></tr></thead>
<tbody>
<tr><td>Gymkort och träningsavgifter</td><td>Ja</td><td>Även klippkort</td></tr>
<tr><td>Massage</td><td>Ja</td><td>Högst 1 500 kr av bidraget</td></tr>
<tr><td>Golf</td><td>Nej</td><td>Greenfee räknas inte som friskvård</td></tr>
<tr><td>Utrustning (skor, kläder)</td><td>Nej</td><td></td></tr>
</tbody></table>
<p>Frågor besvaras av HR via hr@norrsken-medical.example.</p>
</body></html>
"""

STANDUP_MD = """# Ops stand-up, 2 June 2025

Attendees: Petter Sandvik (Warehouse), Liu Wei (Supply Chain), Anders Holm (Service), Karin Öberg (QA)

## Decisions

- The **reinforced battery latch (rev D)** replaces rev C in all field service kits from 16 June.
- Returns from Denmark go to Göteborg again; the temporary route via Tallinn ends this week.

## Actions

| Action | Owner | Due |
|---|---|---|
| Count rev C latches left in Tallinn and scrap them | Anders Holm | 2025-06-09 |
| Ask Huajing for an earlier PS-220 shipment | Liu Wei | 2025-06-05 |
| Update the RMA form with the new latch part number | Karin Öberg | 2025-06-13 |
"""


def _mail(sender: str, to: str, subject: str, date: dt.datetime, body: str,
          msg_id: str, cc: str | None = None, reply_to_id: str | None = None) -> bytes:  # fmt: skip
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    if cc:
        msg["Cc"] = cc
    msg["Subject"] = subject
    msg["Date"] = format_datetime(date)
    msg["Message-ID"] = f"<{msg_id}@{DOMAIN}>"
    if reply_to_id:
        msg["In-Reply-To"] = f"<{reply_to_id}@{DOMAIN}>"
        msg["References"] = f"<{reply_to_id}@{DOMAIN}>"
    msg.set_content(body, cte="quoted-printable")
    return msg.as_bytes()


CEST = dt.timezone(dt.timedelta(hours=2))
EMAILS = {
    "mail/fsn-2025-03_battery_latch.eml": dict(
        sender=f"Henrik Sjöberg <henrik.sjoberg@{DOMAIN}>",
        to=f"Service Nordics <service-nordics@{DOMAIN}>",
        cc=f"Karin Öberg <karin.oberg@{DOMAIN}>",
        subject="Field safety notice FSN-2025-03: Aurora IP-3 battery latch",
        date=dt.datetime(2025, 5, 14, 8, 42, tzinfo=CEST),
        msg_id="fsn-2025-03.1",
        body=(
            "Hi all,\n\n"
            "we are issuing a field safety notice for the Aurora IP-3 battery latch. In short:\n\n"
            "* Affected units: serial numbers AIP3-21500 to AIP3-23999 (about 2,500 pumps).\n"
            "* Customer letters must be sent by 23 May 2025.\n"
            "* Service replaces the latch with the reinforced rev D part (NM-41190) at the next "
            "preventive maintenance, or within 90 days at the latest.\n"
            "* Hospitals may keep using the pumps meanwhile; the latch failure leads to a "
            "battery alarm, not to a stop of the infusion.\n\n"
            "The CAPA is CAPA-2025-055. Questions to me or to Karin.\n\n"
            "Henrik Sjöberg\nHead of Post-Market Surveillance, Norrsken Medical AB\n"
        ),
    ),
    "mail/re_fsn-2025-03_battery_latch.eml": dict(
        sender=f"Anders Holm <anders.holm@{DOMAIN}>",
        to=f"Henrik Sjöberg <henrik.sjoberg@{DOMAIN}>",
        subject="Re: Field safety notice FSN-2025-03: Aurora IP-3 battery latch",
        date=dt.datetime(2025, 5, 14, 10, 5, tzinfo=CEST),
        msg_id="fsn-2025-03.2",
        reply_to_id="fsn-2025-03.1",
        body=(
            "Henrik,\n\n"
            "service can start on Monday 19 May. We have 310 rev D latches in stock, so we will "
            "prioritise the Norwegian hospitals first. Tallinn will handle the Baltic units.\n\n"
            "Anders\n\n"
            "> we are issuing a field safety notice for the Aurora IP-3 battery latch.\n"
            "> * Affected units: serial numbers AIP3-21500 to AIP3-23999 (about 2,500 pumps).\n"
            "> * Customer letters must be sent by 23 May 2025.\n"
        ),
    ),
    "mail/fw_customs_hold_goteborg.eml": dict(
        sender=f"Liu Wei <liu.wei@{DOMAIN}>",
        to=f"Petter Sandvik <petter.sandvik@{DOMAIN}>",
        subject="FW: Shipment HJ-5521 held at customs",
        date=dt.datetime(2025, 6, 3, 16, 17, tzinfo=CEST),
        msg_id="customs-hj-5521",
        body=(
            "Petter,\n\n"
            "forwarding the forwarder's message below. The PS-220 sensors for your warehouse "
            "are stuck in customs:\n\n"
            "* Shipment: HJ-5521, 6 pallets, 12,000 pressure sensors\n"
            "* Reason: commodity code on the invoice does not match the declaration\n"
            "* Expected release: 6 June 2025 once the corrected invoice is filed\n\n"
            "Please keep a slot free at goods receiving that afternoon.\n\n"
            "Liu Wei\nSourcing Manager, Shenzhen office\n\n"
            "---------- Forwarded message ----------\n"
            "From: Nordic Freight Partners <ops@nfp.example>\n"
            "Subject: HJ-5521 customs hold\n\n"
            "Your shipment HJ-5521 is held by customs pending a corrected commercial invoice.\n"
        ),
    ),
    "mail/tallinn_service_centre_visit.eml": dict(
        sender=f"Tove Rask <tove.rask@{DOMAIN}>",
        to=f"Anders Holm <anders.holm@{DOMAIN}>",
        subject="Network upgrade at the Tallinn service centre",
        date=dt.datetime(2025, 4, 28, 13, 30, tzinfo=CEST),
        msg_id="tallinn-net",
        body=(
            "Anders,\n\nthe network upgrade in Tallinn is scheduled as follows:\n\n"
            "* Date: Saturday 10 May 2025, 08:00-14:00 local time\n"
            "* Contractor: Baltic Networks OÜ\n"
            "* The workshop test benches will be offline during the window\n\n"
            "Tove\n"
        ),
    ),
}

CUSTOMERS = [
    ("C-0101", "Norrland University Hospital", "SE", "Region", "Sara Lund"),
    ("C-0108", "Oslo Sentralsykehus", "NO", "Region", "Magnus Strand"),
    ("C-0117", "St. Olav Clinic Trondheim", "NO", "Private", "Elin Forsberg"),
    ("C-0123", "Aarhus Kommunehospital", "DK", "Region", "Jonas Wallin"),
    ("C-0131", "Tartu Ülikooli Kliinikum", "EE", "University", "Kristian Dahl"),
    ("C-0140", "Helsinki Home Care Services", "FI", "Municipal", "Aino Virtanen"),
    ("C-0152", "Västerbotten Home Care", "SE", "Municipal", "Sara Lund"),
    ("C-0166", "Riga East Hospital", "LV", "Region", "Kristian Dahl"),
]


def crm_accounts() -> list[dict[str, Any]]:
    rng = random.Random(117)
    out = []
    for cid, name, country, segment, manager in CUSTOMERS:
        renewal = dt.date(2025, 7, 1) + dt.timedelta(days=rng.randrange(0, 500))
        out.append(
            {
                "account_id": cid,
                "name": name,
                "country": country,
                "segment": segment,
                "account_manager": manager,
                "contract": {
                    "renewal_date": renewal.isoformat(),
                    "annual_value_sek": rng.randrange(8, 120) * 50_000,
                    "pumps_installed": rng.randrange(40, 900),
                },
            }
        )
    out[2]["contract"]["renewal_date"] = "2026-01-31"  # asked about
    return out


TICKETS_PLANTED = {
    "SR-10431": {"priority": "P2", "customer_id": "C-0101", "category": "alarm",
                 "device": {"model": "Aurora IP-3", "serial": "AIP3-19044"}},
    "SR-10457": {"priority": "P1", "customer_id": "C-0123", "category": "no power",
                 "device": {"model": "Aurora IP-3", "serial": "AIP3-22871"},
                 "assignee": "Rasmus Jensen"},
    "SR-10482": {"priority": "P3", "customer_id": "C-0117", "category": "display",
                 "device": {"model": "Lumen PM-2", "serial": "LPM2-05512"}},
}  # fmt: skip


def tickets() -> list[dict[str, Any]]:
    rng = random.Random(10400)
    techs = ["Anders Holm", "Signe Ek", "Mikael Nilsen", "Rasmus Jensen", "Mette Hansen"]
    out = []
    for n in range(10400, 10520):
        tid = f"SR-{n}"
        opened = dt.datetime(2025, 3, 1, 7, 0) + dt.timedelta(
            hours=n % 120 * 13 + rng.randrange(0, 12)
        )
        model = rng.choice(["Aurora IP-3", "Lumen PM-2"])
        rec: dict[str, Any] = {
            "ticket_id": tid,
            "opened_at": opened.isoformat(timespec="minutes"),
            "customer_id": rng.choice([c[0] for c in CUSTOMERS]),
            "device": {"model": model, "serial": f"{'AIP3' if 'Aurora' in model else 'LPM2'}-{rng.randrange(1000, 24000):05d}"},
            "category": rng.choice(["alarm", "display", "battery", "keypad", "no power", "calibration"]),
            "priority": rng.choice(["P2", "P3", "P3", "P4"]),
            "status": rng.choice(["closed", "closed", "open", "waiting for parts"]),
            "assignee": rng.choice(techs),
        }  # fmt: skip
        rec.update(TICKETS_PLANTED.get(tid, {}))
        if tid == "SR-10457":
            rec["status"] = "waiting for parts"
        if tid == "SR-10457":
            rec["opened_at"] = "2025-05-02T06:48"
        out.append(rec)
    return out


SLA = {
    "policy": "Norrsken Care service level agreement",
    "version": "2025.1",
    "applies_to": ["Aurora IP-3", "Lumen PM-2"],
    "sla": {
        "priorities": {
            "P1": {"description": "device down, no replacement on ward", "response_minutes": 30,
                   "restore_hours": 8, "loan_device": True},
            "P2": {"description": "device down, replacement available", "response_minutes": 120,
                   "restore_hours": 24, "loan_device": True},
            "P3": {"description": "degraded function", "response_minutes": 480,
                   "restore_hours": 72, "loan_device": False},
            "P4": {"description": "question or cosmetic", "response_minutes": 1440,
                   "restore_hours": 240, "loan_device": False},
        },
        "service_hours": {"standard": "Mon-Fri 07:00-17:00 CET", "extended": "24/7 for P1"},
        "penalties": {"credit_per_missed_P1_percent": 5, "cap_percent_of_annual_fee": 20},
        "preventive_maintenance": {"interval_months": 12, "battery_replacement_months": 36},
    },
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Questions. gold_doc_ids are paths relative to the corpus root.
# ---------------------------------------------------------------------------------------------

F = {
    "quality": "reports/quality_report_2025_q2.pdf",
    "kpi": "reports/distribution_kpi_2025_h1.pdf",
    "handbook": "handbook/employee_handbook_2025.docx",
    "lager": "handbook/lagerhandbok_goteborg.docx",
    "supplier": "suppliers/供货协议_深圳华晶传感_PS-220.docx",
    "deck": "decks/board_update_2025_h1.pptx",
    "budget": "finance/budget_2025.xlsx",
    "parts": "operations/spare_parts_inventory.xlsx",
    "staff": "hr/staff_directory.csv",
    "itdesk": "intranet/it_service_desk.html",
    "friskvard": "intranet/friskvardsbidrag.html",
    "fsn": "mail/fsn-2025-03_battery_latch.eml",
    "fsn_re": "mail/re_fsn-2025-03_battery_latch.eml",
    "customs": "mail/fw_customs_hold_goteborg.eml",
    "tallinn": "mail/tallinn_service_centre_visit.eml",
    "tickets": "exports/service_tickets.jsonl",
    "crm": "exports/crm_accounts.json",
    "sla": "exports/sla_policy.json",
    "standup": "notes/ops_standup_2025-06-02.md",
}

# (question, answers, gold keys, kind, lang, evidence). ``answers`` are alternatives (SQuAD
# convention); ``evidence`` are strings that must all appear in the retrieved chunks for the
# answer to be there (the table row, not just its document), written as the document has them.
QUESTIONS: list[tuple[str, list[str], list[str], str, str, list[str]]] = [
    # table rows far from their header
    ("When did Maja Lindqvist join the company?", ["2019-08-19", "19 August 2019"], ["staff"], "table_row", "en", ["Maja Lindqvist", "2019-08-19"]),
    ("What's Ingrid Halvorsen's phone extension?", ["4471"], ["staff"], "table_row", "en", ["Ingrid Halvorsen", "4471"]),
    ("Which site does Petter Sandvik work at?", ["Göteborg", "Gothenburg"], ["staff"], "table_row", "en", ["Petter Sandvik", "Göteborg"]),
    ("What job title does Liu Wei have?", ["Sourcing Manager"], ["staff"], "table_row", "en", ["Liu Wei", "Sourcing Manager"]),
    ("Who owns CAPA-2025-061 and when is it due?", ["Tomas Westerlund, due 2025-10-03"], ["quality"], "table_row", "en", ["CAPA-2025-061", "Westerlund", "2025-10-03"]),
    ("Is the CAPA about the battery latch cracking in the drop test still open?", ["No, it is closed", "Closed"], ["quality"], "table_row", "en", ["Battery latch cracks", "Closed"]),
    ("What is the due date for fixing the late occlusion alarm on the IP-3?", ["2025-09-12"], ["quality"], "table_row", "en", ["Occlusion alarm", "2025-09-12"]),
    ("Which bin is the PS-220 pressure sensor stored in?", ["B-14-03"], ["parts"], "table_row", "en", ["PS-220", "B-14-03"]),
    ("At what stock level should we reorder the 2.5 mm silicone tubing sets?", ["2,500", "2500"], ["parts"], "table_row", "en", ["Silicone tubing", "2,500"]),
    ("How many reinforced battery latches do we have on hand?", ["310"], ["parts"], "table_row", "en", ["Battery latch, reinforced"]),
    ("What was the on-time shipping rate in Tallinn in May?", ["96.0", "96.0 %", "96%"], ["kpi"], "table_row", "en", ["96.0"]),
    ("How many pick errors per 10,000 lines did Göteborg have in April?", ["4.6"], ["kpi"], "table_row", "en", ["4.6"]),
    ("How much is a weekend day on call paid at tier 2?", ["980", "SEK 980"], ["handbook"], "table_row", "en", ["980"]),
    ("How much opex has Regulatory Affairs budgeted for the third quarter?", ["5.7"], ["budget"], "table_row", "en", ["Regulatory Affairs", "5.7"]),
    ("What is the capex budget for the cold room extension in Göteborg?", ["3.8", "3.8 MSEK"], ["budget"], "table_row", "en", ["Cold room extension", "3.8"]),
    ("How many FTEs does R&D Software plan to have at the end of 2025?", ["31"], ["budget"], "table_row", "en", ["FTE plan end 2025", "31"]),
    ("What are the IT service desk's hours in Göteborg?", ["07:00–16:00 Mon–Fri", "07:00-16:00"], ["itdesk"], "table_row", "en", ["07:00–16:00"]),
    ("Who do I escalate to when a patient-data system has been down for more than an hour?", ["Tove Rask", "CIO Tove Rask"], ["itdesk"], "table_row", "en", ["Tove Rask"]),
    # speaker notes only
    ("When is the 510(k) for the IP-4 supposed to go to the FDA?", ["14 November 2025"], ["deck"], "notes", "en", ["14 November 2025"]),
    ("Which company are we thinking of buying in diagnostics, and at roughly what price?", ["Kestrel Diagnostics Oy, around SEK 180 million"], ["deck"], "notes", "en", ["Kestrel Diagnostics", "180 million"]),
    ("What's the code name of the acquisition project?", ["Lapwing"], ["deck"], "notes", "en", ["Lapwing"]),
    ("How many Aurora pumps are in the signed Norwegian tender?", ["1,900", "1900"], ["deck"], "notes", "en", ["1,900"]),
    # e-mail headers and bullets
    ("Who sent out the field safety notice about the IP-3 battery latch?", ["Henrik Sjöberg"], ["fsn"], "email_header", "en", ["Henrik Sjöberg"]),
    ("On what date was the battery latch FSN e-mailed to service?", ["14 May 2025", "2025-05-14"], ["fsn"], "email_header", "en", ["14 May 2025"]),
    ("Which serial numbers are affected by FSN-2025-03?", ["AIP3-21500 to AIP3-23999"], ["fsn"], "email_header", "en", ["AIP3-21500", "AIP3-23999"]),
    ("Who replied to Henrik about the latch notice, and when can service start?", ["Anders Holm, Monday 19 May"], ["fsn_re"], "email_header", "en", ["Anders Holm", "19 May"]),
    ("Who forwarded the customs hold message for shipment HJ-5521?", ["Liu Wei"], ["customs"], "email_header", "en", ["Liu Wei"]),
    ("When is the network work in Tallinn, and who is doing it?", ["Saturday 10 May 2025, Baltic Networks OÜ"], ["tallinn"], "email_header", "en", ["10 May 2025", "Baltic Networks"]),
    # JSON exports without a text field
    ("Who is assigned to service request SR-10457?", ["Rasmus Jensen"], ["tickets"], "json_record", "en", ["SR-10457", "Rasmus Jensen"]),
    ("What's the serial number of the monitor in ticket SR-10482?", ["LPM2-05512"], ["tickets"], "json_record", "en", ["SR-10482", "LPM2-05512"]),
    ("When does the St. Olav Clinic contract come up for renewal?", ["2026-01-31"], ["crm"], "json_record", "en", ["St. Olav", "2026-01-31"]),
    ("Who manages the Tartu university hospital account?", ["Kristian Dahl"], ["crm"], "json_record", "en", ["Tartu", "Kristian Dahl"]),
    ("How quickly must we restore a P1 device under the service agreement?", ["8 hours", "8"], ["sla"], "json_record", "en", ["P1", "restore_hours"]),
    ("What credit does a customer get for each missed P1 commitment?", ["5 %", "5%", "5"], ["sla"], "json_record", "en", ["credit_per_missed_P1_percent"]),
    # cross-lingual: Chinese / Swedish documents asked in another language, and vice versa
    ("What are the payment terms in our PS-220 sensor supply agreement?", ["60 days", "60"], ["supplier"], "cross_lingual", "en", ["六十（60）日"]),
    ("How long is the warranty on the PS-220 sensors from Huajing?", ["24 months", "24"], ["supplier"], "cross_lingual", "en", ["二十四（24）个月"]),
    ("What's the penalty per day if the Shenzhen sensor supplier delivers late?", ["0.5%", "0.5 %"], ["supplier"], "cross_lingual", "en", ["0.5%"]),
    ("What is the minimum order quantity for PS-220 sensors?", ["5,000", "5000"], ["supplier"], "cross_lingual", "en", ["最小起订量"]),
    ("What temperature must the cold room in the Göteborg warehouse keep?", ["2 and 8 °C", "2–8 °C"], ["lager"], "cross_lingual", "en", ["mellan 2 och 8 °C"]),
    ("Until what time are deliveries received at the Göteborg warehouse?", ["14:30"], ["lager"], "cross_lingual", "en", ["14:30"]),
    ("How much wellness allowance can I claim per year?", ["4 500 kronor", "4,500", "SEK 4,500"], ["friskvard"], "cross_lingual", "en", ["4 500 kronor"]),
    ("二级值班的周末白天补贴是多少？", ["980", "SEK 980"], ["handbook"], "cross_lingual", "zh", ["980"]),
    ("P1 级别的服务请求要求多少分钟内响应？", ["30"], ["sla"], "cross_lingual", "zh", ["response_minutes"]),
    ("Hur många dagar har jag på mig att lämna in kvitton för reseutlägg?", ["30 dagar", "30"], ["handbook"], "cross_lingual", "sv", ["within 30 days"]),
    # prose
    ("What was the IP-3 complaint rate in Q2 2025?", ["0.42 per 1,000 units", "0.42"], ["quality"], "prose", "en", ["0.42 per 1,000"]),
    ("How much flexitime can I carry over?", ["40 hours"], ["handbook"], "prose", "en", ["up to 40 hours"]),
    ("From when do field service kits use the rev D latch?", ["16 June", "16 June 2025"], ["standup"], "prose", "en", ["16 June"]),
    # two hops: the bridge entity is not in the question
    ("What is the phone extension of whoever owns the CAPA for the late occlusion alarm?", ["4471"], ["quality", "staff"], "two_hop", "en", ["Occlusion alarm", "2014-03-03"]),
    ("Where would a dispute with the supplier of the part stored in bin B-14-03 be arbitrated?", ["Shanghai International Arbitration Center", "上海国际仲裁中心", "Shanghai"], ["parts", "supplier"], "two_hop", "en", ["B-14-03", "上海国际仲裁中心"]),
    ("Who is the account manager for the customer behind ticket SR-10482?", ["Elin Forsberg"], ["tickets", "crm"], "two_hop", "en", ["SR-10482", "Elin Forsberg"]),
    ("How many minutes do we have to respond to ticket SR-10431 under the SLA?", ["120"], ["tickets", "sla"], "two_hop", "en", ["SR-10431", "response_minutes"]),
    ("When did the person who sent the battery latch safety notice start at the company?", ["2016-02-01"], ["fsn", "staff"], "two_hop", "en", ["Henrik Sjöberg", "2016-02-01"]),
    ("What are the IT desk hours at the site whose lease expires in March 2027?", ["08:00–17:00 Mon–Fri", "08:00-17:00"], ["deck", "itdesk"], "two_hop", "en", ["March 2027", "08:00–17:00"]),
    ("What temperature range must be kept where the held-up HJ-5521 sensors are going?", ["2 and 8 °C", "2–8 °C"], ["customs", "lager"], "two_hop", "en", ["HJ-5521", "mellan 2 och 8 °C"]),
]  # fmt: skip


def questions() -> list[dict[str, Any]]:
    out = []
    for i, (q, answers, gold, kind, lang, evidence) in enumerate(QUESTIONS, start=1):
        out.append(
            {
                "id": f"mx{i:02d}",
                "question": q,
                "answers": answers,
                "gold_doc_ids": [F[g] for g in gold],
                "kind": kind,
                "hops": len(gold),
                "lang": lang,
                "evidence": evidence,
            }
        )
    return out


# ---------------------------------------------------------------------------------------------


def build(out: Path) -> list[Path]:
    corpus = out / "corpus"
    written: list[Path] = []

    def path(key: str) -> Path:
        p = corpus / F[key]
        p.parent.mkdir(parents=True, exist_ok=True)
        written.append(p)
        return p

    make_pdf(
        path("quality"),
        "Quality and Post-Market Surveillance Report, Q2 2025",
        QUALITY_PROSE,
        capa_rows(),
        [2.7, 1.9, 2.4, 4.6, 2.6, 1.9, 1.9],
        tail=[
            ("h", "3. Outlook"),
            (
                "p",
                "For Q3 the quality team expects to close at least 15 CAPAs and to complete the "
                "supplier audit of Shenzhen Huajing Sensor in September.",
            ),
        ],
    )
    make_pdf(
        path("kpi"),
        "Distribution Performance, January to June 2025",
        KPI_PROSE,
        KPI_ROWS,
        [2.4, 2.6, 3.0, 2.4, 4.6],
    )
    make_docx(path("handbook"), "Employee Handbook 2025", HANDBOOK)
    make_docx(path("lager"), "Lagerhandbok Göteborg", LAGERHANDBOK)
    make_docx(path("supplier"), "供货框架协议 NM-SZ-2024-017", SUPPLIER_AGREEMENT)
    make_pptx(path("deck"))
    make_xlsx(
        path("budget"),
        [("Opex (MSEK)", BUDGET_OPEX), ("Capex", BUDGET_CAPEX), ("Headcount", BUDGET_HEADCOUNT)],
    )
    make_xlsx(
        path("parts"),
        [
            ("Parts", part_rows()),
            (
                "Suppliers",
                [
                    ["Supplier", "Country", "Contact"],
                    ["Shenzhen Huajing Sensor", "China", "Chen Jianguo"],
                    ["Gislaved Polymer AB", "Sweden", "Ulla Berg"],
                    ["Tartu Plast OÜ", "Estonia", "Kadri Tamm"],
                    ["Kuopio Metal Oy", "Finland", "Ville Koski"],
                    ["Rheinform GmbH", "Germany", "Jana Vogt"],
                ],
            ),
        ],
    )
    header = [
        "employee_id",
        "name",
        "department",
        "title",
        "site",
        "start_date",
        "extension",
        "email",
    ]
    lines = [";".join(header)] + [";".join(r) for r in staff_rows()]
    path("staff").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path("itdesk").write_text(IT_DESK_HTML, encoding="utf-8")
    path("friskvard").write_text(FRISKVARD_HTML, encoding="utf-8")
    path("standup").write_text(STANDUP_MD, encoding="utf-8")
    for rel, spec in EMAILS.items():
        p = corpus / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_mail(**spec))  # type: ignore[arg-type]
        written.append(p)
    path("tickets").write_text(
        "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tickets()), encoding="utf-8"
    )
    path("crm").write_text(
        json.dumps(crm_accounts(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    path("sla").write_text(json.dumps(SLA, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    qpath = out / "questions.jsonl"
    qpath.write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions()), encoding="utf-8"
    )
    written.append(qpath)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    for p in build(args.out):
        print(f"wrote {p} ({p.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
