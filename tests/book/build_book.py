"""The course as a book (``make book``): a static site in build/book/html from the committed
notebooks and their stored outputs, with Jupyter Book 1.x (Sphinx); nothing is executed.

The sources are generated in build/book/src: README.md becomes the landing page (its notebook
links point at the chapters, its other repository links at GitHub), each notebook is copied with
its collapsed cells tagged ``hide-input`` and a row of launch buttons under its title, and the
table of contents lists the notebooks in order, fast-path chapters marked. notebooks/ is never
modified. Run with build/venv-book's Python (requirements-book.txt); no framework is imported.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = ROOT / "build" / "book"
SRC = OUT / "src"
HTML = OUT / "html"
TITLE = "Train faster on TPUs"
FAST = "★"  # the sidebar's fast-path marker, followed by the chapter's place on the fast path
COLAB = "https://colab.research.google.com/github/{repo}/blob/main/{path}"
KAGGLE = "https://kaggle.com/kernels/welcome?src=https://github.com/{repo}/blob/main/{path}"
GITHUB = "https://github.com/{repo}/blob/main/{path}"
PYTHON_BLOCK = re.compile(r"^```python\n.*?^```", re.MULTILINE | re.DOTALL)
BUTTON = "sd-btn sd-btn-primary sd-shadow-sm course-launch"  # sphinx-design's look
# Appended to the conf.py Jupyter Book writes: no live code (thebe) in this book; with it, every
# page declares thebe's settings twice, an error in the browser's console.
CONF_EXTRA = '\nextensions.remove("sphinx_thebe")\n'
BUILD_TIMEOUT = 300  # seconds; a clean build takes a few


def course_repo() -> str:
    """``owner/name`` as utils/__init__.py records it (``make set-repo-url`` rewrites it there)."""
    text = (ROOT / "utils" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^COURSE_REPO = "([^"]+)"', text, re.MULTILINE)
    if not match:
        raise RuntimeError('utils/__init__.py has no line COURSE_REPO = "owner/name"')
    return match.group(1)


def notebooks() -> list[Path]:
    """The chapters, in course order."""
    return sorted((ROOT / "notebooks").glob("0*.ipynb"))


def first_heading(markdown: str) -> str:
    """The text of the first ``# `` heading (level 1) in ``markdown``."""
    match = re.search(r"^# +(.+?)\s*$", markdown, re.MULTILINE)
    if not match:
        raise ValueError("no level-1 heading")
    return match.group(1)


def notebook_title(path: Path) -> str:
    """A notebook's first markdown heading: its chapter title."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return first_heading(text)


def fast_path(readme: str) -> list[str]:
    """The notebook numbers (``"00"``) of README's "Fast path" table, in its order."""
    section = readme.split("## Fast path", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\|[^|\n]+\|\s*(\d\d)\b", section, re.MULTILINE)


def launch_urls(repo: str, notebook: str) -> dict[str, str]:
    """Colab's and Kaggle's URLs that open ``notebooks/<notebook>`` of ``repo``."""
    path = f"notebooks/{notebook}"
    return {
        "Colab": COLAB.format(repo=repo, path=path),
        "Kaggle": KAGGLE.format(repo=repo, path=path),
    }


def collapse_tag(cell: dict) -> str | None:
    """The Jupyter Book tag that hides what the notebook collapses in this cell, if anything."""
    jupyter = cell.get("metadata", {}).get("jupyter", {})
    source, outputs = jupyter.get("source_hidden", False), jupyter.get("outputs_hidden", False)
    if cell["cell_type"] != "code" or not (source or outputs):
        return None
    return "hide-cell" if source and outputs else "hide-input" if source else "hide-output"


def launch_buttons(repo: str, notebook: str) -> str:
    """The two launch buttons as HTML (sphinx-design's button classes), a paragraph of their own."""
    links = " ".join(
        f'<a class="{BUTTON}" href="{url}">Open in {name}</a>'
        for name, url in launch_urls(repo, notebook).items()
    )
    return f"<p>{links}</p>"


def book_markdown(source: str, repo: str) -> str:
    """A markdown cell's text for Sphinx: an HTML anchor on a line of its own (``<a id="x"></a>``,
    which Jupyter and GitHub jump to) becomes a MyST target, so ``[..](#x)`` resolves; a link to
    a repository file outside notebooks/ (``../utils/x.py``) points at GitHub; a python block with
    shell escapes (``!pip``) is highlighted as IPython."""
    source = re.sub(r'^<a id="([\w-]+)"></a>\s*$', r"(\1)=", source, flags=re.MULTILINE)
    on_github = lambda m: f"]({GITHUB.format(repo=repo, path=m.group(1))})"  # noqa: E731
    source = re.sub(r"\]\(\.\./([^)\s]+)\)", on_github, source)
    return PYTHON_BLOCK.sub(_ipython_if_shell, source)


def _ipython_if_shell(block: re.Match[str]) -> str:
    text = block.group(0)
    return text.replace("```python", "```ipython", 1) if re.search(r"^!", text, re.M) else text


def book_notebook(path: Path, repo: str) -> dict:
    """The copy for the book: collapsed cells tagged, launch buttons under the title."""
    nb = copy.deepcopy(json.loads(path.read_text(encoding="utf-8")))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = book_markdown("".join(cell["source"]), repo)
        tag = collapse_tag(cell)
        if tag:
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags.append(tag) if tag not in tags else None
    title = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    buttons = launch_buttons(repo, path.name)
    heading = re.compile(r"^# .+$", re.MULTILINE)
    title["source"] = heading.sub(lambda m: f"{m.group(0)}\n\n{buttons}\n", title["source"], 1)
    return nb


def landing_page(readme: str, repo: str) -> str:
    """README.md for the book: Colab badges (images from the network) become Colab and Kaggle
    links; links to files that are no chapter point at GitHub."""
    badge = re.compile(r"\[!\[[^\]]*\]\([^)]*colab-badge[^)]*\)\]\(([^)]+)\)")

    def buttons(match: re.Match[str]) -> str:
        urls = launch_urls(repo, match.group(1).rsplit("/", 1)[1])
        return " · ".join(f"[{name}]({url})" for name, url in urls.items())

    def external(match: re.Match[str]) -> str:
        target = match.group(1)
        if re.fullmatch(r"notebooks/0[^/]*\.ipynb", target):
            return match.group(0)
        return f"]({GITHUB.format(repo=repo, path=target)})"

    text = badge.sub(buttons, readme)
    return re.sub(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)", external, text)


def toc(readme: str) -> dict:
    """Landing page first, then one chapter per notebook in order; fast-path ones marked."""
    fast = fast_path(readme)
    chapters = []
    for path in notebooks():
        entry = {"file": f"notebooks/{path.stem}", "title": notebook_title(path)}
        if path.name[:2] in fast:
            entry["title"] += f" {FAST}{fast.index(path.name[:2]) + 1}"
        chapters.append(entry)
    caption = f"Chapters ({FAST}n: the fast path, in its order)"
    return {
        "format": "jb-book",
        "root": "intro",
        "parts": [{"caption": caption, "chapters": chapters}],
    }


def config(repo: str) -> dict:
    """Jupyter Book's _config.yml: stored outputs only, Colab launch buttons, the Kaggle one too."""
    return {
        "title": TITLE,
        "author": f"{TITLE}'s authors",
        "copyright": "",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "repository": {"url": f"https://github.com/{repo}", "path_to_book": "", "branch": "main"},
        "launch_buttons": {"colab_url": "https://colab.research.google.com"},
        "html": {"use_repository_button": True, "home_page_in_navbar": True},
        "parse": {"myst_enable_extensions": ["colon_fence", "html_image"]},
        "sphinx": {
            "extra_extensions": ["kaggle_button"],  # tests/book/kaggle_button.py
            "config": {
                "myst_heading_anchors": 3,
                "nb_merge_streams": True,  # one block per cell's stdout, as in Jupyter
                "html_show_copyright": False,
                "html_context": {"default_mode": "auto"},  # else "invalid theme mode" in console
            },
        },
    }


def write_sources(repo: str) -> None:
    """build/book/src: _config.yml, _toc.yml, intro.md and the notebooks' copies."""
    shutil.rmtree(SRC, ignore_errors=True)
    (SRC / "notebooks").mkdir(parents=True)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (SRC / "_config.yml").write_text(yaml.safe_dump(config(repo), sort_keys=False))
    (SRC / "_toc.yml").write_text(yaml.safe_dump(toc(readme), sort_keys=False, allow_unicode=True))
    (SRC / "intro.md").write_text(landing_page(readme, repo), encoding="utf-8")
    for path in notebooks():
        text = json.dumps(book_notebook(path, repo), indent=1, ensure_ascii=False)
        (SRC / "notebooks" / path.name).write_text(text + "\n", encoding="utf-8")


def run(args: list[str]) -> None:
    """Run a build step (bounded in time); exit with its status if it fails."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}  # the kaggle_button extension
    done = subprocess.run(args, cwd=ROOT, env=env, timeout=BUILD_TIMEOUT)
    if done.returncode:
        sys.exit(done.returncode)


def main() -> None:
    start = time.perf_counter()
    write_sources(course_repo())
    bin_dir = Path(sys.executable).parent
    run([str(bin_dir / "jupyter-book"), "config", "sphinx", str(SRC)])
    with (SRC / "conf.py").open("a", encoding="utf-8") as conf:
        conf.write(CONF_EXTRA)
    shutil.rmtree(HTML, ignore_errors=True)
    sphinx = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going"]
    run([*sphinx, "-d", str(OUT / "doctrees"), str(SRC), str(HTML)])
    seconds = time.perf_counter() - start
    print(f"Book built in {seconds:.1f} s: {HTML.relative_to(ROOT)}/index.html")


if __name__ == "__main__":
    main()
