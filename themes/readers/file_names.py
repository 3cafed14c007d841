"""Safe base names for uploaded and downloaded files, and safe display of unsafe ones."""

from __future__ import annotations

import os
import re
import unicodedata

from themes.readers.errors import RejectedFile

MAX_NAME_CHARS = 120
# File systems limit names to 255 *bytes*; 120 characters of CJK or emoji can exceed that.
_MAX_NAME_BYTES = 240
_MAX_EXTENSION_CHARS = 16


def printable_name(name: str) -> str:
    """A version of an untrusted name that is safe to show (no control characters)."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in name)
    return (shown[:MAX_NAME_CHARS] + "…") if len(shown) > MAX_NAME_CHARS else shown or "(no name)"


_WINDOWS_RESERVED_NAMES = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
# Characters Windows refuses in names (":" would also open an NTFS alternate data stream).
_WINDOWS_FORBIDDEN = re.compile(r'[<>:"|?*]')


def safe_file_name(name: str) -> str:
    """Turn an uploaded or URL-derived name into a plain, safe base name.

    Directories are dropped (with "/" and "\\" both treated as separators), so "../../x.pdf"
    becomes "x.pdf"; control and invisible formatting characters (NUL, newlines, right-to-left
    overrides that disguise "exe.pdf") are removed; the name is NFC-normalised, leading dots are
    removed (no hidden files), characters Windows refuses are replaced by "_", and the name is
    cut to 120 characters keeping its extension. Raises RejectedFile when nothing usable is left
    (empty, ".", "..", only dots).
    """
    text = unicodedata.normalize("NFC", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    base = text.replace("\\", "/").rsplit("/", 1)[-1]
    # Leading dots would hide the file; trailing dots and spaces are dropped by Windows.
    base = base.strip().lstrip(".").rstrip(". ")
    base = _WINDOWS_FORBIDDEN.sub("_", base)
    if not base:
        raise RejectedFile(
            printable_name(name),
            "unusable file name (empty or only dots), not ingested (rename the file)",
        )
    stem, extension = os.path.splitext(base)
    if len(extension) > _MAX_EXTENSION_CHARS or not stem:
        stem, extension = base, ""
    if stem.lower() in _WINDOWS_RESERVED_NAMES:
        stem = "_" + stem
    stem = stem[: MAX_NAME_CHARS - len(extension)]
    while len((stem + extension).encode("utf-8")) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    stem = stem.rstrip(". ") or "_"
    return stem + extension
