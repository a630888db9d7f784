"""utils.results: one call records a notebook's numbers; bad values lose nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utils import results


def test_record_writes_metrics_versions_and_the_data_source(tmp_path: Path) -> None:
    class Data:
        is_standin = True

    results.record(
        "02_x", {"rate": (5.0, "images/s"), "n": 3}, parameters={"EPOCHS": 2},
        data_source=Data(), out_dir=tmp_path,
    )  # fmt: skip
    doc = results.load(tmp_path / "02_x.json")
    assert doc["metrics"] == {
        "n": {"value": 3.0, "unit": ""},
        "rate": {"value": 5.0, "unit": "images/s"},
    }
    assert doc["parameters"] == {"EPOCHS": 2} and doc["data_source"] == "standin"
    assert doc["versions"]["python"] and "numpy" in doc["versions"]


@pytest.mark.parametrize(
    ("item", "message"),
    [(float("nan"), "not a finite number"), ((-1.0, "s"), "negative"), ("fast", "not a number")],
)
def test_a_bad_value_names_the_metric_and_keeps_the_old_file(tmp_path, item, message) -> None:
    results.record("03_y", {"ok": 1.0}, out_dir=tmp_path)
    path = tmp_path / "03_y.json"
    before = path.read_text()
    with pytest.raises(ValueError, match=f"metric 'bad': .*{message}"):
        results.record("03_y", {"ok": 2.0, "bad": item}, out_dir=tmp_path)
    assert path.read_text() == before


def test_atomic_write_replaces_whole_files_readable_by_all(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    results.write_text_atomic(target, "one")
    results.write_text_atomic(target, "two")
    assert target.read_text() == "two" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # no temporary file left


def test_load_rejects_a_file_that_is_not_results(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"metrics": 3}))
    with pytest.raises(ValueError, match="not a results file"):
        results.load(tmp_path / "a.json")
    with pytest.raises(ValueError, match="not a readable results file"):
        results.load(tmp_path / "missing.json")


def test_versions_reads_each_distribution_and_none_when_absent() -> None:
    import importlib.metadata

    got = results.versions(["numpy", "no-such-distribution-here"])
    assert got == {"numpy": importlib.metadata.version("numpy"), "no-such-distribution-here": None}
    assert results.version("no-such-distribution-here", "numpy") == got["numpy"]  # first present
