"""File types: chosen by extension, then checked against the file's first bytes.

A check failing here costs one small read and gives a precise one-line reason ("not a PDF (bad
header)") instead of whatever a parser deep inside a library would raise.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from deepsearcher.config import LoadingSettings
from deepsearcher.errors import LoaderError
from loaders.base import describe_exception
from loaders.registry import OFFICE_ZIP_PARTS, SUPPORTED_EXTENSIONS, TEXT_TYPES

_HEAD_BYTES = 8192
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# UTF-16/32 text is full of NUL bytes, so a BOM has to be recognised before the NUL test.
UNICODE_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
BINARY_HINT = "the file is skipped; it holds binary data, so check its extension"


def file_type_of(path: Path) -> str | None:
    """The file type for ``path``'s extension, or None when it is not supported."""
    return SUPPORTED_EXTENSIONS.get(path.suffix.lower())


def unsupported_reason(path: Path) -> str:
    suffix = path.suffix.lower() or "(none)"
    return f"unsupported file type {suffix} (supported: {', '.join(sorted(SUPPORTED_EXTENSIONS))})"


def format_size_limit(size_bytes: int, settings: LoadingSettings) -> str:
    return (
        f"skipped: {size_bytes / 2**20:.1f} MB exceeds loading.max_file_mb={settings.max_file_mb:g}"
    )


def check_file(path: Path, settings: LoadingSettings) -> str:
    """Return the file type of ``path`` after cheap sanity checks; raise ``LoaderError`` if bad."""
    file_type = file_type_of(path)
    if file_type is None:
        raise LoaderError(unsupported_reason(path), "convert the file to a supported type")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise LoaderError("file not found", "check the path") from None
    except OSError as exc:
        raise LoaderError(f"could not read: {describe_exception(exc)}") from exc
    if not path.is_file():
        raise LoaderError("not a regular file")
    if st.st_size == 0:
        raise LoaderError("empty file")
    if st.st_size > settings.max_file_mb * 2**20:
        raise LoaderError(
            format_size_limit(st.st_size, settings), "raise loading.max_file_mb to load it"
        )
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError as exc:
        raise LoaderError(f"could not read: {describe_exception(exc)}") from exc

    if file_type == "pdf":
        # The spec allows junk before the header; readers accept it within the first 1 KB.
        if b"%PDF-" not in head[:1024]:
            raise LoaderError("not a PDF (bad header)")
    elif file_type in OFFICE_ZIP_PARTS:
        _check_office_zip(path, file_type, head)
    elif file_type in TEXT_TYPES:
        check_text_head(head)
    return file_type


def utf16_without_bom(data: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when every other byte is NUL (Windows text saved without BOM)."""
    sample = data[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return None
    half = len(sample) // 2
    odd_nul = sample[1::2].count(0) / half
    even_nul = sample[0::2].count(0) / half
    if odd_nul > 0.9 and even_nul < 0.1:
        return "utf-16-le"
    if even_nul > 0.9 and odd_nul < 0.1:
        return "utf-16-be"
    return None


def check_text_head(head: bytes) -> None:
    """Reject the start of a 'text' file that is plainly binary."""
    if any(head.startswith(bom) for bom, _ in UNICODE_BOMS) or utf16_without_bom(head):
        return
    if head.startswith(b"%PDF-"):
        raise LoaderError("binary content in a text file (it is a PDF)", BINARY_HINT)
    if head.startswith(b"PK\x03\x04"):
        raise LoaderError("binary content in a text file (it is a zip archive)", BINARY_HINT)
    if b"\x00" in head:
        raise LoaderError("binary content in a text file", BINARY_HINT)


def _check_office_zip(path: Path, file_type: str, head: bytes) -> None:
    label = file_type.upper()
    if head.startswith(_OLE_MAGIC):
        raise LoaderError(
            f"not a valid {label} file: it is an OLE container (password-protected, or a legacy "
            "Office format renamed)",
            f"remove the password or re-save it as .{file_type}",
        )
    if not head.startswith(b"PK"):
        raise LoaderError(f"not a valid {label} file (not a zip archive)")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise LoaderError(
            f"not a valid {label} file (corrupt zip: {describe_exception(exc)})"
        ) from exc
    if OFFICE_ZIP_PARTS[file_type] not in names:
        raise LoaderError(f"not a valid {label} file (zip without {OFFICE_ZIP_PARTS[file_type]})")
