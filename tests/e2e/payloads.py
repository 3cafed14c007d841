"""Output-handling payloads (OWASP LLM05) and the tracker that would see them fire.

Each payload, if rendered live, would either set ``window.__pwned`` or make the
browser request a URL of the tracker, a local HTTP server started by the test on
loopback (tests never leave the machine). A page that renders them inert leaves
the flag unset and the tracker with 0 requests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A 1x1 transparent PNG: what an image request gets, so nothing errors on the way.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


@dataclass
class Tracker:
    """Requests received by the tracker server (path of each)."""

    url: str = ""
    hits: list[str] = field(default_factory=list)


@contextmanager
def tracker() -> Iterator[Tracker]:
    """A loopback HTTP server that records every request it gets."""
    seen = Tracker()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            seen.hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(PIXEL)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def payloads(base: str) -> dict[str, str]:
    """Name -> payload; ``base`` is the tracker's URL (``http://127.0.0.1:PORT``)."""
    entity_base = base.replace("http", "&#104;ttp", 1)
    return {
        "script_tag": f'<script>window.__pwned="script";fetch("{base}/script")</script>',
        "img_onerror": f'<img src="{base}/img" onerror="window.__pwned=\'img\'">',
        "svg_onload": "<svg onload=\"window.__pwned='svg'\"></svg>",
        "iframe": f'<iframe src="{base}/iframe"></iframe>',
        "style_url": f'<style>body{{background:url("{base}/css")}}</style>',
        "js_link_markdown": "[ouvrir](javascript:window.__pwned='mdlink')",
        "js_link_html": "<a href=\"javascript:window.__pwned='htmllink'\">ouvrir</a>",
        "md_image": f"![pixel]({base}/md.png)",
        "md_image_nested_alt": f"![a [b] c]({base}/nested.png)",
        "md_image_entity_scheme": f"![e]({entity_base}/entity.png)",
        "md_image_reference": f"![r][t]\n\n[t]: {base}/ref.png",
        "katex_href": "$\\href{javascript:window.__pwned='katex'}{x}$",
        "ansi_escape": "\x1b[31mROUGE\x1b[0m \x1b]8;;http://evil/\x07lien\x1b]8;;\x07",
        "bidi_override": "facture\u202efdp.exe",
    }


# File names cannot hold "/": the payloads that fit in one.
FILE_NAME_PAYLOADS = {
    "img_onerror": "<img src=x onerror=window.__pwned=1>.md",
    "md_image_relative": "![x](pixel.png).md",
    "md_link": "[clic](javascript:alert(1)).md",
    "bidi_override": "facture\u202efdp.md",
}

# Reads the flag in the page and in every frame (components run in iframes).
FLAG_IN_ALL_FRAMES = """() => {
    const seen = [];
    const visit = (w) => {
        try { if (w.__pwned !== undefined) seen.push(String(w.__pwned)); } catch (e) {}
        for (let i = 0; i < w.frames.length; i++) visit(w.frames[i]);
    };
    visit(window);
    return seen;
}"""

# Elements that a live payload would have left in the DOM.
LIVE_ELEMENTS = """(base) => {
    const found = [];
    for (const a of document.querySelectorAll('a[href]')) {
        if (a.getAttribute('href').trim().toLowerCase().startsWith('javascript:'))
            found.push('a[href=javascript:]');
    }
    for (const img of document.querySelectorAll('img[src]')) {
        if (img.src.startsWith(base)) found.push('img ' + img.src);
    }
    for (const f of document.querySelectorAll('iframe[src]')) {
        if (f.src.startsWith(base)) found.push('iframe ' + f.src);
    }
    for (const el of document.querySelectorAll('[onerror],[onload],[onmouseover]')) {
        found.push('handler on ' + el.tagName);
    }
    return found;
}"""


def click_every_link(page: Any) -> int:
    """Click each link of the page that stays on it (a javascript: one would run)."""
    links = page.locator("a[href^='javascript:' i]")
    count = int(links.count())
    for i in range(count):
        links.nth(i).click(timeout=2_000, no_wait_after=True)
    return count
