"""The course's book (``make book``) in a real browser: headless Chromium (Debian's package),
driven by Playwright, opens every page served from build/book/html on 127.0.0.1 and checks what
a learner sees. Every expectation is read from the notebooks and README.md themselves.

Run: ``make test-book`` (it builds the book first); screenshots go to build/book-shots/.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import unicodedata
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag

import build_book as book
import pytest

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
INSTALL = "apt-get update && apt-get install -y chromium"
SHOTS = book.ROOT / "build" / "book-shots"
TIMEOUT_MS = 30_000  # any one page load, wait or screenshot
README = book.ROOT / "README.md"
CHAPTERS = {f"notebooks/{path.stem}": path for path in book.notebooks()}
PAGES = ["intro", *CHAPTERS]

# What the browser reads from a loaded page (the heading without its "#" permalink).
COLLECT = """() => {
  const h1 = document.querySelector("main h1");
  const heading = h1 ? h1.cloneNode(true) : null;
  if (heading) heading.querySelectorAll(".headerlink").forEach((a) => a.remove());
  const hidden = [...document.querySelectorAll(".cell.tag_hide-input .cell_input")];
  return {
    title: document.title,
    heading: heading ? heading.textContent.trim() : "",
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    images: [...document.images].map((i) => [i.currentSrc || i.src, i.naturalWidth]),
    hidden: hidden.length,
    collapsed: hidden.filter((i) => !i.checkVisibility()).length,
    sidebar: [...document.querySelectorAll("nav.bd-docs-nav a.reference")].map(
      (a) => [a.getAttribute("href"), a.textContent.trim()]),
  };
}"""
LOAD_IMAGES = """() => Promise.all([...document.images].map((i) => {
  i.loading = "eager";
  return i.complete ? null : new Promise((done) => { i.onload = i.onerror = done; });
}))"""


@dataclass
class Page:
    status: int
    errors: list[str]
    info: dict[str, Any]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class QuietServer(ThreadingHTTPServer):
    """A page closed mid-download resets its connection: not an error of the site."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def normalized(text: str) -> str:
    """Heading text as a page shows it: typographic quotes straight, markdown marks gone."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text.replace("\u201c", '"').replace("\u201d", '"').replace("`", ""))


def stored_images(path: Path) -> int:
    """How many images the notebook's stored outputs hold."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return sum(any(k.startswith("image/") for k in o.get("data", {})) for o in outputs)


def search_word(title: str) -> str:
    """The longest word of a chapter's title: one the search must find that chapter by."""
    return max(re.findall(r"[A-Za-z]{4,}", title.split("·", 1)[-1]), key=len)


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """build/book/html served on a free port of 127.0.0.1 by a thread of this process."""
    if not (book.HTML / "intro.html").exists():
        pytest.fail(f"no book in {book.HTML}: run `make book` first (or `make test-book`)")
    handler = partial(QuietHandler, directory=str(book.HTML))
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser_context(site: str) -> Iterator[Any]:
    """A Chromium context that reaches only the site (every other request is refused)."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install it with `{INSTALL}` (as root, Debian)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=TIMEOUT_MS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        off_site: list[str] = []

        def loopback_only(route: Any) -> None:
            if route.request.url.startswith(site):
                route.continue_()
            else:
                off_site.append(route.request.url)
                route.abort()

        context.route("**/*", loopback_only)
        context.off_site = off_site
        yield context
        context.close()
        browser.close()


def visit(context: Any, url: str, shot: Path) -> Page:
    """Load ``url``, wait for its images, read it, screenshot it."""
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    response = page.goto(url, wait_until="load")
    page.evaluate(LOAD_IMAGES)
    info = page.evaluate(COLLECT)
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))
    page.close()
    return Page(response.status if response else 0, errors, info)


@pytest.fixture(scope="session")
def pages(browser_context: Any, site: str) -> dict[str, Page]:
    """Every page of the book, each visited once."""
    return {
        name: visit(browser_context, f"{site}{name}.html", SHOTS / f"{Path(name).name}.png")
        for name in PAGES
    }


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_console_errors(pages: dict[str, Page], name: str) -> None:
    assert pages[name].status == 200
    assert pages[name].errors == []


def test_no_page_asks_for_anything_off_site(pages: dict[str, Page], browser_context: Any) -> None:
    """The book works offline: fonts, scripts and images are all in build/book/html."""
    assert browser_context.off_site == []


@pytest.mark.parametrize("name", PAGES)
def test_title_and_first_heading_are_the_sources(pages: dict[str, Page], name: str) -> None:
    source = CHAPTERS.get(name)
    expected = book.notebook_title(source) if source else book.first_heading(README.read_text())
    info = pages[name].info
    assert normalized(info["heading"]) == normalized(expected)
    assert normalized(info["title"]).startswith(normalized(expected))
    assert info["title"].endswith(book.TITLE)


@pytest.mark.parametrize("name", PAGES)
def test_every_image_shows(pages: dict[str, Page], name: str) -> None:
    images = pages[name].info["images"]
    assert [src for src, width in images if width == 0] == []
    plots = [src for src, _ in images if "/_images/" in src]
    assert len(plots) >= (stored_images(CHAPTERS[name]) if name in CHAPTERS else 0)


@pytest.mark.parametrize("name", CHAPTERS)
def test_launch_buttons_open_this_notebook(pages: dict[str, Page], name: str) -> None:
    """Colab and Kaggle, each in the header's launch menu and under the title."""
    links = pages[name].info["links"]
    for provider, url in book.launch_urls(book.course_repo(), CHAPTERS[name].name).items():
        assert links.count(url) >= 2, f"{provider}: {url}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_collapsed_cells_stay_collapsed(pages: dict[str, Page], name: str) -> None:
    cells = json.loads(CHAPTERS[name].read_text(encoding="utf-8"))["cells"]
    hidden = sum(book.collapse_tag(c) == "hide-input" for c in cells)
    info = pages[name].info
    assert (info["hidden"], info["collapsed"]) == (hidden, hidden)


def test_sidebar_lists_the_chapters_in_order_with_the_fast_path(pages: dict[str, Page]) -> None:
    sidebar = [
        (href, text) for href, text in pages["intro"].info["sidebar"] if "notebooks/" in href
    ]
    assert [href for href, _ in sidebar] == [f"{name}.html" for name in CHAPTERS]
    fast = book.fast_path(README.read_text(encoding="utf-8"))
    marked = [href[10:12] for href, text in sidebar if re.search(f"{book.FAST}\\d+$", text)]
    assert fast and sorted(marked) == sorted(fast)


def _fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_every_link_inside_the_site_resolves(pages: dict[str, Page], site: str) -> None:
    """HTTP 200 for every same-site href; its #anchor exists on the page it points at."""
    links = {link for page in pages.values() for link in page.info["links"]}
    bodies: dict[str, tuple[int, str]] = {}
    broken = []
    for link in sorted(link for link in links if link.startswith(site)):
        target, anchor = urldefrag(link)
        status, body = bodies.setdefault(target, _fetch(target))
        if status != 200:
            broken.append(f"{link}: HTTP {status}")
        elif anchor and f'id="{unquote(anchor)}"' not in body:
            broken.append(f"{link}: no #{anchor}")
    assert broken == []
    assert len(bodies) > len(PAGES)


@pytest.mark.parametrize("name", CHAPTERS)
def test_search_finds_each_chapter(browser_context: Any, site: str, name: str) -> None:
    word = search_word(book.notebook_title(CHAPTERS[name]))
    page = browser_context.new_page()
    page.goto(f"{site}search.html?q={word}", wait_until="load")
    hit = page.locator(f'#search-results a[href*="{name}.html"]').first
    hit.wait_for(state="attached")
    page.close()
