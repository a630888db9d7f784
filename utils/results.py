"""A notebook's measurements as a JSON file, and the course's one atomic write.

Each notebook calls :func:`record` once: ``build/results/<notebook>.json`` (or
``$COURSE_RESULTS_DIR``) gets the metrics, the machine and the library versions, so runs on
different machines can be put side by side. Framework-free: versions come from package metadata.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from utils import ROOT

# Label -> the distributions that provide it (the first one installed wins).
LIBRARIES: Mapping[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "jax": ("jax",),
    "keras": ("keras",),
    "tensorflow": ("tensorflow", "tensorflow-tpu", "tensorflow-cpu"),
    "torch": ("torch",),
    "torch_xla": ("torch_xla", "torch-xla"),
    "libtpu": ("libtpu", "libtpu-nightly"),
}
_DATA = {True: "standin", False: "cifar10"}
TIME_UNITS = frozenset({"ns", "us", "ms", "s", "min", "h"})


def version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` present, else None."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions(distributions: Iterable[str]) -> dict[str, str | None]:
    """Each distribution's installed version (None: not installed), read from package metadata:
    the one reader for every module that needs several (nothing is imported)."""
    return {name: version(name) for name in distributions}


def library_versions() -> dict[str, str | None]:
    """Python's version and the course's libraries' (None: not installed): the one report."""
    return {"python": platform.python_version()} | {
        label: version(*dists) for label, dists in LIBRARIES.items()
    }


def results_dir() -> Path:
    return Path(os.environ.get("COURSE_RESULTS_DIR", ROOT / "build" / "results"))


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (readable by all)."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
    ) as fh:
        fh.write(text)
    os.chmod(fh.name, 0o644)
    os.replace(fh.name, path)


def _metric(name: str, item: Any) -> dict[str, Any]:
    value, unit = item if isinstance(item, tuple) else (item, "")
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"metric {name!r}: {value!r} is not a number") from err
    if not math.isfinite(number):
        raise ValueError(f"metric {name!r}: {number} is not a finite number")
    if number < 0 and (unit in TIME_UNITS or unit.endswith("/s")):
        raise ValueError(f"metric {name!r}: {number} {unit} is negative; no measurement gives that")
    return {"value": number, "unit": unit}


def record(
    notebook: str,
    metrics: Mapping[str, Any],
    *,
    parameters: Mapping[str, Any] | None = None,
    data_source: Any = None,
    out_dir: Path | None = None,
) -> None:
    """Write ``metrics`` (name -> number, or (number, unit)) to ``<results>/<notebook>.json``.

    A value that is not a finite number, or a negative time or rate, raises ``ValueError``
    naming it, and nothing is written. ``data_source``: the ``CifarData`` trained on (stored as
    ``"standin"`` or ``"cifar10"``) or a short string.
    """
    from utils import runtime

    doc = {
        "notebook": notebook,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "runtime": runtime.as_dict(runtime.detect()),
        "versions": library_versions(),
        "metrics": {name: _metric(name, item) for name, item in sorted(metrics.items())},
        "parameters": {k: v for k, v in (parameters or {}).items()},
    }
    if data_source is not None:
        standin = getattr(data_source, "is_standin", None)
        doc["data_source"] = str(data_source) if standin is None else _DATA[bool(standin)]
    out = Path(out_dir) if out_dir is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{notebook}.json"
    write_text_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")


def load(path: Path | str) -> dict[str, Any]:
    """A results file as a dict; a file that is not one raises ``ValueError`` naming it."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable results file ({err})") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
        raise ValueError(f"{path}: not a results file (no metrics)")
    return doc
