"""Tests for utils.results: the results file schema, record() and load()."""

from __future__ import annotations

import importlib.metadata
import json
import math
import platform
import shutil
from pathlib import Path

import jsonschema
import pytest

from utils import results
from utils.results import Metric, ResultsError

FIXTURES = Path(__file__).parent / "fixtures" / "results"

TPU_RUNTIME = {
    "platform": "colab",
    "accelerator": "tpu",
    "tpu": {"mode": "vm", "accelerator_type": "v5e-1", "generation": "v5e", "chips": 1},
    "gpus": [],
    "cpu_model": "AMD EPYC 7B13",
    "cpu_cores": 24,
}


def test_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(results.SCHEMA)


def test_fixture_files_fit_the_schema() -> None:
    files = sorted(FIXTURES.rglob("*.json"))
    assert len(files) == 4
    for path in files:
        jsonschema.validate(json.loads(path.read_text()), results.SCHEMA)


def test_round_trip(tmp_path: Path) -> None:
    metrics = {"train_images_per_s": (51234.5, "img/s"), "epoch_time": (0.98, "s"), "n": (3, "x")}
    path = results.record("03_tpu", metrics, out_dir=tmp_path, runtime=TPU_RUNTIME)
    assert path == tmp_path / "03_tpu.json"
    loaded = results.load(path)
    assert loaded.notebook == "03_tpu"
    assert loaded.machine == "tpu: v5e-1"
    assert loaded.runtime == TPU_RUNTIME
    assert loaded.metrics == {
        "epoch_time": Metric(0.98, "s"),
        "n": Metric(3.0, "x"),
        "train_images_per_s": Metric(51234.5, "img/s"),
    }
    assert loaded.to_dict() == json.loads(path.read_text())
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_record_describes_this_machine(tmp_path: Path) -> None:
    path = results.record("00_here", {"x": (1.0, "s")}, out_dir=tmp_path)
    loaded = results.load(path)
    from utils import runtime

    rt = runtime.as_dict(runtime.detect())
    assert loaded.runtime["accelerator"] == rt["accelerator"]
    assert loaded.machine == results.machine_label(rt)
    assert loaded.versions["python"] == platform.python_version()


def test_record_replaces_the_previous_file(tmp_path: Path) -> None:
    results.record("01_a", {"x": (1.0, "s")}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    path = results.record("01_a", {"x": (2.0, "s")}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    assert results.load(path).metrics["x"].value == 2.0


def test_record_honours_course_results_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path / "elsewhere"))
    path = results.record("01_a", {"x": (1.0, "s")}, runtime=TPU_RUNTIME)
    assert path == tmp_path / "elsewhere" / "01_a.json"


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"t": (math.nan, "s")}, "'t': value nan is not a finite number"),
        ({"t": (math.inf, "s")}, "not a finite number"),
        ({"t": (1.0, "")}, "'t': unit must be a non-empty string"),
        ({"t": (1.0, None)}, "unit must be a non-empty string"),
        ({"t": ("fast", "s")}, "'t': expected (number, unit)"),
        ({"t": 1.0}, "expected (number, unit)"),
        ({"bad name": (1.0, "s")}, "metrics"),
    ],
)
def test_record_rejects_bad_metrics(tmp_path: Path, metrics: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        results.record("01_a", metrics, out_dir=tmp_path, runtime=TPU_RUNTIME)
    assert not list(tmp_path.iterdir())


def test_library_versions_read_metadata() -> None:
    versions = results.library_versions()
    assert versions["python"] == platform.python_version()
    assert versions["numpy"] == importlib.metadata.version("numpy")
    assert set(results.VERSION_SOURCES) <= set(versions)


@pytest.mark.parametrize(
    ("runtime", "label"),
    [
        (TPU_RUNTIME, "tpu: v5e-1"),
        ({"accelerator": "tpu", "tpu": {"generation": "v4"}}, "tpu: v4"),
        ({"accelerator": "gpu", "gpus": ["NVIDIA L4"]}, "gpu: NVIDIA L4"),
        ({"accelerator": "gpu", "gpus": ["NVIDIA T4", "NVIDIA T4"]}, "gpu: NVIDIA T4 x 2"),
        (
            {"accelerator": "cpu", "cpu_model": "Intel(R) Xeon(R)  CPU @ 2.20GHz", "cpu_cores": 2},
            "cpu: Intel Xeon CPU @ 2.20GHz x 2",
        ),
        ({}, "cpu: unknown CPU"),
    ],
)
def test_machine_label(runtime: dict, label: str) -> None:
    assert results.machine_label(runtime) == label


def _good_doc() -> dict:
    return json.loads((FIXTURES / "tpu" / "03_training.json").read_text())


def _write(tmp_path: Path, content: object, name: str = "bad.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _broken(change) -> dict:
    doc = _good_doc()
    change(doc)
    return doc


BAD_FILES = {
    "malformed JSON": ('{"format": "train-faster-on-tpus/results",', "malformed JSON at line 1"),
    "foreign object": ({"name": "my-app", "version": "1.0.0"}, "not a results file of this course"),
    "foreign list": ([1, 2, 3], "not a results file of this course"),
    "wrong schema version": (
        _broken(lambda d: d.update(schema_version=2)),
        "unsupported schema_version 2",
    ),
    "missing field": (_broken(lambda d: d.pop("machine")), "'machine' is a required property"),
    "metric without unit": (
        _broken(lambda d: d["metrics"]["epoch_time"].pop("unit")),
        "metrics.epoch_time: 'unit' is a required property",
    ),
    "value not a number": (
        _broken(lambda d: d["metrics"]["epoch_time"].update(value="4.8")),
        "metrics.epoch_time.value: '4.8' is not of type 'number'",
    ),
    "value not finite": ('{"value": NaN}', None),  # filled in below
    "bad created time": (
        _broken(lambda d: d.update(created="yesterday at noon")),
        "'yesterday at noon' is not an ISO 8601 time",
    ),
    "unknown field": (_broken(lambda d: d.update(extra=1)), "Additional properties"),
}
_nan = _good_doc()
_nan["metrics"]["epoch_time"]["value"] = math.nan
BAD_FILES["value not finite"] = (json.dumps(_nan), "metrics.epoch_time: value nan is not a finite")


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_load_rejects_bad_files_clearly(tmp_path: Path, kind: str) -> None:
    content, message = BAD_FILES[kind]
    path = _write(tmp_path, content)
    with pytest.raises(ResultsError) as info:
        results.load(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)
    assert info.value.path == path


FIELDS = ("format", "schema_version", "notebook", "created", "machine", "runtime", "versions")


@pytest.mark.parametrize("field", [*FIELDS, "metrics"])
def test_every_field_is_required_and_its_absence_is_named(tmp_path: Path, field: str) -> None:
    assert field in results.SCHEMA["required"], f"the schema no longer requires {field!r}"
    assert set(results.READ_FIELDS) <= set(results.SCHEMA["required"])
    path = _write(tmp_path, _broken(lambda d: d.pop(field)))
    with pytest.raises(ResultsError) as info:  # never a bare KeyError from load()
        results.load(path)
    assert repr(field) in str(info.value) or field in str(info.value)


def test_load_rejects_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="cannot read the file"):
        results.load(tmp_path / "missing.json")


def test_load_accepts_a_copied_fixture(tmp_path: Path) -> None:
    copy = tmp_path / "renamed.json"
    shutil.copy(FIXTURES / "cpu" / "02_pipelines.json", copy)
    loaded = results.load(copy)
    assert loaded.notebook == "02_pipelines"
    assert loaded.metrics["tuned_images_per_s"] == Metric(4000.0, "img/s")


# --------------------------------------------------------------------------------------------
# Issue 16: parameters and data source recorded; impossible values, future times, file modes
# --------------------------------------------------------------------------------------------


class _FakeCifar:
    def __init__(self, is_standin: bool) -> None:
        self.is_standin = is_standin


def test_record_stores_parameters_and_data_source(tmp_path: Path) -> None:
    """Before: record() had no way to say what was measured (TypeError on these keywords)."""
    import numpy as np

    params = {"EPOCHS": np.int64(5), "TRAIN_IMAGES": None, "LR": 0.5, "MODE": "sqrt", "D": [1, 2]}
    path = results.record(
        "04_x",
        {"mfu": (0.12, "ratio"), "any_new_metric": (3.0, "x")},  # arbitrary metric names
        out_dir=tmp_path,
        runtime=TPU_RUNTIME,
        parameters=params,
        data_source=_FakeCifar(is_standin=True),
    )
    loaded = results.load(path)
    assert loaded.parameters == {
        "EPOCHS": 5,
        "TRAIN_IMAGES": None,
        "LR": 0.5,
        "MODE": "sqrt",
        "D": [1, 2],
    }
    assert loaded.data_source == results.STANDIN == "standin"
    assert loaded.to_dict() == json.loads(path.read_text())
    real = results.record(
        "04_y",
        {"a": (1.0, "s")},
        out_dir=tmp_path,
        runtime=TPU_RUNTIME,
        data_source=_FakeCifar(is_standin=False),
    )
    assert results.load(real).data_source == results.CIFAR10
    text = results.record(
        "04_z",
        {"a": (1.0, "s")},
        out_dir=tmp_path,
        runtime=TPU_RUNTIME,
        data_source="random matrices",
    )
    assert results.load(text).data_source == "random matrices"


def test_files_without_parameters_still_load(tmp_path: Path) -> None:
    """Backward compatible: the committed fixtures predate the fields."""
    for path in sorted(FIXTURES.rglob("*.json")):
        loaded = results.load(path)
        assert loaded.parameters is None and loaded.data_source is None
        assert loaded.to_dict() == json.loads(path.read_text())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parameters": {"EPOCHS": object()}}, "parameter 'EPOCHS'"),
        ({"parameters": {"X": float("nan")}}, "not a finite number"),
        ({"parameters": {"bad name": 1}}, "do not fit the schema"),
        ({"data_source": ""}, "data_source must be"),
    ],
)
def test_record_rejects_bad_parameters(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        results.record("01_a", {"x": (1.0, "s")}, out_dir=tmp_path, runtime=TPU_RUNTIME, **kwargs)


@pytest.mark.parametrize(
    ("value", "unit"), [(-5.0, "img/s"), (-1.0, "s"), (-0.5, "ms"), (-3.0, "GFLOP/s")]
)
def test_negative_times_and_rates_are_rejected(tmp_path: Path, value: float, unit: str) -> None:
    """Before: a negative rate was accepted and shown in the report."""
    with pytest.raises(ValueError, match="negative"):
        results.record("01_a", {"m": (value, unit)}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    path = results.record("01_a", {"m": (1.0, unit)}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    doc = json.loads(path.read_text())
    doc["metrics"]["m"]["value"] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="metrics.m: .*negative"):
        results.load(path)
    # Neutral units may be negative (a change in percent, say).
    results.record("01_b", {"delta": (-3.0, "%")}, out_dir=tmp_path, runtime=TPU_RUNTIME)


def test_far_future_created_is_rejected(tmp_path: Path) -> None:
    """Before: a file dated 2999 loaded fine and always won a duplicate in the report."""
    path = results.record("01_a", {"x": (1.0, "s")}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    doc = json.loads(path.read_text())
    doc["created"] = "2999-01-01T00:00:00+00:00"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="in the future"):
        results.load(path)
    doc["created"] = "2999-01-01T00:00:00"  # naive: read as UTC, same verdict
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="in the future"):
        results.load(path)


def test_results_files_are_world_readable(tmp_path: Path) -> None:
    """Before: 0600 (NamedTemporaryFile's mode)."""
    path = results.record("01_a", {"x": (1.0, "s")}, out_dir=tmp_path, runtime=TPU_RUNTIME)
    assert path.stat().st_mode & 0o777 == 0o644


def test_unwritable_results_folder_is_found_up_front(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OSError, match="cannot write results to .*COURSE_RESULTS_DIR"):
        results.check_writable(blocker / "results")
    with pytest.raises(OSError, match="cannot write results to"):
        results.record("01_a", {"x": (1.0, "s")}, out_dir=blocker / "r", runtime=TPU_RUNTIME)
    assert results.check_writable(tmp_path / "ok") == tmp_path / "ok"
    assert list((tmp_path / "ok").iterdir()) == []  # the probe leaves nothing
