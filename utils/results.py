"""Machine-readable results of a notebook run (``build/results/<notebook>.json``).

Each notebook calls :func:`record` once with its headline measurements; ``make report``
(:mod:`utils.tools.report`) merges the files of one or several machines. Framework-free: the library
versions are read from installed package metadata, never by importing TensorFlow or torch.

One file per notebook and machine, schema version 1 (:data:`SCHEMA`, checked by :func:`load`)::

    {
      "format": "train-faster-on-tpus/results",   # marks the file as ours
      "schema_version": 1,
      "notebook": "03_tpu_strategy",              # the notebook's file stem
      "created": "2026-11-29T18:45:00+00:00",     # ISO 8601, UTC
      "machine": "tpu: v5e-1",                    # see machine_label(); groups the report columns
      "runtime": {...},                           # utils.runtime.as_dict(utils.runtime.detect())
      "versions": {"python": "3.11.9", "numpy": "2.1.3", "tensorflow": "2.21.0",
                   "keras": "3.12.0", "torch": null, "torch_xla": null, "libtpu": null},
      "metrics": {
        "train_images_per_s": {"value": 51234.0, "unit": "img/s"},
        "epoch_time":         {"value": 0.98, "unit": "s"}
      },
      "parameters": {"EPOCHS": 5, "TRAIN_IMAGES": 8000},   # optional: what the run was asked
      "data_source": "standin"                            # optional: "cifar10", "standin", ...
    }

Metric names are identifiers (letters, digits, ``_``); each value is a finite number with a unit.
Units decide how the report compares machines: times (``s``, ``ms``) are better lower, rates
(``img/s``, ``GFLOP/s``, ``GB/s``, anything ``/s``) better higher, ``ratio``/``x``/``%`` neutral.
A negative time or rate is rejected (an impossible value), and so is a ``created`` time more than
a day in the future (it would win every duplicate in the report).

``parameters`` (the notebook's papermill parameters as the run used them) and ``data_source``
(:data:`CIFAR10` for real CIFAR-10, :data:`STANDIN` for the offline stand-in, or a short word for
other data) are optional, so files written before they existed still load (schema version 1
either way); ``make report`` marks machines whose runs of a notebook differ in them. A notebook
records them with::

    results.record("04_keras_cifar10_tpu", metrics,
                   parameters={"EPOCHS": EPOCHS, "TRAIN_IMAGES": TRAIN_IMAGES},
                   data_source=data)   # the CifarData from utils.data.load_cifar10, or a string
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jsonschema

from utils import ROOT

FORMAT = "train-faster-on-tpus/results"
SCHEMA_VERSION = 1

# Library versions stored with every result: label -> distributions that provide it (first found
# wins; e.g. Colab TPU runtimes install ``tensorflow-tpu`` rather than ``tensorflow``).
VERSION_SOURCES: Mapping[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "tensorflow": ("tensorflow", "tensorflow-tpu", "tensorflow-cpu"),
    "keras": ("keras",),
    "torch": ("torch",),
    "torch_xla": ("torch_xla", "torch-xla"),
    "libtpu": ("libtpu", "libtpu-nightly"),
}

_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

#: ``data_source`` of real CIFAR-10 and of the offline stand-in (utils.data.load_cifar10).
CIFAR10 = "cifar10"
STANDIN = "standin"

# Time units: a negative value is impossible (rates are recognised by a unit ending in "/s").
_TIME_UNITS = frozenset({"ns", "us", "µs", "ms", "s", "min", "h"})
#: How far in the future a ``created`` time may lie (clock skew between machines).
MAX_CLOCK_SKEW_S = 24 * 3600.0

_SCALAR = {"type": ["string", "number", "boolean", "null"]}

#: The fields :func:`load` reads without a default; the schema must require each of them.
READ_FIELDS = ("notebook", "created", "machine", "runtime", "versions", "metrics")

#: JSON Schema (draft 2020-12) of a results file; see the module docstring for an example.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Train faster on TPUs: results of one notebook on one machine",
    "type": "object",
    "required": [
        "format",
        "schema_version",
        "notebook",
        "created",
        "machine",
        "runtime",
        "versions",
        "metrics",
    ],
    "additionalProperties": False,
    "properties": {
        "format": {"const": FORMAT},
        "schema_version": {"const": SCHEMA_VERSION},
        "notebook": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"},
        "created": {"type": "string", "minLength": 10},
        "machine": {"type": "string", "minLength": 1},
        "runtime": {"type": "object"},
        "versions": {
            "type": "object",
            "required": ["python"],
            "additionalProperties": {"type": ["string", "null"]},
        },
        "metrics": {
            "type": "object",
            "propertyNames": {"pattern": _NAME_PATTERN},
            "additionalProperties": {
                "type": "object",
                "required": ["value", "unit"],
                "additionalProperties": False,
                "properties": {
                    "value": {"type": "number"},
                    "unit": {"type": "string", "minLength": 1},
                },
            },
        },
        "parameters": {
            "type": ["object", "null"],
            "propertyNames": {"pattern": _NAME_PATTERN},
            "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]},
        },
        "data_source": {"type": ["string", "null"], "minLength": 1, "maxLength": 200},
    },
}


class ResultsError(ValueError):
    """A results file that cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class Metric:
    """One measurement: a number and its unit (e.g. ``Metric(5120.0, "img/s")``)."""

    value: float
    unit: str


@dataclass(frozen=True)
class ResultsFile:
    """A validated results file (what :func:`load` returns)."""

    path: Path
    notebook: str
    created: str
    machine: str
    runtime: dict[str, Any]
    versions: dict[str, str | None]
    metrics: dict[str, Metric] = field(default_factory=dict)
    parameters: dict[str, Any] | None = None  # None: not recorded (older files)
    data_source: str | None = None  # None: not recorded or no data set

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this file (``load(p).to_dict()`` equals the stored document)."""
        doc = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "notebook": self.notebook,
            "created": self.created,
            "machine": self.machine,
            "runtime": self.runtime,
            "versions": self.versions,
            "metrics": {n: {"value": m.value, "unit": m.unit} for n, m in self.metrics.items()},
        }
        if self.parameters is not None:
            doc["parameters"] = self.parameters
        if self.data_source is not None:
            doc["data_source"] = self.data_source
        return doc


def results_dir() -> Path:
    """Where results go: ``$COURSE_RESULTS_DIR`` if set, else ``<course>/build/results``."""
    return Path(os.environ.get("COURSE_RESULTS_DIR", ROOT / "build" / "results"))


def library_versions() -> dict[str, str | None]:
    """Python's version and the installed versions of the course's libraries (None: absent).

    Reads package metadata only, so it is safe on a TPU VM (no framework gets imported).
    """
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for label, distributions in VERSION_SOURCES.items():
        versions[label] = None
        for dist in distributions:
            try:
                versions[label] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def machine_label(runtime: Mapping[str, Any]) -> str:
    """A short name for the machine, from ``utils.runtime.as_dict(...)``.

    ``"tpu: v5e-1"``, ``"gpu: NVIDIA A100-SXM4-40GB"`` (``"... x 2"`` for several) or
    ``"cpu: <model> x <cores>"`` (trademark signs dropped). The report puts one column per label.
    """
    accelerator = str(runtime.get("accelerator") or "cpu")
    if accelerator == "tpu":
        tpu = runtime.get("tpu") or {}
        kind = tpu.get("accelerator_type") or tpu.get("generation") or "unknown"
        return f"tpu: {kind}"
    if accelerator == "gpu":
        gpus = list(runtime.get("gpus") or [])
        if not gpus:
            return "gpu: unknown"
        name = gpus[0]
        return f"gpu: {name}" if len(gpus) == 1 else f"gpu: {name} x {len(gpus)}"
    model = str(runtime.get("cpu_model") or "unknown CPU")
    for mark in ("(R)", "(r)", "(TM)", "(tm)"):
        model = model.replace(mark, "")
    model = " ".join(model.split())
    cores = runtime.get("cpu_cores")
    return f"cpu: {model} x {cores}" if cores else f"cpu: {model}"


def _runtime_dict() -> dict[str, Any]:
    """The current runtime description as a JSON-ready dict."""
    from utils import runtime  # framework-free

    return json.loads(json.dumps(runtime.as_dict(runtime.detect()), default=str))


def impossible(value: float, unit: str) -> str | None:
    """Why ``value`` cannot be a measurement in ``unit`` (a negative time or rate), else None."""
    unit = unit.strip()
    if value < 0 and (unit in _TIME_UNITS or unit.endswith("/s")):
        kind = "time" if unit in _TIME_UNITS else "rate"
        return f"value {value} {unit} is a negative {kind}, which no measurement gives"
    return None


def _json_scalar(name: str, value: Any) -> Any:
    """A parameter value as JSON: str/int/float/bool/None (numpy scalars unwrapped), or lists."""
    if isinstance(value, (list, tuple)):
        return [_json_scalar(name, v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"parameter {name!r}: {value} is not a finite number")
        return value
    raise ValueError(
        f"parameter {name!r}: {type(value).__name__} {value!r} is not a string, number, "
        "True/False/None or a list of those"
    )


def data_source_label(source: Any) -> str | None:
    """``data_source`` for :func:`record`: a CifarData (from utils.data) or a short string."""
    if source is None:
        return None
    if hasattr(source, "is_standin"):  # utils.data.CifarData
        return STANDIN if source.is_standin else CIFAR10
    text = " ".join(str(source).split())
    if not text or len(text) > 200:
        raise ValueError(f"data_source must be 1-200 characters, got {source!r}")
    return text


def record(
    notebook: str,
    metrics: Mapping[str, tuple[float, str]],
    *,
    out_dir: Path | None = None,
    runtime: Mapping[str, Any] | None = None,
    parameters: Mapping[str, Any] | None = None,
    data_source: Any = None,
) -> Path:
    """Write ``metrics`` (name -> (value, unit)) for ``notebook`` atomically and return the path.

    The runtime description (``utils.runtime``), a machine label and the library versions are
    stored with the numbers, so results from different machines can be put side by side.
    ``parameters``: the notebook's parameters (name -> str, number, True/False/None or a list
    of those), each as requested under its own name (None: the hardware's default) and, where
    the run derived another value from it, as used under the lowercase name
    (``"PER_REPLICA_BATCH": None, "per_replica_batch": 16``); ``data_source``: the
    ``CifarData`` the notebook trained on (stored as ``"cifar10"`` or ``"standin"``) or a short
    string; ``make report`` marks runs that differ in either. ``runtime`` overrides the detected
    description (tests use it). A metric that is not a finite number with a unit, or a negative
    time or rate, raises ``ValueError`` naming it; an existing file for the same notebook is
    replaced (one file per notebook and machine). Metric names are free (identifiers), e.g. ``mfu``.

    Example: ``record("02_tf_data", {"tuned_images_per_s": (41250.0, "img/s")},
    parameters={"EPOCHS": EPOCHS}, data_source=data)``.
    """
    clean: dict[str, dict[str, Any]] = {}
    for name, item in sorted(metrics.items()):
        try:
            value, unit = item
            number = float(value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"metric {name!r}: expected (number, unit), got {item!r}") from err
        if not math.isfinite(number):
            raise ValueError(f"metric {name!r}: value {number} is not a finite number")
        if not isinstance(unit, str) or not unit.strip():
            raise ValueError(f"metric {name!r}: unit must be a non-empty string, got {unit!r}")
        if problem := impossible(number, unit):
            raise ValueError(f"metric {name!r}: {problem}")
        clean[name] = {"value": number, "unit": unit.strip()}

    rt = dict(runtime) if runtime is not None else _runtime_dict()
    doc = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "notebook": notebook,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_label(rt),
        "runtime": rt,
        "versions": library_versions(),
        "metrics": clean,
    }
    if parameters is not None:
        doc["parameters"] = {str(k): _json_scalar(str(k), v) for k, v in parameters.items()}
    if (label := data_source_label(data_source)) is not None:
        doc["data_source"] = label
    problem = _first_problem(doc)
    if problem:
        raise ValueError(f"results for {notebook!r} do not fit the schema: {problem}")

    out = check_writable(Path(out_dir) if out_dir is not None else results_dir())
    path = out / f"{notebook}.json"
    write_text_atomic(path, json.dumps(doc, indent=2) + "\n")
    return path


FILE_MODE = 0o644  # results and reports are meant to be shared: readable by everyone


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename; the file ends up 0644."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
    ) as fh:
        try:
            fh.write(text)
        except BaseException:
            fh.close()
            os.unlink(fh.name)
            raise
    os.chmod(fh.name, FILE_MODE)  # NamedTemporaryFile creates 0600
    os.replace(fh.name, path)


def writable_problem(folder: Path, err: OSError) -> str:
    """One line: the folder cannot take the results, and what to do."""
    return (
        f"cannot write results to {folder} ({err.strerror or type(err).__name__}); "
        "set COURSE_RESULTS_DIR to a writable folder (make run: --results-dir)"
    )


def check_writable(folder: Path | None = None) -> Path:
    """Make sure results can be written to ``folder`` (default :func:`results_dir`), up front.

    Notebooks may call it in their set-up cell so that an unwritable folder is found before
    the work, not in the last cell. Returns the folder; raises ``OSError`` with a one-line message.
    """
    out = Path(folder) if folder is not None else results_dir()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as err:
        raise OSError(err.errno, writable_problem(out, err)) from None
    return out


def _first_problem(doc: Any) -> str | None:
    """The first schema violation of ``doc`` in words (with its JSON path), or None."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(doc), key=lambda e: (list(e.absolute_path), e.message))
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.absolute_path)
    return f"{where}: {err.message}" if where else err.message


def load(path: Path | str) -> ResultsFile:
    """Read and validate one results file; raise :class:`ResultsError` naming what is wrong.

    Problems told apart: unreadable file, malformed JSON, a foreign JSON file (no ``format``
    marker of this course), an unsupported ``schema_version``, and schema violations such as a
    missing field or a metric without a unit.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(path, f"cannot read the file ({err})") from err
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ResultsError(
            path, f"malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from err
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ResultsError(
            path,
            f'not a results file of this course (expected "format": "{FORMAT}", found {found!r})',
        )
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(
            path,
            f"unsupported schema_version {doc.get('schema_version')!r} "
            f"(this course reads version {SCHEMA_VERSION})",
        )
    problem = _first_problem(doc) or next(
        (f"'{k}' is a required property" for k in READ_FIELDS if k not in doc), None
    )
    if problem:
        raise ResultsError(path, f"does not fit the results schema: {problem}")
    try:
        created = datetime.fromisoformat(doc["created"])
    except ValueError as err:
        raise ResultsError(path, f"created: {doc['created']!r} is not an ISO 8601 time") from err
    created = created if created.tzinfo else created.replace(tzinfo=timezone.utc)
    ahead = (created - datetime.now(timezone.utc)).total_seconds()
    if ahead > MAX_CLOCK_SKEW_S:
        raise ResultsError(
            path,
            f"created: {doc['created']} lies {ahead / 86400:.0f} day(s) in the future "
            "(a wrong clock or an edited file); re-run the notebook on that machine",
        )
    for name, m in doc["metrics"].items():
        if not math.isfinite(m["value"]):
            raise ResultsError(path, f"metrics.{name}: value {m['value']} is not a finite number")
        if problem := impossible(m["value"], m["unit"]):
            raise ResultsError(path, f"metrics.{name}: {problem}")
    return ResultsFile(
        path=path,
        notebook=doc["notebook"],
        created=doc["created"],
        machine=doc["machine"],
        runtime=doc["runtime"],
        versions=doc["versions"],
        metrics={name: Metric(float(m["value"]), m["unit"]) for name, m in doc["metrics"].items()},
        parameters=doc.get("parameters"),
        data_source=doc.get("data_source"),
    )
