"""Maintenance commands for the course notebooks (``python -m utils.tools.nbtools ...``).

* ``refresh NB...``: re-execute notebooks in place with papermill (cwd ``notebooks/``, like
  nbval), so their stored outputs come from the committed code; papermill's metadata is stripped.
  A notebook that fails is left untouched; the failed copy goes to ``build/failed/``.
* ``strip NB...``: remove papermill metadata only.
* ``set-repo --repo owner/name``: rewrite the course's GitHub repository everywhere it appears
  (Colab links in README.md, the set-up cell of every notebook, ``utils.COURSE_REPO``).
* ``check-repo``: exit non-zero if any of those disagree with ``utils.COURSE_REPO``.
* ``sync-setup [--ref REF]``: the one command that rewrites the set-up cell of every notebook:
  the common block of that cell (down to ``from utils import bootstrap``) becomes CONTRIBUTING.md's,
  character for character; each notebook keeps the lines below it (what it needs). With
  ``--ref``, CONTRIBUTING's ``COURSE_REF`` (the tag or commit a notebook fetches on Colab/Kaggle)
  is set first. ``make sync-setup`` / ``make set-ref REF=...``.
* ``check-setup``: exit non-zero if a notebook's set-up block differs from CONTRIBUTING's.

:func:`shown_function` / :func:`function_ast` (and :func:`saved_script` / :func:`script_ast` for a
script a cell writes) serve the tests that keep what a notebook defines in a visible cell (the code
a learner edits) equal to its ``utils`` original.

Framework-free; papermill is imported only by ``refresh``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from utils import ROOT
from utils.results import write_text_atomic

NOTEBOOKS = ROOT / "notebooks"
REPO_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# Files in which the repository name appears (Colab links, set-up cells, the canonical value).
REPO_FILES = ("README.md", "CONTRIBUTING.md", "utils/__init__.py")
COLAB_LINK = re.compile(r"colab\.research\.google\.com/github/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/")
SETUP_REPO = re.compile(r'COURSE_REPO = "([^"]+)"')
# The set-up cell: CONTRIBUTING.md holds the canonical text in its first ```python block that sets
# COURSE_REPO; every notebook's first code cell starts with that block, down to this line.
CONTRIBUTING = "CONTRIBUTING.md"
SETUP_LAST_LINE = "from utils import bootstrap\n"
SETUP_REF = re.compile(r'^COURSE_REF = "([^"]*)"', re.MULTILINE)
# A tag, branch or commit as git accepts it on a command line (no spaces, no "..", no leading "-").
REF_PATTERN = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]*$")


def strip_papermill(nb: dict) -> dict:
    """Remove papermill's run metadata (timings, status) from a notebook dict, in place."""
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        meta.pop("papermill", None)
        meta.pop("execution", None)
    return nb


def canonical(nb: dict) -> dict:
    """The notebook as ``nbformat.write`` stores it: each cell's source a list of lines.

    One string per cell makes every edit a whole-cell diff; lists of lines keep diffs line-sized.
    """
    for cell in nb.get("cells", []):
        for key in ("source",):
            if isinstance(cell.get(key), str):
                cell[key] = cell[key].splitlines(keepends=True)
        for out in cell.get("outputs", []):
            if isinstance(out.get("text"), str):
                out["text"] = out["text"].splitlines(keepends=True)
            for mime, value in out.get("data", {}).items():
                if isinstance(value, str) and mime.startswith("text/"):
                    out["data"][mime] = value.splitlines(keepends=True)
    return nb


def _write_json_atomic(path: Path, nb: dict) -> None:
    text = json.dumps(canonical(nb), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    write_text_atomic(path, text)  # the course's one atomic writer (utils.results)


def refresh(notebooks: Sequence[Path], kernel: str) -> int:
    """Execute each notebook top to bottom and store the outputs in place; return failures."""
    import papermill

    failures = 0
    for path in notebooks:
        path = Path(path).resolve()
        failed_copy = ROOT / "build" / "failed" / path.name
        failed_copy.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        print(f"refresh {path.name} ...", flush=True)
        try:
            out = papermill.execute_notebook(
                str(path),
                str(failed_copy),
                kernel_name=kernel,
                cwd=str(path.parent),
                progress_bar=False,
            )
        except Exception as exc:  # papermill.PapermillExecutionError and kernel failures
            failures += 1
            print(f"  FAILED after {time.perf_counter() - start:.0f} s: {exc}".splitlines()[0])
            print(f"  {path.name} left unchanged; executed copy: {failed_copy}")
            continue
        nb = strip_papermill(json.loads(json.dumps(out)))
        # papermill records the kernel it used; keep the notebook's own (Colab expects python3).
        original = json.loads(path.read_text(encoding="utf-8"))
        if "kernelspec" in original.get("metadata", {}):
            nb["metadata"]["kernelspec"] = original["metadata"]["kernelspec"]
        _write_json_atomic(path, nb)
        failed_copy.unlink(missing_ok=True)
        print(f"  ok in {time.perf_counter() - start:.0f} s")
    return failures


def current_repo() -> str:
    """``utils.COURSE_REPO`` as written in utils/__init__.py (read as text, not imported)."""
    text = (ROOT / "utils" / "__init__.py").read_text(encoding="utf-8")
    match = SETUP_REPO.search(text)
    if not match:
        raise RuntimeError('utils/__init__.py has no line COURSE_REPO = "owner/name"')
    return match.group(1)


def repo_files() -> list[Path]:
    """Every file that names the course repository."""
    files = [ROOT / name for name in REPO_FILES]
    files += sorted(NOTEBOOKS.glob("*.ipynb"))
    return [f for f in files if f.exists()]


def repo_mentions(path: Path) -> set[str]:
    """The repositories a file names in Colab links and set-up cells."""
    text = path.read_text(encoding="utf-8")
    return set(COLAB_LINK.findall(text)) | set(SETUP_REPO.findall(text.replace('\\"', '"')))


def set_repo(new: str) -> list[Path]:
    """Replace the current repository name with ``new`` in every file; return changed files."""
    if not REPO_PATTERN.match(new):
        raise ValueError(f"{new!r} is not a GitHub repository name of the form owner/name")
    old = current_repo()
    changed = []
    for path in repo_files():
        text = path.read_text(encoding="utf-8")
        if old in text:
            path.write_text(text.replace(old, new), encoding="utf-8")
            changed.append(path)
    return changed


def check_repo() -> list[str]:
    """Problems: files that name another repository than ``utils.COURSE_REPO``."""
    expected = current_repo()
    problems = []
    for path in repo_files():
        others = repo_mentions(path) - {expected}
        if others:
            problems.append(f"{path.relative_to(ROOT)} names {sorted(others)}, not {expected}")
    return problems


def setup_block() -> str:
    """The common block of the set-up cell, as CONTRIBUTING.md shows it (ends with a newline)."""
    text = (ROOT / CONTRIBUTING).read_text(encoding="utf-8")
    for fenced in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL):
        if SETUP_REPO.search(fenced) and SETUP_LAST_LINE in fenced:
            return fenced[: fenced.index(SETUP_LAST_LINE) + len(SETUP_LAST_LINE)]
    raise RuntimeError(f"{CONTRIBUTING} shows no set-up cell ending in {SETUP_LAST_LINE!r}")


def setup_ref(block: str | None = None) -> str:
    """The ``COURSE_REF`` of the set-up block (default: CONTRIBUTING's)."""
    match = SETUP_REF.search(setup_block() if block is None else block)
    if not match:
        raise RuntimeError('the set-up block has no line COURSE_REF = "..."')
    return match.group(1)


def set_ref(ref: str) -> bool:
    """Set CONTRIBUTING's ``COURSE_REF``; True when the file changed."""
    if not REF_PATTERN.match(ref):
        raise ValueError(f"{ref!r} is not a git tag or commit")
    path = ROOT / CONTRIBUTING
    text = path.read_text(encoding="utf-8")
    block = setup_block()
    new_block = SETUP_REF.sub(f'COURSE_REF = "{ref}"', block, count=1)
    if new_block == block:
        return False
    path.write_text(text.replace(block, new_block, 1), encoding="utf-8")
    return True


def _setup_cell(nb: dict) -> dict:
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def is_collapsed(cell: dict) -> bool:
    """Collapsed in Colab (a form) and in Jupyter (source hidden): harness, not what one copies."""
    meta = cell.get("metadata", {})
    return meta.get("cellView") == "form" and meta.get("jupyter", {}).get("source_hidden") is True


def collapse(cell: dict) -> None:
    cell.setdefault("metadata", {})["cellView"] = "form"
    cell["metadata"].setdefault("jupyter", {})["source_hidden"] = True


def split_setup(source: str) -> tuple[str, str]:
    """A set-up cell's source -> (common block, the notebook's own lines below it)."""
    if SETUP_LAST_LINE not in source:
        raise ValueError(f"no line {SETUP_LAST_LINE.strip()!r} in the set-up cell")
    end = source.index(SETUP_LAST_LINE) + len(SETUP_LAST_LINE)
    return source[:end], source[end:]


def setup_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def sync_setup(ref: str | None = None) -> list[Path]:
    """Rewrite every notebook's set-up block to CONTRIBUTING's (after ``set_ref(ref)``), collapsed.

    Returns the files changed. Only the set-up cell's source and its collapsed state change; the
    rest of each notebook is written back as it was (canonical JSON, as ``nbformat.write`` does).
    """
    changed = []
    if ref is not None and set_ref(ref):
        changed.append(ROOT / CONTRIBUTING)
    block = setup_block()
    for path in setup_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = _setup_cell(nb)
        old, tail = split_setup("".join(cell["source"]))
        if old != block or not is_collapsed(cell):
            cell["source"] = (block + tail).splitlines(keepends=True)
            collapse(cell)
            _write_json_atomic(path, nb)
            changed.append(path)
    return changed


def check_setup() -> list[str]:
    """Problems: notebooks whose set-up block is not CONTRIBUTING's."""
    block, problems = setup_block(), []
    for path in setup_notebooks():
        cell = _setup_cell(json.loads(path.read_text(encoding="utf-8")))
        source = "".join(cell["source"])
        try:
            old = split_setup(source)[0]
        except ValueError as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        if old != block:
            problems.append(
                f"{path.name}: the set-up cell differs from CONTRIBUTING.md's "
                "(run `make sync-setup`)"
            )
        elif not is_collapsed(cell):
            problems.append(
                f"{path.name}: the set-up cell is not collapsed (run `make sync-setup`)"
            )
    return problems


def _ipython_free(source: str) -> str:
    """``source`` without the lines a notebook gives to IPython (``%``, ``%%`` magics, ``!``)."""
    return "\n".join(
        line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
    )


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def script_ast(source: str) -> str:
    """``ast.dump`` of a whole script (a ``%%save_script`` cell, a module), docstrings left out."""
    return ast.dump(_drop_docstrings(ast.parse(_ipython_free(source))))


def saved_script(notebook: Path, name: str) -> list[dict]:
    """The code cells of ``notebook`` whose first line is ``%%save_script name``."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    return [
        c
        for c in cells
        if c["cell_type"] == "code"
        and "".join(c["source"]).split("\n", 1)[0].split() == ["%%save_script", name]
    ]


def function_ast(source: str, name: str) -> str:
    """``ast.dump`` of the top-level function ``name`` in ``source``, docstrings left out.

    Comments and formatting never reach the AST, so two definitions compare equal when they run
    the same code. Lines a notebook gives to IPython (``%magic``, ``!shell``) are skipped.

    Raises:
        LookupError: ``source`` defines no top-level function ``name``.
    """
    for node in ast.parse(_ipython_free(source)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.dump(_drop_docstrings(node))
    raise LookupError(f"no top-level function {name!r}")


def shown_function(notebook: Path, name: str) -> list[dict]:
    """The code cells of ``notebook`` that define ``name`` at their top level (cell magics skipped:
    a ``%%`` cell's body is not run by the kernel)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or source.startswith("%%"):
            continue
        try:
            function_ast(source, name)
        except LookupError:
            continue
        found.append(cell)
    return found


def _paths(names: Iterable[str]) -> list[Path]:
    paths = [Path(n) for n in names]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.tools.nbtools", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_refresh = sub.add_parser("refresh", help="re-execute notebooks in place")
    p_refresh.add_argument("notebooks", nargs="+")
    p_refresh.add_argument("--kernel", default="tpu-course")
    p_strip = sub.add_parser("strip", help="remove papermill metadata")
    p_strip.add_argument("notebooks", nargs="+")
    p_set = sub.add_parser("set-repo", help="rewrite the course repository everywhere")
    p_set.add_argument("--repo", required=True, help="owner/name on GitHub")
    sub.add_parser("check-repo", help="check every file names utils.COURSE_REPO")
    p_sync = sub.add_parser("sync-setup", help="rewrite every notebook's set-up cell")
    p_sync.add_argument("--ref", help="set COURSE_REF (tag or commit) first")
    sub.add_parser("check-setup", help="check every set-up cell is CONTRIBUTING's")
    args = parser.parse_args(argv)

    if args.command == "refresh":
        failures = refresh(_paths(args.notebooks), args.kernel)
        if failures:
            print(f"{failures} notebook(s) failed; see build/failed/", file=sys.stderr)
        return 1 if failures else 0
    if args.command == "strip":
        for path in _paths(args.notebooks):
            nb = json.loads(path.read_text(encoding="utf-8"))
            _write_json_atomic(path, strip_papermill(nb))
        return 0
    if args.command in ("set-repo", "sync-setup"):
        try:
            if args.command == "set-repo":
                changed = set_repo(args.repo)
            else:
                changed = sync_setup(args.ref)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        for path in changed:
            print("rewrote", path.relative_to(ROOT))
        if args.command == "sync-setup":
            print(f"set-up cells: COURSE_REF = {setup_ref()!r}, {len(changed)} file(s) rewritten")
        return 0
    problems = check_setup() if args.command == "check-setup" else check_repo()
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
