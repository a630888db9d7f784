"""Run the whole course in batch: every ``notebooks/NN_*.ipynb`` in order, with papermill.

``make run`` calls this module; on Colab or Kaggle call it yourself::

    python -m utils.tools.run_course --kernel tpu-course                 # all notebooks
    python -m utils.tools.run_course --only 02 -- -p EPOCHS 2            # one notebook, a parameter
    python -m utils.tools.run_course -- -f params.yaml -y "BATCH_SIZE: 256"

Each notebook is executed into ``build/<name>.ipynb`` (the sources are left untouched) with the
notebooks folder as working directory, exactly as ``pytest --nbval`` runs them. One progress line
per notebook says its name, time and status; a failing notebook is reported with its cell number
and error, the others still run, and the exit status is 1 if any failed (2 for a usage error).
The kernels' own stderr (start-up log lines of TensorFlow, papermill's warnings such as "Passed
unknown parameter") goes to ``build/<name>.log``; ``--show-kernel-log`` leaves it on screen.
The notebooks record their measurements in ``build/results/<name>.json`` (see
:mod:`utils.results`); a notebook's file from an earlier run is deleted before it runs again, so
a failed notebook leaves no stale numbers for ``make report``.

Parameters after ``--`` follow papermill's command line: ``-p NAME VALUE`` (type inferred: int,
float, True/False/None, else str), ``-r NAME VALUE`` (always str), ``-f FILE.yaml``, ``-y YAML``.
Checking their types is the notebooks' job (``utils.bootstrap.check_params``); a wrong one shows up
here as that notebook's failure.

Framework-free: the notebooks run in their own kernels.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils import results

ROOT = Path(__file__).resolve().parents[2]

# Same quiet defaults as the Makefile, for runs started without make (Colab, Kaggle).
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}

# Cells papermill adds to the executed copy (not part of the source notebook).
PAPERMILL_TAGS = frozenset({"injected-parameters", "papermill-error-cell-tag"})


@dataclass(frozen=True)
class Outcome:
    """How one notebook run went."""

    notebook: str
    seconds: float
    ok: bool
    error: str = ""  # e.g. "cell 5 (In [3]): ValueError: boom"


def find_notebooks(notebooks_dir: Path, only: str | None = None) -> list[Path]:
    """The course notebooks (``[0-9]*.ipynb``) in order, or those ``only`` selects.

    ``only`` is a name prefix (``"02"``, ``"02_tf"``) or a path to a notebook.
    """
    found = sorted(notebooks_dir.glob("[0-9]*.ipynb"))
    if only is None:
        return found
    as_path = Path(only)
    if as_path.suffix == ".ipynb" and as_path.is_file():
        return [as_path]
    return [nb for nb in found if nb.name.startswith(as_path.name)]


def _resolve_type(value: str) -> Any:
    """Papermill's ``-p`` typing: True/False/None, int, float, else the string itself."""
    if value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[value]
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_parameters(args: Sequence[str]) -> dict[str, Any]:
    """Papermill-style parameter arguments -> dict, in papermill's order of precedence.

    YAML files (``-f``) first, then YAML strings (``-y``), then ``-p`` and ``-r`` (last wins).
    Raises ``ValueError`` for anything else, or YAML that is not a mapping.
    """
    import yaml  # a papermill dependency

    parser = argparse.ArgumentParser(prog="papermill parameters", add_help=False)
    parser.add_argument("-p", "--parameters", nargs=2, action="append", default=[])
    parser.add_argument("-r", "--parameters_raw", nargs=2, action="append", default=[])
    parser.add_argument("-f", "--parameters_file", action="append", default=[])
    parser.add_argument("-y", "--parameters_yaml", action="append", default=[])
    ns, unknown = parser.parse_known_args(list(args))
    if unknown:
        raise ValueError(f"unknown parameter arguments {unknown} (use -p, -r, -f or -y)")

    params: dict[str, Any] = {}
    sources = [(Path(f).read_text(encoding="utf-8"), f"file {f}") for f in ns.parameters_file]
    sources += [(y, f"-y {y!r}") for y in ns.parameters_yaml]
    for text, where in sources:
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            raise ValueError(f"parameters from {where} are not a YAML mapping")
        params.update(data)
    for name, value in ns.parameters:
        params[name] = _resolve_type(value)
    for name, value in ns.parameters_raw:
        params[name] = value
    return params


def _failing_cell(executed: Path, exc: Any) -> str:
    """'cell N (In [k])' for a PapermillExecutionError: N counts the source notebook's cells."""
    count = f"In [{exc.exec_count}]" if exc.exec_count is not None else "not run"
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
        own = [c for c in nb.cells if not PAPERMILL_TAGS & set(c.metadata.get("tags", []))]
        for number, cell in enumerate(own, start=1):
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                return f"cell {number} ({count})"
    except Exception:  # the executed copy is only a better hint
        pass
    return f"cell index {exc.cell_index} ({count})"


def describe_error(exc: BaseException, executed: Path) -> str:
    """One line for a failed run: where it failed and ``ename: evalue``."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(exc, PapermillExecutionError):
        evalue = " ".join(str(exc.evalue).split())
        message = f"{exc.ename}: {evalue}" if evalue else exc.ename
        return f"{_failing_cell(executed, exc)}: {_shorten(message)}"
    return _shorten(f"{type(exc).__name__}: {' '.join(str(exc).split())}")


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


@contextmanager
def stderr_to(path: Path | None) -> Iterator[None]:
    """Send this process's stderr (file descriptor 2) to ``path`` for a while (None: no change).

    Kernels inherit it, so their start-up chatter (TensorFlow's C++ log lines, ipykernel's
    warnings) lands in the file instead of between the progress lines. Cell outputs, stderr
    included, still go into the executed notebook.
    """
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "w", encoding="utf-8") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def run_notebook(
    notebook: Path,
    out_dir: Path,
    *,
    cwd: Path,
    parameters: dict[str, Any],
    kernel: str | None,
    timeout: float | None = None,
    log: Path | None = None,
) -> Outcome:
    """Execute one notebook into ``out_dir/<name>`` and say how it went (errors are caught).

    ``log``: a file for the kernel's own stderr (see :func:`stderr_to`); None leaves it on screen.
    """
    import papermill as pm

    executed = out_dir / notebook.name
    extra: dict[str, Any] = {} if timeout is None else {"execution_timeout": timeout}
    start = time.perf_counter()
    try:
        with stderr_to(log):
            pm.execute_notebook(
                str(notebook),
                str(executed),
                parameters=parameters,
                kernel_name=kernel,
                progress_bar=False,
                cwd=str(cwd),
                **extra,
            )
    except Exception as exc:  # one broken notebook must not stop the course
        error = describe_error(exc, executed)
        if log is not None and type(exc).__name__ != "PapermillExecutionError":
            error += f" [kernel log: {log}]"  # e.g. the kernel died: its last words are there
        return Outcome(notebook.stem, time.perf_counter() - start, False, error)
    return Outcome(notebook.stem, time.perf_counter() - start, True)


def summary_table(outcomes: Sequence[Outcome]) -> str:
    """The end-of-run table: notebook, time, status (with the error of failed ones)."""
    width = max([len("notebook")] + [len(o.notebook) for o in outcomes])
    lines = [f"{'notebook':<{width}}  {'time':>10}  status", f"{'-' * width}  {'-' * 10}  ------"]
    for o in outcomes:
        status = "ok" if o.ok else f"FAILED  {o.error}"
        lines.append(f"{o.notebook:<{width}}  {_fmt_seconds(o.seconds):>10}  {status}")
    failed = sum(not o.ok for o in outcomes)
    total = _fmt_seconds(sum(o.seconds for o in outcomes))
    noun = "notebook" if len(outcomes) == 1 else "notebooks"
    lines.append(f"{len(outcomes)} {noun}: {len(outcomes) - failed} ok, {failed} failed, {total}")
    return "\n".join(lines)


def _check_kernel(kernel: str) -> str | None:
    """None if the Jupyter kernel exists, else a message saying how to get it."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        return (
            f"no Jupyter kernel named {kernel!r} (`make setup` registers 'tpu-course'; on Colab "
            "use --kernel python3)"
        )
    return None


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (papermill parameters come after ``--``)."""
    parser = argparse.ArgumentParser(
        prog="python -m utils.tools.run_course",
        description="Execute every course notebook in order with papermill.",
        epilog="After --: papermill parameters, e.g. -- -p EPOCHS 2 -f params.yaml -y 'A: 1'",
    )
    parser.add_argument("--kernel", help="Jupyter kernel (default: each notebook's kernelspec)")
    parser.add_argument("--only", help="run only notebooks whose name starts with this, or a path")
    parser.add_argument("--notebooks-dir", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "build")
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="folder for the results files (sets COURSE_RESULTS_DIR; default build/results)",
    )
    parser.add_argument("--timeout", type=float, help="per-cell time limit in seconds")
    parser.add_argument(
        "--show-kernel-log",
        action="store_true",
        help="let the kernels' stderr through (default: into <out-dir>/<name>.log)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the course: 0 if every notebook passed, 1 if any failed, 2 on usage errors, 130 on ^C."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, pm_args = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = build_parser()
    args, unknown = parser.parse_known_args(ours)
    if unknown:
        parser.error(f"unrecognized arguments {unknown}; papermill parameters go after --")
    try:
        parameters = parse_parameters(pm_args)
    except (ValueError, OSError) as err:
        print(f"run_course: bad parameters: {err}", file=sys.stderr)
        return 2

    notebooks_dir = args.notebooks_dir.resolve()
    notebooks = find_notebooks(notebooks_dir, args.only)
    if not notebooks:
        names = ", ".join(nb.name for nb in find_notebooks(notebooks_dir)) or "none"
        print(
            f"run_course: no notebook matches {args.only!r} (available: {names})", file=sys.stderr
        )
        return 2
    if args.kernel and (problem := _check_kernel(args.kernel)):
        print(f"run_course: {problem}", file=sys.stderr)
        return 2

    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    if args.results_dir is not None:
        os.environ["COURSE_RESULTS_DIR"] = str(args.results_dir.resolve())
    results_dir = results.results_dir()
    logging.getLogger("papermill").setLevel(logging.WARNING)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    shown = ", ".join(f"{k}={v!r}" for k, v in parameters.items()) or "defaults"
    print(
        f"Running {len(notebooks)} notebook(s), kernel {args.kernel or '(from notebook)'}, "
        f"parameters: {shown}; executed copies in {out_dir}"
    )
    outcomes: list[Outcome] = []
    width = max(len(nb.stem) for nb in notebooks)
    for i, nb in enumerate(notebooks, start=1):
        # A notebook that fails must not leave numbers from an earlier run behind.
        (results_dir / f"{nb.stem}.json").unlink(missing_ok=True)
        try:
            outcome = run_notebook(
                nb,
                out_dir,
                cwd=nb.parent,  # like nbval: the notebook's own folder
                parameters=parameters,
                kernel=args.kernel,
                timeout=args.timeout,
                log=None if args.show_kernel_log else out_dir / f"{nb.stem}.log",
            )
        except KeyboardInterrupt:
            outcomes.append(Outcome(nb.stem, 0.0, False, "interrupted (Ctrl-C)"))
            print(f"\n{summary_table(outcomes)}")
            return 130
        status = "ok" if outcome.ok else f"FAILED  {outcome.error}"
        progress = f"[{i}/{len(notebooks)}] {nb.stem:<{width}}  {_fmt_seconds(outcome.seconds):>10}"
        print(f"{progress}  {status}", flush=True)
        outcomes.append(outcome)

    print()
    print(summary_table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
