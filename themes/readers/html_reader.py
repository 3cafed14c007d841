"""HTML pages: the visible text, with headings as Markdown "#" lines and the page title."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from themes.readers.document import make_document
from themes.readers.errors import RejectedFile
from themes.readers.text_reader import check_textual

if TYPE_CHECKING:
    from llama_index.core import Document

_HTML_DROPPED = (
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "footer",
    "svg",
    "iframe",
    "head",
)
_HTML_BLOCKS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "section", "article", "main",
    "header", "aside", "blockquote", "pre", "figure", "figcaption", "form", "address", "hr",
    "h4", "h5", "h6",
)  # fmt: skip


def read_html(name: str, data: bytes) -> list[Document]:
    check_textual(name, data, "HTML")
    from bs4 import BeautifulSoup, Comment, Declaration, Doctype, NavigableString
    from bs4.element import ProcessingInstruction

    # Given bytes, BeautifulSoup honours a BOM or <meta charset> and guesses otherwise.
    soup = BeautifulSoup(data, "lxml")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_HTML_DROPPED):
        tag.decompose()
    for tag in soup.select('[hidden], [aria-hidden="true"]'):
        tag.decompose()
    hidden_strings = (Comment, Declaration, Doctype, ProcessingInstruction)
    for string in soup.find_all(string=lambda s: isinstance(s, hidden_strings)):
        string.extract()
    # Source line breaks are layout, not content: collapse them (except in <pre>) before the
    # structural line breaks are added below.
    for string in soup.find_all(string=True):
        if type(string) is NavigableString and not string.find_parent("pre"):
            string.replace_with(re.sub(r"\s+", " ", string))
    headings: list[str] = []
    for heading in soup.find_all(("h1", "h2", "h3")):
        text = heading.get_text(" ", strip=True)
        if text:
            headings.append(text)
            level = int(heading.name[1])
            heading.replace_with(f"\n\n{'#' * level} {' '.join(text.split())}\n\n")
        else:
            heading.decompose()
    for tag in soup.find_all("br"):
        tag.replace_with("\n")
    for tag in soup.find_all(("td", "th")):
        tag.insert_after(" | ")
    for tag in soup.find_all(_HTML_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = [" ".join(line.split()).removesuffix(" |") for line in soup.get_text().splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not text:
        raise RejectedFile(name, "HTML page without visible text, not ingested")
    return [
        make_document(
            text, file_name=name, file_type="html", headings=headings, title=title or None
        )
    ]
