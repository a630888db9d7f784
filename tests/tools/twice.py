"""Run a notebook twice, the second time beside a CPU hog, and check its verdicts agree.

``python -m tests.tools.twice 09 [--hog 2]`` (``make twice NB=09``) executes the notebook with
papermill into ``build/twice/run1`` and then ``build/twice/run2`` (each with its own results
folder), the second run with ``--hog`` busy-looping processes beside it (in their own session,
killed when the run ends, however it ends). It then compares

- the verdicts recorded in the two results files (``verdict_*`` metrics written by
  ``utils.compare.Comparison.metrics``: ``utils.compare.VERDICT_VALUES``), and
- the conclusion lines the notebook printed (``Verdict.sentence()``), matched on the names they
  compare, with the numbers masked.

Opposite conclusions fail: faster against slower, or equal against faster or slower. "Cannot
tell" is compatible with anything: a loaded machine widens the interval, it must not flip the
conclusion.
Framework-free (papermill is imported only to run the notebooks). A maintainer's check: heavy,
run it under the course's lock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.tools.course import ipc_kernel_manager
from utils import ROOT, fresh_process
from utils.compare import CANNOT_TELL, STATES, VERDICT_VALUES

_CODES = {value: state for state, value in VERDICT_VALUES.items()}
_SENTENCE = re.compile(
    r"^(?P<a>.+?) is (?P<state>faster|slower) than (?P<b>.+?): \d"
    r"|^(?P<a2>.+?) vs (?P<b2>.+?): (?P<state2>equal|cannot tell) (?:within|at this noise)"
)
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def mask(text: str) -> str:
    """``text`` with every number replaced by ``#``."""
    return _NUMBER.sub("#", text)


def verdict_value(value: object) -> str:
    """A recorded verdict (a code of ``VERDICT_VALUES``, or its word) as a word."""
    if isinstance(value, str) and value in STATES:
        return value
    try:
        return _CODES[float(value)]  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"not a verdict: {value!r}") from None


def results_verdicts(doc: Mapping[str, object]) -> dict[str, str]:
    """``verdict_*`` metrics of a results file (as loaded JSON) -> word."""
    metrics = doc.get("metrics", {})
    out = {}
    for key, item in metrics.items():  # type: ignore[union-attr]
        if key.startswith("verdict_"):
            value = item.get("value") if isinstance(item, Mapping) else item
            out[key] = verdict_value(value)
    return out


def printed_verdicts(lines: Iterable[str]) -> dict[str, str]:
    """Conclusion lines (``Verdict.sentence()``) -> {"A vs B" with numbers masked: word}."""
    out = {}
    for line in lines:
        m = _SENTENCE.match(line.strip())
        if m is None:
            continue
        if m.group("state"):
            out[mask(f"{m.group('a')} vs {m.group('b')}")] = m.group("state")
        else:
            out[mask(f"{m.group('a2')} vs {m.group('b2')}")] = m.group("state2")
    return out


def notebook_lines(nb: Mapping[str, object]) -> list[str]:
    """Every line of text a notebook printed (stream outputs and plain-text results)."""
    lines: list[str] = []
    for cell in nb.get("cells", []):  # type: ignore[union-attr]
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            lines += "".join(text).splitlines()
    return lines


@dataclass(frozen=True)
class Difference:
    """One comparison whose verdicts differ between the runs."""

    key: str
    first: str
    second: str

    @property
    def opposite(self) -> bool:
        """Conclusions that contradict: faster vs slower, equal vs faster or slower."""
        return self.first != self.second and CANNOT_TELL not in (self.first, self.second)

    def __str__(self) -> str:
        kind = "OPPOSITE" if self.opposite else "allowed"
        return f"{kind}: {self.key}: {self.first} -> {self.second}"


def differences(first: Mapping[str, str], second: Mapping[str, str]) -> list[Difference]:
    """Keys present in both runs whose verdicts differ (missing keys are reported by
    :func:`missing`)."""
    return [
        Difference(k, first[k], second[k])
        for k in sorted(first.keys() & second.keys())
        if first[k] != second[k]
    ]


def missing(first: Mapping[str, str], second: Mapping[str, str]) -> list[str]:
    """Keys only one run has."""
    return sorted(first.keys() ^ second.keys())


def agree(first: Mapping[str, str], second: Mapping[str, str]) -> bool:
    """No opposite verdicts (:attr:`Difference.opposite`) among the keys both runs share."""
    return not any(d.opposite for d in differences(first, second))


def start_hogs(count: int) -> list:
    """``count`` busy loops (one core each), each in a process group of its own."""
    return [fresh_process.spawn([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_hogs(hogs: Sequence) -> None:
    for hog in hogs:
        fresh_process.stop(hog)


def run_notebook(path: Path, out_dir: Path, kernel: str, hog: int = 0) -> tuple[dict, dict]:
    """Execute ``path`` into ``out_dir``, results in ``out_dir/results``: (notebook, results)."""
    import papermill

    results = out_dir / "results"
    results.mkdir(parents=True, exist_ok=True)
    os.environ["COURSE_RESULTS_DIR"] = str(results)
    hogs = start_hogs(hog)
    try:
        nb = papermill.execute_notebook(
            str(path),
            str(out_dir / path.name),
            kernel_name=kernel,
            cwd=str(path.parent),
            progress_bar=False,
            kernel_manager_class=ipc_kernel_manager(),
        )
    finally:
        stop_hogs(hogs)
    found = sorted(results.glob("*.json"))
    doc = json.loads(found[0].read_text(encoding="utf-8")) if found else {}
    return json.loads(json.dumps(nb)), doc


def report(runs: Sequence[tuple[dict, dict]]) -> tuple[bool, list[str]]:
    """Compare two runs' recorded and printed verdicts: (no opposite verdicts, lines to print)."""
    (nb1, doc1), (nb2, doc2) = runs
    ok, lines = True, []
    for label, a, b in (
        ("recorded", results_verdicts(doc1), results_verdicts(doc2)),
        ("printed", printed_verdicts(notebook_lines(nb1)), printed_verdicts(notebook_lines(nb2))),
    ):
        diffs = differences(a, b)
        same = len(a.keys() & b.keys()) - len(diffs)
        lines.append(
            f"{label}: {len(a)} and {len(b)} verdicts, {same} the same, {len(diffs)} differ"
        )
        lines += [f"  {d}" for d in diffs]
        lines += [f"  only in one run: {k}" for k in missing(a, b)]
        ok = ok and agree(a, b)
    return ok, lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", help="number or name prefix, e.g. 09")
    parser.add_argument("--hog", type=int, default=2, help="busy processes beside the second run")
    parser.add_argument("--kernel", default="tpu-course")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "twice")
    args = parser.parse_args(argv)
    found = sorted((ROOT / "notebooks").glob(f"{args.notebook}*.ipynb"))
    if len(found) != 1:
        parser.error(f"{args.notebook!r} matches {len(found)} notebooks; give a unique prefix")
    runs = []
    for i, hog in enumerate((0, args.hog), start=1):
        start = time.perf_counter()
        runs.append(run_notebook(found[0], args.out / f"run{i}", args.kernel, hog))
        print(f"run {i} ({hog} hog processes): {time.perf_counter() - start:.0f} s", flush=True)
    ok, lines = report(runs)
    print("\n".join(lines))
    print("no opposite verdicts" if ok else "OPPOSITE VERDICTS: a conclusion flipped between runs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
