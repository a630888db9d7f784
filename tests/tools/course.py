"""Maintainer commands for the notebooks: ``python -m tests.tools.course COMMAND``.

* ``run [--only NB] [--timeout S] -- -p NAME VALUE ...``: execute notebooks with papermill into
  ``build/`` (``make run``); one line per notebook; exit 1 if any failed, 2 for a usage error.
* ``refresh NB...``: re-execute notebooks in place (``make refresh``); a failing one is left as it
  was and its executed copy goes to ``build/failed/``.
* ``sync-setup [--ref REF]`` / ``check-setup``: every notebook's first code cell is the set-up
  cell CONTRIBUTING.md shows, character for character (``make set-ref REF=...``).
* ``set-repo --repo owner/name`` / ``check-repo``: the course's GitHub repository, everywhere it
  is named (``make set-repo-url``).
* ``status``: README's status table, generated from ``results/run-times.json`` (``refresh``
  writes it) and ``results/platform-matrix.json`` (``make test-platforms`` writes it).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from utils import ROOT
from utils.results import write_text_atomic

NOTEBOOKS = ROOT / "notebooks"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
REPO_FILES = ("README.md", "CONTRIBUTING.md", "utils/__init__.py")
REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
# Where the course names its repository: Colab links and the set-up cell's clone URL.
REPO_MENTION = re.compile(
    r"(?:colab\.research\.google\.com/github/|git clone .*https://github\.com/)"
    r"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?=/|\s|\\n|\"|$)"
)
COURSE_REPO = re.compile(r'COURSE_REPO = "([^"]+)"')
SETUP_REF = re.compile(r'^COURSE_REF = "([^"]*)"', re.MULTILINE)
RUN_TIMES = ROOT / "results" / "run-times.json"
MATRIX = ROOT / "results" / "platform-matrix.json"
STATUS_START, STATUS_END = (
    "<!-- status: `make status` writes this table -->",
    "<!-- end of status -->",
)
REF_PATTERN = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]*$")


def find_notebooks(only: str | None = None, folder: Path | None = None) -> list[Path]:
    """The course notebooks in order; ``only``: a number prefix (``04``) or a path."""
    if only and Path(only).is_file():
        return [Path(only)]
    folder = folder or NOTEBOOKS
    found = sorted(folder.glob(f"{only or '[0-9]'}*.ipynb"))
    if not found:
        raise ValueError(f"no notebook matches {only!r} in {folder}")
    return found


def parse_parameters(args: Sequence[str]) -> dict[str, Any]:
    """Papermill's ``-p NAME VALUE`` (typed: True/False/None, int, float, else str) and ``-r``."""
    params: dict[str, Any] = {}
    rest = list(args)
    while rest:
        if len(rest) < 3 or rest[0] not in ("-p", "-r"):
            raise ValueError(f"expected -p NAME VALUE or -r NAME VALUE, got {' '.join(rest)!r}")
        flag, name, value = rest[:3]
        rest = rest[3:]
        params[name] = value if flag == "-r" else _typed(value)
    return params


def _typed(value: str) -> Any:
    special = {"True": True, "False": False, "None": None}
    if value in special:
        return special[value]
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def check_names(notebooks: Sequence[Path], params: dict[str, Any]) -> None:
    """A parameter no selected notebook declares is a usage error that lists what they declare."""
    import papermill

    declared = {nb: set(papermill.inspect_notebook(str(nb))) for nb in notebooks}
    unknown = set(params) - set().union(*declared.values())
    if unknown:
        listing = "; ".join(f"{nb.stem}: {', '.join(sorted(d))}" for nb, d in declared.items())
        raise ValueError(f"unknown parameter(s) {', '.join(sorted(unknown))}. {listing}")


def ipc_kernel_manager() -> type:
    """A kernel manager that talks to its kernel over Unix sockets (ipc), not TCP: a local run
    needs no port, and the kernel prints no "running over TCP without encryption" warning."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{"transport": "ipc", **kwargs})

    return IPCKernelManager


def execute(notebook: Path, out: Path, params: dict[str, Any], kernel: str, timeout: float) -> str:
    """Run ``notebook`` top to bottom into ``out``; return '' or a one-line reason it failed."""
    import papermill
    from nbclient.exceptions import CellTimeoutError

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(
            str(notebook),
            str(out),
            parameters=params,
            kernel_name=kernel,
            cwd=str(notebook.parent),
            progress_bar=False,
            kernel_manager_class=ipc_kernel_manager(),
            **({"execution_timeout": timeout} if timeout else {}),
        )
    except CellTimeoutError:
        return f"a cell ran longer than {timeout:g} s (TIMEOUT=...)"
    except papermill.PapermillExecutionError as exc:
        return f"cell {exc.exec_count}: {exc.ename}: {exc.evalue}".splitlines()[0][:300]
    except Exception as exc:  # a dead kernel or a broken file must not stop the others
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return ""


def _sigterm_as_interrupt() -> None:
    """A CI cancel or ``timeout`` stops the run like Ctrl-C, so papermill shuts its kernel down."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)


def run(
    notebooks: Sequence[Path], params: dict[str, Any], kernel: str, timeout: float, out: Path
) -> int:
    """``make run``: each notebook into ``out``; the others still run after a failure."""
    check_names(notebooks, params)
    failed = 0
    for nb in notebooks:
        start = time.perf_counter()
        declared = {k: v for k, v in params.items() if k in _declared(nb)}
        problem = execute(nb, out / nb.name, declared, kernel, timeout)
        failed += bool(problem)
        status = f"FAILED: {problem}" if problem else "ok"
        print(f"{nb.stem:32s} {time.perf_counter() - start:6.0f} s  {status}", flush=True)
    print(f"{len(notebooks) - failed} of {len(notebooks)} notebooks ran top to bottom")
    return 1 if failed else 0


def _declared(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def canonical(nb: dict) -> dict:
    """The notebook as ``nbformat.write`` stores it (sources as lists of lines), no papermill
    metadata: a one-line edit stays a one-line diff."""
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        for key in ("papermill", "execution"):
            cell.get("metadata", {}).pop(key, None)
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
        for out in cell.get("outputs", []):
            if isinstance(out.get("text"), str):
                out["text"] = out["text"].splitlines(keepends=True)
            for mime, value in out.get("data", {}).items():
                if isinstance(value, str) and mime.startswith("text/"):
                    out["data"][mime] = value.splitlines(keepends=True)
    return nb


def write_notebook(path: Path, nb: dict) -> None:
    text = json.dumps(canonical(nb), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    write_text_atomic(path, text)


def refresh(notebooks: Sequence[Path], kernel: str, timeout: float = 0) -> int:
    """Re-execute each notebook and store its outputs in place; return how many failed."""
    failed = 0
    for path in notebooks:
        path = path.resolve()
        copy, start = ROOT / "build" / "failed" / path.name, time.perf_counter()
        problem = execute(path, copy, {}, kernel, timeout)
        if problem:
            failed += 1
            print(f"{path.stem}: FAILED ({problem}); left unchanged, executed copy: {copy}")
            continue
        nb, original = json.loads(copy.read_text("utf-8")), json.loads(path.read_text("utf-8"))
        nb["metadata"]["kernelspec"] = original["metadata"].get("kernelspec", {})
        write_notebook(path, nb)
        copy.unlink()
        seconds = time.perf_counter() - start
        if path.parent == NOTEBOOKS.resolve():
            _record_run_time(path.stem, seconds)
        print(f"{path.stem}: refreshed in {seconds:.0f} s", flush=True)
    return failed


def _record_run_time(notebook: str, seconds: float) -> None:
    times = json.loads(RUN_TIMES.read_text("utf-8")) if RUN_TIMES.exists() else {"seconds": {}}
    times["seconds"][notebook] = round(seconds)
    times["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    write_text_atomic(RUN_TIMES, json.dumps(times, indent=1, sort_keys=True) + "\n")


def status_table() -> str:
    """One row per notebook: its CPU run time and the platform matrix's verdicts."""
    times = json.loads(RUN_TIMES.read_text("utf-8"))
    matrix = json.loads(MATRIX.read_text("utf-8"))
    platforms = matrix["platforms"].values()
    lines = [
        f"| notebook | 2-core CPU, {times['date']} | "
        + " | ".join(f"{p['title']} versions, {matrix['date']}" for p in platforms)
        + " | a real TPU |",
        "|---|---|" + "---|" * (len(platforms) + 1),
    ]
    for path in find_notebooks():
        row = [f"{max(1, round(times['seconds'].get(path.stem, 0) / 60))} min"]
        for p in platforms:
            r = p["notebooks"].get(path.stem)
            n = r["gated"] if r else 0
            gated = f" ({n} cell{'s' if n > 1 else ''} skipped: TF on the TPU)" if n else ""
            row.append("not run" if r is None else ("runs" if r["ok"] else r["verdict"]) + gated)
        tpu_run = ROOT / "results" / "tpu" / f"{path.stem}.json"
        row.append("runs" if tpu_run.exists() else "not run yet")
        lines.append(f"| {path.stem[:2]} | " + " | ".join(row) + " |")
    versions = "; ".join(f"{p['title']}: {p['versions']}" for p in platforms)
    note = f"Platform matrix at commit {matrix['commit']}, package versions {versions}."
    return "\n".join([STATUS_START, *lines, "", note, STATUS_END])


def write_status(readme: Path | None = None) -> bool:
    """Rewrite README's status block; True when it changed."""
    readme = readme or ROOT / "README.md"
    text = readme.read_text("utf-8")
    start, end = text.index(STATUS_START), text.index(STATUS_END) + len(STATUS_END)
    new = text[:start] + status_table() + text[end:]
    readme.write_text(new, encoding="utf-8")
    return new != text


def setup_block() -> str:
    """The set-up cell as CONTRIBUTING.md shows it: its first ```python block naming COURSE_REF."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)\n```", text, flags=re.DOTALL):
        if SETUP_REF.search(block):
            return block
    raise RuntimeError(f"{CONTRIBUTING.name} shows no set-up cell (a python block with COURSE_REF)")


def _first_code_cell(nb: dict) -> dict:
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def sync_setup(ref: str | None = None) -> list[Path]:
    """Set CONTRIBUTING's ``COURSE_REF`` (if given), then every notebook's set-up cell to it."""
    changed = []
    if ref is not None:
        if not REF_PATTERN.match(ref):
            raise ValueError(f"{ref!r} is not a git tag or commit")
        old = setup_block()
        text = CONTRIBUTING.read_text(encoding="utf-8")
        new = SETUP_REF.sub(f'COURSE_REF = "{ref}"', old, count=1)
        CONTRIBUTING.write_text(text.replace(old, new, 1), encoding="utf-8")
        changed.append(CONTRIBUTING)
    block = setup_block()
    for path in find_notebooks():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = _first_code_cell(nb)
        if "".join(cell["source"]) != block:
            cell["source"] = block.splitlines(keepends=True)
            write_notebook(path, nb)
            changed.append(path)
    return changed


def check_setup() -> list[str]:
    block = setup_block()
    return [
        f"{p.name}: its set-up cell is not CONTRIBUTING.md's (run `make sync-setup`)"
        for p in find_notebooks()
        if "".join(_first_code_cell(json.loads(p.read_text("utf-8")))["source"]) != block
    ]


def current_repo() -> str:
    return COURSE_REPO.search((ROOT / "utils" / "__init__.py").read_text("utf-8")).group(1)


def repo_files() -> list[Path]:
    return [ROOT / name for name in REPO_FILES] + find_notebooks()


def set_repo(new: str) -> list[Path]:
    """Replace the course's repository name with ``new`` in every file that names it."""
    if not REPO_NAME.match(new):
        raise ValueError(f"{new!r} is not a GitHub repository name of the form owner/name")
    old, changed = current_repo(), []
    for path in repo_files():
        text = path.read_text(encoding="utf-8")
        if old in text:
            path.write_text(text.replace(old, new), encoding="utf-8")
            changed.append(path)
    return changed


def check_repo() -> list[str]:
    expected, problems = current_repo(), []
    for path in repo_files():
        others = set(REPO_MENTION.findall(path.read_text("utf-8"))) - {expected}
        if others:
            problems.append(f"{path.relative_to(ROOT)} names {sorted(others)}, not {expected}")
    return problems


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run")
    p_run.add_argument("--only")
    p_run.add_argument("--folder", type=Path, help="where the notebooks are (default: notebooks/)")
    p_run.add_argument("--out", type=Path, default=ROOT / "build")
    p_run.add_argument("params", nargs="*")
    p_refresh = sub.add_parser("refresh")
    p_refresh.add_argument("notebooks", nargs="+", type=Path)
    for p in (p_run, p_refresh):
        p.add_argument("--kernel", default="tpu-course")
        p.add_argument("--timeout", type=float, default=0, help="seconds per cell (0: none)")
    sub.add_parser("sync-setup").add_argument("--ref")
    sub.add_parser("set-repo").add_argument("--repo", required=True)
    sub.add_parser("check-setup")
    sub.add_parser("check-repo")
    sub.add_parser("status")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _sigterm_as_interrupt()
    try:
        if args.command == "run":
            params = parse_parameters(args.params)
            found = find_notebooks(args.only, args.folder)
            return run(found, params, args.kernel, args.timeout, args.out)
        if args.command == "refresh":
            return 1 if refresh(args.notebooks, args.kernel, args.timeout) else 0
        if args.command in ("sync-setup", "set-repo"):
            changed = sync_setup(args.ref) if args.command == "sync-setup" else set_repo(args.repo)
            print("\n".join(f"rewrote {p.relative_to(ROOT)}" for p in changed) or "no change")
            return 0
        if args.command == "status":
            print("README.md: status table", "rewritten" if write_status() else "unchanged")
            return 0
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = check_setup() if args.command == "check-setup" else check_repo()
    print("\n".join(problems), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
