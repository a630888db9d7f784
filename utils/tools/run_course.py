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
Names are checked before anything runs (papermill's ``inspect_notebook``): a name that none of the
selected notebooks declares in its ``parameters`` cell (``-p EPOCH 1`` for ``EPOCHS``) is a usage
error listing each notebook's parameters; each notebook is passed only the names it declares.
Checking values is the notebooks' job (``utils.parameters.check_params``); a wrong one shows up
here as that notebook's failure.

Every cell has a time limit, ``--timeout`` seconds (default :data:`DEFAULT_CELL_TIMEOUT_S`, 30
minutes; ``make run TIMEOUT=600``; 0 for none): a cell that runs longer stops its notebook, which
is reported as failed ("timed out") while the others still run. Ctrl-C stops the run: the
notebook that was running is reported as interrupted, and its executed copy is marked so (a
first cell saying so, ``metadata.papermill.status == "interrupted"``), never left looking complete.
The output folder and the results folder are checked for writing before the first notebook runs.

Framework-free: the notebooks run in their own kernels.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils import ROOT, fresh_process, results

# Same quiet defaults as the Makefile, for runs started without make (Colab, Kaggle).
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}

# Cells papermill adds to the executed copy (not part of the source notebook).
PAPERMILL_TAGS = frozenset({"injected-parameters", "papermill-error-cell-tag"})

#: Default time limit per cell in seconds (``--timeout``, ``make run TIMEOUT=...``). Generous: the
#: longest cell of the course takes a few minutes on a 2-core CPU.
DEFAULT_CELL_TIMEOUT_S = 1800.0

# Tag of the cell run_course puts first in an executed copy that did not run to the end.
UNFINISHED_TAG = "course-run-unfinished"


@dataclass(frozen=True)
class Outcome:
    """How one notebook run went."""

    notebook: str
    seconds: float
    ok: bool
    error: str = ""  # e.g. "cell 5 (In [3]): ValueError: boom"
    interrupted: bool = False  # stopped by Ctrl-C (SIGINT)

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return f"{'INTERRUPTED' if self.interrupted else 'FAILED'}  {self.error}"


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


def _raise_value_error(message: str) -> None:
    raise ValueError(f"{message} (e.g. -p EPOCHS 2, -r NAME text, -f params.yaml, -y 'A: 1')")


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
    parser.error = _raise_value_error  # type: ignore[method-assign]  # one line, not usage+exit
    ns, unknown = parser.parse_known_args(list(args))
    if unknown:
        raise ValueError(f"unknown parameter arguments {unknown} (use -p, -r, -f or -y)")

    params: dict[str, Any] = {}
    sources = []
    for f in ns.parameters_file:
        try:
            sources.append((Path(f).read_text(encoding="utf-8"), f"file {f}"))
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"cannot read parameters file {f} ({err})") from err
    sources += [(y, f"-y {y!r}") for y in ns.parameters_yaml]
    for text, where in sources:
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            problem = " ".join(str(err).split())
            raise ValueError(f"parameters from {where} are not valid YAML ({problem})") from err
        if not isinstance(data, dict):
            raise ValueError(f"parameters from {where} are not a YAML mapping")
        params.update(data)
    for name, value in ns.parameters:
        params[name] = _resolve_type(value)
    for name, value in ns.parameters_raw:
        params[name] = value
    return params


class Stopped(KeyboardInterrupt):
    """SIGTERM (a CI cancel, ``timeout``, ``kill``), handled like Ctrl-C: ``args[0]`` names it."""


def _how(exc: KeyboardInterrupt) -> str:
    return exc.args[0] if isinstance(exc, Stopped) and exc.args else "Ctrl-C"


def _kill_kernels() -> None:
    """Kill the Jupyter kernels this process started, with their process groups (a kernel
    leads a session of its own; its ``argv`` names its ``kernel-*.json`` connection file)."""
    for pid in fresh_process.children(os.getpid()):
        try:
            is_kernel = b"kernel" in Path(f"/proc/{pid}/cmdline").read_bytes()
            if is_kernel and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            elif is_kernel:
                os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, Ctrl-C and SIGTERM first kill the running kernel, then raise
    ``KeyboardInterrupt`` (:class:`Stopped` for SIGTERM) in the main thread; elsewhere no change.

    The kernel goes first because papermill's clean-up after an interrupt otherwise waits on it,
    and on a loaded machine that wait was seen to never end (a Ctrl-C that did not stop the run).
    A dead kernel ends the running cell at once; the executed copy is still marked interrupted.
    """

    def handler(signum: int, frame: Any) -> None:
        _kill_kernels()
        raise Stopped("SIGTERM") if signum == signal.SIGTERM else KeyboardInterrupt

    try:
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old_handler in previous.items():
            signal.signal(sig, old_handler)


def notebook_parameters(notebook: Path) -> dict[str, Any]:
    """The names a notebook's ``parameters`` cell declares -> papermill's description of each."""
    import papermill as pm

    return pm.inspect_notebook(str(notebook))


def check_parameter_names(
    parameters: dict[str, Any], declared: dict[str, Sequence[str]]
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Split ``parameters`` per notebook (``declared``: notebook -> its parameter names).

    Returns (notebook -> the parameters it declares, None), or ({}, message) when a name is
    declared by none of the notebooks: a mistyped ``-p EPOCH 1`` must not run with the defaults.
    """
    unknown = [name for name in parameters if not any(name in d for d in declared.values())]
    if unknown:
        listing = "; ".join(
            f"{nb}: {', '.join(names) if names else '(no parameters)'}"
            for nb, names in declared.items()
        )
        names = ", ".join(unknown)
        known = sorted({n for d in declared.values() for n in d})
        hints = [
            f"{name} -> {close[0]}"
            for name in unknown
            if (close := difflib.get_close_matches(name, known, n=1, cutoff=0.7))
        ]
        hint = f" Did you mean: {', '.join(hints)}?" if hints else ""
        return {}, (
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {names}: no selected notebook "
            f"declares {'them' if len(unknown) > 1 else 'it'}.{hint} Parameters per notebook: "
            f"{listing}"
        )
    return {nb: {k: v for k, v in parameters.items() if k in d} for nb, d in declared.items()}, None


def check_writable(folder: Path, what: str) -> str | None:
    """None if files can be created in ``folder`` (made if missing), else a one-line problem."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        return f"cannot write to the {what} {folder} ({reason}); choose another folder"
    return None


def _own_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if not PAPERMILL_TAGS & set(c.metadata.get("tags", []))]


def _last_started_cell(executed: Path) -> str:
    """'cell N' of the last cell papermill started in the executed copy ('' if unknown)."""
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
        started = [
            number
            for number, cell in enumerate(_own_cells(nb), start=1)
            if cell.metadata.get("papermill", {}).get("start_time")
        ]
        return f"cell {started[-1]}" if started else ""
    except Exception:  # only a better hint
        return ""


def mark_unfinished(executed: Path, status: str, message: str) -> None:
    """Make an executed copy say it did not run to the end (papermill marks it "completed").

    A first markdown cell states ``message``; ``metadata.papermill`` gets ``status`` and
    ``exception: true``. Missing or unreadable copies are left alone.
    """
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return
    nb.cells = [c for c in nb.cells if UNFINISHED_TAG not in c.metadata.get("tags", [])]
    cell = nbformat.v4.new_markdown_cell(f"**{status.upper()}: {message}**")
    cell.metadata["tags"] = [UNFINISHED_TAG]
    nb.cells.insert(0, cell)
    meta = nb.metadata.setdefault("papermill", {})
    meta.update({"status": status, "exception": True, "course_run_message": message})
    tmp = executed.with_name(executed.name + ".tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, executed)


def _failing_cell(executed: Path, exc: Any) -> str:
    """'cell N (In [k])' for a PapermillExecutionError: N counts the source notebook's cells."""
    count = f"In [{exc.exec_count}]" if exc.exec_count is not None else "not run"
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
        for number, cell in enumerate(_own_cells(nb), start=1):
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

    ``timeout``: seconds per cell (None or 0: no limit); a cell that runs longer fails the
    notebook ("timed out"). Ctrl-C returns an interrupted outcome (the caller stops the run).
    In both cases the executed copy is marked unfinished (:func:`mark_unfinished`).
    ``log``: a file for the kernel's own stderr (see :func:`stderr_to`); None leaves it on screen.
    """
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError

    executed = out_dir / notebook.name
    extra: dict[str, Any] = {"execution_timeout": timeout} if timeout else {}
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
    except KeyboardInterrupt as exc:
        seconds = time.perf_counter() - start
        cell = _last_started_cell(executed)
        where = f"during {cell}" if cell else "before the first cell"
        message = f"interrupted ({_how(exc)}) {where} after {_fmt_seconds(seconds)}"
        mark_unfinished(executed, "interrupted", f"{message}; later cells never ran")
        return Outcome(notebook.stem, seconds, False, message, interrupted=True)
    except CellTimeoutError:
        seconds = time.perf_counter() - start
        cell = _last_started_cell(executed) or "a cell"
        message = (
            f"timed out: {cell} ran longer than the {timeout:g} s limit per cell "
            "(--timeout, make run TIMEOUT=...)"
        )
        mark_unfinished(executed, "timed out", f"{message}; later cells never ran")
        return Outcome(notebook.stem, seconds, False, message)
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
        lines.append(f"{o.notebook:<{width}}  {_fmt_seconds(o.seconds):>10}  {o.status}")
    failed = sum(not o.ok and not o.interrupted for o in outcomes)
    interrupted = sum(o.interrupted for o in outcomes)
    ok = len(outcomes) - failed - interrupted
    total = _fmt_seconds(sum(o.seconds for o in outcomes))
    noun = "notebook" if len(outcomes) == 1 else "notebooks"
    stopped = f", {interrupted} interrupted: the run stopped" if interrupted else ""
    lines.append(f"{len(outcomes)} {noun}: {ok} ok, {failed} failed{stopped}, {total}")
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


def _seconds(text: str) -> float:
    """``--timeout`` values: a finite number of seconds >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0 (0: no limit)")
    return value


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
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_CELL_TIMEOUT_S,
        help=f"time limit per cell in seconds, 0 for none (default {DEFAULT_CELL_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--show-kernel-log",
        action="store_true",
        help="let the kernels' stderr through (default: into <out-dir>/<name>.log)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the course: 0 if every notebook passed, 1 if any failed, 2 on usage errors, 130 on ^C
    or SIGTERM (the running notebook is reported and marked interrupted)."""
    with sigterm_as_interrupt():
        return _main(argv)


def _main(argv: Sequence[str] | None = None) -> int:
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
    try:
        declared = {nb.stem: list(notebook_parameters(nb)) for nb in notebooks}
    except Exception as err:  # unreadable notebook JSON: say which
        print(f"run_course: cannot read the notebooks' parameters ({err})", file=sys.stderr)
        return 2
    per_notebook, problem = check_parameter_names(parameters, declared)
    if problem:
        print(f"run_course: {problem}", file=sys.stderr)
        return 2

    out_dir = args.out_dir.resolve()
    results_dir = (args.results_dir or results.results_dir()).resolve()
    for folder, what in ((out_dir, "--out-dir"), (results_dir, "results folder")):
        if problem := check_writable(folder, what):
            print(f"run_course: {problem}", file=sys.stderr)
            return 2

    return _run_all(args, notebooks, parameters, declared, per_notebook, out_dir, results_dir)


def _run_all(
    args: argparse.Namespace,
    notebooks: list[Path],
    parameters: dict[str, Any],
    declared: dict[str, list[str]],
    per_notebook: dict[str, dict[str, Any]],
    out_dir: Path,
    results_dir: Path,
) -> int:
    """Run the checked selection one notebook at a time; print progress and the summary."""
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    os.environ["COURSE_RESULTS_DIR"] = str(results_dir)
    logging.getLogger("papermill").setLevel(logging.WARNING)

    shown = ", ".join(f"{k}={v!r}" for k, v in parameters.items()) or "defaults"
    limit = f"{args.timeout:g} s per cell" if args.timeout else "none"
    print(
        f"Running {len(notebooks)} notebook(s), kernel {args.kernel or '(from notebook)'}, "
        f"parameters: {shown}; time limit: {limit}; executed copies in {out_dir}"
    )
    for name in parameters:
        users = [nb for nb, d in declared.items() if name in d]
        if len(users) < len(declared):
            print(f"  {name} goes to {', '.join(users)} only (the others do not declare it)")
    outcomes: list[Outcome] = []
    width = max(len(nb.stem) for nb in notebooks)
    for i, nb in enumerate(notebooks, start=1):
        # A notebook that fails must not leave numbers from an earlier run behind.
        result_file = results_dir / f"{nb.stem}.json"
        result_file.unlink(missing_ok=True)
        try:
            outcome = run_notebook(
                nb,
                out_dir,
                cwd=nb.parent,  # like nbval: the notebook's own folder
                parameters=per_notebook[nb.stem],
                kernel=args.kernel,
                timeout=args.timeout,
                log=None if args.show_kernel_log else out_dir / f"{nb.stem}.log",
            )
        except KeyboardInterrupt as exc:  # a second Ctrl-C while papermill was cleaning up
            message = f"interrupted ({_how(exc)})"
            outcome = Outcome(nb.stem, 0.0, False, message, interrupted=True)
            mark_unfinished(out_dir / nb.name, "interrupted", message)
        if not outcome.ok:
            result_file.unlink(missing_ok=True)  # only complete runs leave numbers
        progress = f"[{i}/{len(notebooks)}] {nb.stem:<{width}}  {_fmt_seconds(outcome.seconds):>10}"
        print(f"{progress}  {outcome.status}", flush=True)
        outcomes.append(outcome)
        if outcome.interrupted:
            left = [n.stem for n in notebooks[i:]]
            if left:
                print(f"Not run: {', '.join(left)}")
            print(f"\n{summary_table(outcomes)}")
            return 130

    print()
    print(summary_table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
