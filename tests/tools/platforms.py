"""The platform matrix: every notebook under Colab's and Kaggle's TPU image versions, on this CPU.

``make test-platforms`` (``python -m tests.tools.platforms``) runs, for each platform and
notebook:

1. **The set-up cell as that TPU image would run it.** The notebook's set-up cell is executed in
   the platform's venv (``build/venv-<platform>``, built by make from
   ``tests/platforms/<platform>-tpu-constraints.txt``) with the environment variables the image
   sets (a TPU VM on Colab or Kaggle), pip replaced by a recorder. What it would install is
   recorded, and so is a set-up cell that stops.
2. **Those installs, and nothing else.** pip resolves them against the venv and the image's
   pins (``--dry-run --report -c``: what the image has, pip keeps); what it adds goes to an overlay
   folder (``pip install --target --no-deps``) put on the kernel's ``PYTHONPATH``, so one venv
   serves every notebook and each notebook sees only its own set-up cell's installs.
3. **The notebook, top to bottom** with papermill in the platform's kernel, offline data, on this
   CPU (a TPU cannot be emulated; cells gated with ``bootstrap.tf_runs_here`` run here, and are
   counted: they are the ones skipped on the TPU image), bounded by a per-notebook timeout.

The verdicts ("runs top to bottom" / "stops at code cell N: message") go to
``results/platform-matrix.json`` with the date, the commit, the versions each venv holds, the
installs and the run times; ``make status`` puts them in README's status table.
Framework-free: everything heavy runs in the platform venvs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from utils import ROOT, fresh_process

NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "build"

# What each free TPU image sets (utils.runtime reads these to say "Colab/Kaggle, a TPU VM").
PLATFORMS: dict[str, dict] = {
    "colab": {
        "title": "Colab TPU (v5e-1)",
        "python": "3.13",
        "env": {
            "COLAB_RELEASE_TAG": "release-colab-external_20260819-060051_RC00",
            "COLAB_TPU_1VM": "1",
            "TPU_ACCELERATOR_TYPE": "v5e-1",
            "TPU_WORKER_HOSTNAMES": "localhost",
        },
    },
    "kaggle": {
        "title": "Kaggle TPU VM (v5e-8)",
        "python": "3.12",
        "env": {
            "KAGGLE_KERNEL_RUN_TYPE": "Interactive",
            "KAGGLE_URL_BASE": "https://www.kaggle.com",
            "TPU_ACCELERATOR_TYPE": "v5litepod-8",
            "TPU_WORKER_HOSTNAMES": "localhost",
        },
    },
}
SHOWN_VERSIONS = ("jax", "keras", "numpy", "protobuf", "tensorflow-cpu", "torch", "torch-xla",
                  "grain")  # fmt: skip
GATE = re.compile(r"tf_runs_here\((?![^)]*host_only=True)")

# Run inside the platform venv: the notebook's parameters and its bootstrap.prepare(...) calls,
# with the TPU image's environment and a pip that only records; prints one JSON line.
_REPLAY = r"""
import json, os, subprocess, sys
nb = json.load(open(sys.argv[1], encoding="utf-8"))
cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
params = next("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", []))
import ast
calls_src = []
for text in ("".join(c["source"]) for c in cells if "bootstrap.prepare(" in "".join(c["source"])):
    code = "\n".join(x for x in text.splitlines() if not x.lstrip().startswith(("!", "%")))
    calls_src += [ast.get_source_segment(code, n) for n in ast.parse(code).body
                  if isinstance(n, (ast.Assign, ast.Expr))
                  and "bootstrap.prepare(" in ast.unparse(n.value)]
source = "from utils import bootstrap\n" + params + "\n" + "\n".join(calls_src)
os.environ.update(json.loads(sys.argv[2]))
calls = []
def record(command, **kwargs):
    if list(command[1:4]) != ["-m", "pip", "install"]:
        return real_run(command, **kwargs)
    calls.append([a for a in command[4:] if a != "-q"])
    return subprocess.CompletedProcess(command, 0, "", "")
real_run, subprocess.run = subprocess.run, record
error = None
try:
    exec(compile(source, "set-up cell", "exec"), {"__name__": "__main__"})
except BaseException as exc:
    error = f"{type(exc).__name__}: {exc}"
finally:
    subprocess.run = real_run
print("REPLAY " + json.dumps({"pip": calls, "error": error}))
"""


@dataclass
class Result:
    """One notebook on one platform."""

    notebook: str
    platform: str
    verdict: str = ""
    ok: bool = False
    installs: list[list[str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gated: int = 0
    seconds: float = 0.0


def constraints(platform: str) -> Path:
    """The image's pins: the venv holds only part of the image, so pip resolves against these."""
    return ROOT / "tests" / "platforms" / f"{platform}-tpu-constraints.txt"


def venv_python(platform: str) -> Path:
    return BUILD / f"venv-{platform}" / "bin" / "python"


def gated_cells(nb: dict) -> int:
    """Code cells that need TensorFlow on the device (skipped with a note on the TPU images)."""
    return sum(
        1 for c in nb["cells"] if c["cell_type"] == "code" and GATE.search("".join(c["source"]))
    )


def first_error(nb: dict) -> str | None:
    """``"stops at code cell N: Name: message"`` for the first failed cell, else None."""
    number = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                message = f"{out.get('ename')}: {out.get('evalue')}".strip()
                message = re.sub(r"\x1b\[[0-9;]*m", "", message).splitlines()[0][:160]
                return f"stops at code cell {number}: {message}"
    return None


def last_started_cell(nb: dict) -> int:
    """The code cell papermill was in when it stopped (by its recorded status), 1-based."""
    number, last = 0, 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        if status in ("running", "completed", "failed"):
            last = number
    return last


def replay_setup(platform: str, path: Path) -> tuple[list[list[str]], str | None]:
    """What the notebook's ``bootstrap.prepare`` calls would install on the platform's image."""
    path = Path(path).resolve()
    env = {**os.environ, "COURSE_NO_INSTALL": "", "PYTHONPATH": ""}
    done = subprocess.run(
        [str(venv_python(platform)), "-c", _REPLAY, str(path),
         json.dumps(PLATFORMS[platform]["env"])],
        cwd=NOTEBOOKS, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    line = next((x for x in done.stdout.splitlines() if x.startswith("REPLAY ")), None)
    if line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return [], f"set-up replay failed: {tail[0]}"
    data = json.loads(line[len("REPLAY ") :])
    return data["pip"], data["error"]


def overlay_for(platform: str, installs: list[list[str]]) -> tuple[Path | None, list[str]]:
    """The folder holding what pip would add for ``installs`` (built once per set of args)."""
    if not installs:
        return None, []
    args = sorted(a for cmd in installs for a in cmd)
    key = re.sub(r"[^A-Za-z0-9_.=-]+", "_", "+".join(args))
    target = BUILD / "platform-overlays" / f"{platform}-{key}"
    added_file = target / ".added.json"
    if added_file.exists():
        return target, json.loads(added_file.read_text(encoding="utf-8"))
    python = str(venv_python(platform))
    report = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--dry-run", "--report", "-", "-c",
         str(constraints(platform)), *args],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if report.returncode != 0:
        raise RuntimeError(f"pip could not resolve {args}: {report.stderr.strip()[-300:]}")
    wanted = [
        (item["metadata"]["name"], item["metadata"]["version"])
        for item in json.loads(report.stdout)["install"]
    ]
    installed = _versions(platform, [name for name, _ in wanted])
    added = [f"{n}=={v}" for n, v in wanted if installed.get(n) != v]
    target.mkdir(parents=True, exist_ok=True)
    if added:
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), *added],
            check=True, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
    added_file.write_text(json.dumps(added), encoding="utf-8")
    return target, added


def _versions(platform: str, names: Sequence[str]) -> dict[str, str | None]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except m.PackageNotFoundError: return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [str(venv_python(platform)), "-c", code, *names],
        capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    return json.loads(done.stdout)


def run_notebook(platform: str, path: Path, overlay: Path | None, timeout: float) -> str:
    """Execute with papermill in the platform's kernel; return the verdict."""
    path = Path(path).resolve()
    out = BUILD / "platform-matrix" / platform / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    env = {**os.environ, "COURSE_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "TQDM_DISABLE": "1",
           "PYTHONHASHSEED": "0", "PYTHONPATH": str(overlay) if overlay else ""}  # fmt: skip
    command = [str(venv_python(platform)), "-m", "papermill", str(path), str(out),
               "-k", f"tpu-course-{platform}", "--cwd", str(NOTEBOOKS), "--no-progress-bar",
               "--log-level", "ERROR"]  # fmt: skip
    # its kernel too: on a timeout, or if this tool is stopped, the whole group ends
    done = fresh_process.run_child(command, env=env, timeout_s=timeout, stderr=subprocess.STDOUT)
    nb = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    if done.timed_out:
        return f"timed out after {timeout:.0f} s in code cell {last_started_cell(nb)}"
    stop = first_error(nb)
    if stop:
        return stop
    if done.returncode != 0:
        tail = [line for line in done.stdout.strip().splitlines() if line.strip()][-1:]
        return f"papermill failed: {(tail or ['no output'])[0][:160]}"
    return "runs top to bottom"


@contextlib.contextmanager
def _held(lock: Path | None):
    """Hold ``lock`` (flock) for one notebook, so a shared machine runs one heavy job at a time."""
    if lock is None:
        yield
        return
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run(
    platforms: Sequence[str],
    notebooks: Sequence[Path],
    timeout: float,
    lock: Path | None = None,
    on_result: Callable[[list[Result]], None] | None = None,
) -> list[Result]:
    """Notebook by notebook, each on every platform; ``on_result`` sees the results so far."""
    results: list[Result] = []
    for platform in platforms:
        if not venv_python(platform).exists():
            raise SystemExit(f"no {venv_python(platform)}: run `make test-platforms` (builds it)")
    for path in notebooks:
        for platform in platforms:
            nb = json.loads(path.read_text(encoding="utf-8"))
            result = Result(path.stem, platform, gated=gated_cells(nb))
            with _held(lock):
                start = time.perf_counter()
                print(f"{platform} {path.name} ...", flush=True)
                result.installs, error = replay_setup(platform, path)
                if error and error.startswith("set-up replay failed"):
                    result.verdict = error[:240]
                elif error:
                    result.verdict = (
                        f"stops at code cell 1 (set-up, on the TPU image): {error[:200]}"
                    )
                else:
                    try:
                        overlay, result.added = overlay_for(platform, result.installs)
                        result.verdict = run_notebook(platform, path, overlay, timeout)
                    except (RuntimeError, subprocess.SubprocessError) as exc:
                        result.verdict = f"could not replay the set-up cell's installs: {exc}"[:240]
            result.ok = result.verdict == "runs top to bottom"
            result.seconds = time.perf_counter() - start
            print(f"  {result.verdict} ({result.seconds:.0f} s)", flush=True)
            results.append(result)
            if on_result is not None:
                on_result(results)
    return results


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              timeout=30).stdout.strip()  # fmt: skip

    sha = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "notebooks", "utils")
    return sha + (" (with uncommitted changes to notebooks/ or utils/)" if dirty else "")


def matrix_json(results: Sequence[Result], when: datetime.datetime, commit: str) -> str:
    """What README's status table reads (``python -m tests.tools.course status``)."""
    doc: dict = {"date": f"{when:%Y-%m-%d}", "commit": commit.split()[0], "platforms": {}}
    for r in results:
        info = PLATFORMS[r.platform]
        if r.platform not in doc["platforms"]:
            shown = (
                _versions(r.platform, SHOWN_VERSIONS) if venv_python(r.platform).exists() else {}
            )
            listed = ", ".join(f"{n} {v}" for n, v in shown.items() if v)
            doc["platforms"][r.platform] = {
                "title": info["title"],
                "versions": f"Python {info['python']}; {listed}",
                "notebooks": {},
            }
        doc["platforms"][r.platform]["notebooks"][r.notebook] = {
            "ok": r.ok,
            "verdict": r.verdict,
            "gated": r.gated,
            "installs": [" ".join(c) for c in r.installs],
            "added": r.added,
            "minutes": round(r.seconds / 60, 1),
        }
    return json.dumps(doc, indent=1) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.platforms",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--platforms", nargs="+", default=list(PLATFORMS), choices=PLATFORMS)
    parser.add_argument("--only", nargs="+", help="notebook numbers or prefixes, run in this order")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per notebook")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "platform-matrix.json")
    parser.add_argument("--lock", type=Path, help="flock this file around each notebook")
    args = parser.parse_args(argv)
    if args.only:
        notebooks = [p for prefix in args.only for p in sorted(NOTEBOOKS.glob(f"{prefix}*.ipynb"))]
    else:
        notebooks = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
    if not notebooks:
        raise SystemExit(f"no notebook matches {args.only!r}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped (SIGTERM)"))
    when = datetime.datetime.now(datetime.UTC)
    commit = _commit()  # what the notebooks came from when the run started
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def write(results: list[Result]) -> str:  # after every run: a cut-short run leaves a file
        text = matrix_json(results, when, commit)
        args.out.write_text(text, encoding="utf-8")
        return text

    results = run(args.platforms, notebooks, args.timeout, args.lock, on_result=write)
    write(results)
    print("\n".join(f"{r.platform} {r.notebook}: {r.verdict}" for r in results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
