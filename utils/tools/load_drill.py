"""The load drill: the unit tests with a CPU hog beside them, so a timing-sensitive test fails
on the maintainer's machine before it fails in CI (``make load-drill``).

A 2-core CI runner or a learner's laptop is rarely idle. This starts ``--hogs`` busy processes
(each spins one core at full speed; default 4, twice the cores of the reference machine), runs
``pytest`` over ``tests/`` (without ``tests/torch``, which needs a process of its own) beside
them, and optionally nbval of one notebook (``--nb 08``) at the same time, all bounded by
``--timeout`` seconds. The hogs run in their own process groups (:mod:`utils.fresh_process`)
and are stopped however the drill ends (also on Ctrl-C). It prints one line: passed, failed,
errors, seconds; the exit status is pytest's (124 when the drill ran past its bound).

A plain CPU hog is gentler than real load (several notebook runs, test suites and package
installs at once, with their memory and disk traffic): pass ``--nb`` for a heavier drill.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from utils import ROOT, fresh_process

HOG = "while True: pass"


def start_hogs(count: int, env: dict[str, str] | None = None) -> list[subprocess.Popen[str]]:
    """``count`` busy loops (one core each), each in a session of its own."""
    return [fresh_process.spawn([sys.executable, "-c", HOG], env=env) for _ in range(count)]


def stop_hogs(hogs: Sequence[subprocess.Popen[str]]) -> None:
    """Stop and reap every hog (their whole groups)."""
    for hog in hogs:
        fresh_process.stop(hog)


def _counts(output: str) -> dict[str, int]:
    """passed / failed / errors / skipped from pytest's last summary line."""
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    found = {k: 0 for k in ("passed", "failed", "error", "skipped")}
    for number, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", tail):
        found[word.rstrip("s") if word.startswith("error") else word] += int(number)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m utils.tools.load_drill", description=__doc__)
    parser.add_argument("--hogs", type=int, default=4, help="busy processes beside the tests")
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound on the drill (s)")
    parser.add_argument("--nb", default="", help="also nbval this notebook (a prefix, e.g. 08)")
    parser.add_argument("pytest_args", nargs="*", help="instead of the default test selection")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.hogs < 0 or args.timeout <= 0:
        print("load_drill: --hogs must be >= 0 and --timeout > 0", file=sys.stderr)
        return 2
    tests = args.pytest_args or ["tests", "--ignore=tests/torch"]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    env = fresh_process.child_env({"COURSE_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    hogs = start_hogs(args.hogs, env)
    nbval, nbval_log = None, tempfile.TemporaryFile("w+")
    start = time.monotonic()
    try:
        if args.nb:
            notebooks = sorted((ROOT / "notebooks").glob(f"{args.nb}*.ipynb"))
            nbval = fresh_process.spawn(
                [*pytest[:-len(tests)], "--nbval", "--nbval-current-env",
                 "--nbval-sanitize-with", "notebooks/nbval_sanitize.cfg", *map(str, notebooks)],
                env=env, stdout=nbval_log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        done = fresh_process.run_child(pytest, env=env, timeout_s=args.timeout)
    finally:
        stop_hogs(hogs)
    seconds = time.monotonic() - start
    counts = _counts(done.stdout)
    print(
        f"load drill ({args.hogs} hogs{', nbval ' + args.nb if args.nb else ''}): "
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
        f"{counts['skipped']} skipped in {seconds:.0f} s"
        + (" (ran past its bound)" if done.timed_out else "")
    )
    if counts["failed"] or counts["error"] or done.timed_out:
        print(done.tail(6000))
    status = 124 if done.timed_out else int(done.returncode or 0)
    if nbval is not None:
        try:
            nbval.wait(timeout=max(args.timeout - seconds, 1.0))
        except subprocess.TimeoutExpired:
            print(f"nbval {args.nb}: still running at the drill's bound; stopped")
        fresh_process.stop(nbval)
        nbval_log.seek(0)
        lines = nbval_log.read().strip().splitlines() or ["?"]
        print(f"nbval {args.nb}: {lines[-1]}")
        status = status or (124 if nbval.returncode is None else nbval.returncode)
    nbval_log.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
