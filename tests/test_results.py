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


def test_load_rejects_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="cannot read the file"):
        results.load(tmp_path / "missing.json")


def test_load_accepts_a_copied_fixture(tmp_path: Path) -> None:
    copy = tmp_path / "renamed.json"
    shutil.copy(FIXTURES / "cpu" / "02_pipelines.json", copy)
    loaded = results.load(copy)
    assert loaded.notebook == "02_pipelines"
    assert loaded.metrics["tuned_images_per_s"] == Metric(4000.0, "img/s")
