"""A Sphinx extension for the course's book: next to sphinx-book-theme's "Colab" launch button
(the theme supports Colab, not Kaggle), a "Kaggle" one that opens the same notebook on Kaggle."""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

COLAB_PREFIX = "https://colab.research.google.com/github/"
KAGGLE_PREFIX = "https://kaggle.com/kernels/welcome?src=https://github.com/"


def add_kaggle(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Append Kaggle to the page's launch-buttons group, built from its Colab URL."""
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        colab = [b for b in group["buttons"] if b.get("url", "").startswith(COLAB_PREFIX)]
        for button in colab:
            url = KAGGLE_PREFIX + button["url"].removeprefix(COLAB_PREFIX)
            kaggle = {"type": "link", "text": "Kaggle", "url": url, "icon": "fab fa-kaggle"}
            group["buttons"].append(kaggle | {"tooltip": "Launch on Kaggle"})


def setup(app: Sphinx) -> dict[str, Any]:
    # After the theme's add_launch_buttons (priority 501), before the page is rendered.
    app.connect("html-page-context", add_kaggle, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
