"""Tests for utils.tools.report: merging results of several machines into one comparison."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from utils.tools import report

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
CPU = "cpu: Intel Xeon Processor x 2"
TPU = "tpu: v5e-1"


@pytest.mark.parametrize(
    ("unit", "better"),
    [
        ("s", "lower"),
        ("ms", "lower"),
        ("img/s", "higher"),
        ("GFLOP/s", "higher"),
        ("GB/s", "higher"),
        ("elements/s", "higher"),
        ("ratio", None),
        ("x", None),
        ("%", None),
        ("MiB", None),
    ],
)
def test_direction_by_unit(unit: str, better: str | None) -> None:
    assert report.direction(unit) == better


def test_speedup_follows_direction() -> None:
    assert report.speedup(100.0, 400.0, "img/s") == pytest.approx(4.0)
    assert report.speedup(120.0, 4.8, "s") == pytest.approx(25.0)
    assert report.speedup(10.0, 20.0, "s") == pytest.approx(0.5)  # twice as slow
    assert report.speedup(4.0, 8.0, "ratio") is None
    assert report.speedup(0.0, 8.0, "img/s") is None


def test_convert_units() -> None:
    assert report.convert(1500.0, "ms", "s") == pytest.approx(1.5)
    assert report.convert(2.0, "TFLOP/s", "GFLOP/s") == pytest.approx(2000.0)
    assert report.convert(1.0, "s", "img/s") is None
    assert report.convert(3.0, "widgets", "widgets") == 3.0


def test_merge_of_a_cpu_and_a_tpu_run() -> None:
    collection = report.collect([FIXTURES / "cpu", FIXTURES / "tpu"])
    assert not collection.rejected
    assert collection.machines == [CPU, TPU]
    assert collection.notebooks == ["02_pipelines", "03_training"]
    baseline = report.choose_baseline(collection.machines)
    assert baseline == CPU

    rows = {(r.notebook, r.metric): r for r in report.comparison(collection, baseline)}
    assert len(rows) == 7
    tuned = rows[("02_pipelines", "tuned_images_per_s")]
    assert tuned.values == {CPU: 4000.0, TPU: 20000.0}
    assert tuned.speedups[TPU] == pytest.approx(5.0)
    assert tuned.speedups[CPU] == pytest.approx(1.0)
    epoch = rows[("03_training", "epoch_time")]
    assert epoch.speedups[TPU] == pytest.approx(25.0)  # 120 s -> 4.8 s
    assert rows[("02_pipelines", "tuned_vs_naive")].speedups == {CPU: None, TPU: None}
    compile_row = rows[("03_training", "compile_overhead")]
    assert compile_row.values == {CPU: None, TPU: 1500.0}
    assert compile_row.speedups == {CPU: None, TPU: None}

    table = report.markdown_table(
        [r for r in rows.values() if r.notebook == "03_training"], collection.machines, baseline
    )
    assert table.splitlines() == [
        f"| metric | unit | {CPU} | {TPU} |",
        "|---|---|---:|---:|",
        "| compile_overhead | ms | — | 1,500 |",
        "| epoch_time | s | 120 | 4.8 (×25.0) |",
        "| test_accuracy | % | 41.5 | 68.25 |",
        "| train_images_per_s | img/s | 400 | 10,000 (×25.0) |",
    ]


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_main_writes_report_and_charts_leaving_inputs_untouched(tmp_path: Path) -> None:
    before = _digest(FIXTURES)
    out = tmp_path / "build" / "report.md"
    assert report.main([str(FIXTURES / "cpu"), str(FIXTURES / "tpu"), "--out", str(out)]) == 0
    assert _digest(FIXTURES) == before

    text = out.read_text()
    assert f"Speed-ups (×N) are against **{CPU}**" in text
    assert "| tuned_images_per_s | img/s | 4,000 | 20,000 (×5.00) |" in text
    assert "## 02_pipelines" in text and "## 03_training" in text
    charts = sorted((tmp_path / "build" / "report_files").glob("*.png"))
    assert len(charts) == 7
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in charts)
    for png in charts:
        assert f"(report_files/{png.name})" in text


def _copy_fixtures(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(FIXTURES, root)
    return root


def test_bad_files_are_rejected_by_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = _copy_fixtures(tmp_path)
    (root / "tpu" / "package.json").write_text('{"name": "not ours"}')
    (root / "tpu" / "broken.json").write_text("{")
    (root / "README.md").write_text("not json, not read")
    out = tmp_path / "report.md"

    assert report.main([str(root), "--out", str(out), "--no-charts"]) == 0
    err = capsys.readouterr().err
    assert f"{root / 'tpu' / 'package.json'}: not a results file of this course" in err
    assert f"{root / 'tpu' / 'broken.json'}: malformed JSON" in err
    text = out.read_text()
    assert "## Rejected files" in text
    assert "package.json`: not a results file of this course" in text
    assert "| tuned_images_per_s | img/s | 4,000 | 20,000 (×5.00) |" in text  # the rest still used
    assert not (tmp_path / "report_files").exists()

    assert report.main([str(root), "--out", str(out), "--no-charts", "--strict"]) == 1


def test_duplicate_machine_and_notebook_uses_the_newer_file(tmp_path: Path) -> None:
    root = _copy_fixtures(tmp_path)
    newer = json.loads((root / "tpu" / "03_training.json").read_text())
    newer["created"] = "2026-11-30T09:00:00+00:00"
    newer["metrics"]["epoch_time"]["value"] = 2.4
    (root / "tpu-again").mkdir()
    (root / "tpu-again" / "03_training.json").write_text(json.dumps(newer))

    collection = report.collect([root])
    assert len(collection.files) == 4
    rows = {(r.notebook, r.metric): r for r in report.comparison(collection, CPU)}
    assert rows[("03_training", "epoch_time")].values[TPU] == 2.4
    assert rows[("03_training", "epoch_time")].speedups[TPU] == pytest.approx(50.0)
    (note,) = collection.notes
    assert f"using {root / 'tpu-again' / '03_training.json'}" in note
    assert str(root / "tpu" / "03_training.json") in note


def test_the_same_folder_twice_counts_once() -> None:
    collection = report.collect([FIXTURES, FIXTURES / "cpu"])
    assert len(collection.files) == 4 and not collection.notes


def test_units_are_converted_to_the_baselines(tmp_path: Path) -> None:
    root = _copy_fixtures(tmp_path)
    path = root / "tpu" / "03_training.json"
    doc = json.loads(path.read_text())
    doc["metrics"]["epoch_time"] = {"value": 4800.0, "unit": "ms"}
    path.write_text(json.dumps(doc))
    rows = {r.metric: r for r in report.comparison(report.collect([root]), CPU)}
    assert rows["epoch_time"].unit == "s"
    assert rows["epoch_time"].values[TPU] == pytest.approx(4.8)
    assert rows["epoch_time"].speedups[TPU] == pytest.approx(25.0)


def test_without_a_cpu_run_there_is_no_speedup(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert report.main([str(FIXTURES / "tpu"), "--out", str(out), "--no-charts"]) == 0
    text = out.read_text()
    assert "| epoch_time | s | 4.8 |" in text
    assert "×" not in text


def test_baseline_can_be_chosen(tmp_path: Path) -> None:
    collection = report.collect([FIXTURES])
    rows = {r.metric: r for r in report.comparison(collection, TPU)}
    assert rows["epoch_time"].speedups[CPU] == pytest.approx(0.04)
    with pytest.raises(ValueError, match="not among the machines"):
        report.choose_baseline(collection.machines, "gpu: nothing")


def test_nothing_usable_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    assert report.main([str(tmp_path / "empty"), str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "no usable results files" in err and "does not exist" in err


def test_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    root = _copy_fixtures(tmp_path)
    target = root / "cpu" / "02_pipelines.json"
    before = target.read_bytes()
    with pytest.raises(ValueError, match="refusing to overwrite"):
        report.write_report([root], target, charts=False)
    assert target.read_bytes() == before


# --------------------------------------------------------------------------------------------
# Issue 16: unlike runs marked, labels escaped, impossible values and future times, file mode
# --------------------------------------------------------------------------------------------

from utils import results  # noqa: E402

CPU_RT = {"platform": "local", "accelerator": "cpu", "cpu_model": "Test CPU", "cpu_cores": 2}
TPU_RT = {"platform": "colab", "accelerator": "tpu", "tpu": {"accelerator_type": "v5e-1"}}


def _two_runs(tmp_path: Path, cpu_kw: dict, tpu_kw: dict) -> Path:
    root = tmp_path / "res"
    metrics = {"images_per_s": (100.0, "img/s")}
    results.record("04_nb", metrics, out_dir=root / "cpu", runtime=CPU_RT, **cpu_kw)
    metrics = {"images_per_s": (1000.0, "img/s")}
    results.record("04_nb", metrics, out_dir=root / "tpu", runtime=TPU_RT, **tpu_kw)
    return root


def test_runs_that_differ_in_parameters_or_data_are_marked(tmp_path: Path) -> None:
    """Before: a stand-in CPU run and a real-data TPU run were put side by side unmarked."""
    root = _two_runs(
        tmp_path,
        {"parameters": {"EPOCHS": 5, "TRAIN_IMAGES": 8000}, "data_source": "standin"},
        {"parameters": {"EPOCHS": 10, "TRAIN_IMAGES": 8000}, "data_source": "cifar10"},
    )
    out = tmp_path / "report.md"
    assert report.main([str(root), "--out", str(out), "--no-charts"]) == 0
    text = out.read_text()
    assert "| images_per_s | img/s | 100 | 1,000 (×10.0) † |" in text
    assert "Data: cpu: Test CPU x 2: standin; tpu: v5e-1: cifar10." in text
    assert (
        "- † 'tpu: v5e-1' ran differently from 'cpu: Test CPU x 2' "
        "(data cifar10 vs standin; EPOCHS 10 vs 5): not like for like" in text
    )


def test_like_runs_are_not_marked(tmp_path: Path) -> None:
    same = {"parameters": {"EPOCHS": 5}, "data_source": "standin"}
    root = _two_runs(tmp_path, same, same)
    collection = report.collect([root])
    assert report.setup_differences(collection, "04_nb", "cpu: Test CPU x 2") == {}
    text = report.render(collection, "cpu: Test CPU x 2", None)
    assert "†" not in text
    # One run without parameters (an older file) is marked too: nobody knows what it ran.
    root2 = _two_runs(tmp_path / "b", same, {})
    diffs = report.setup_differences(report.collect([root2]), "04_nb", "cpu: Test CPU x 2")
    assert diffs["tpu: v5e-1"] == [
        "data not recorded vs standin",
        "parameters recorded by one run only",
    ]


def test_a_hostile_machine_label_cannot_break_the_report(tmp_path: Path) -> None:
    """Before: '|' split the table and a newline injected a '## ...' heading."""
    root = _copy_fixtures(tmp_path)
    path = root / "tpu" / "03_training.json"
    doc = json.loads(path.read_text())
    for p in (root / "tpu").glob("*.json"):
        d = json.loads(p.read_text())
        d["machine"] = "tpu: evil | col\n## Injected heading\n$x$"
        d["runtime"]["platform"] = "a|b"
        p.write_text(json.dumps(d))
    del doc
    out = tmp_path / "report.md"
    assert report.main([str(root), "--out", str(out)]) == 0  # charts too ($ is no mathtext)
    text = out.read_text()
    assert "\n## Injected heading" not in text
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert all("Injected" not in h for h in headings)
    for line in text.splitlines():
        if line.startswith("| metric"):
            # 2 fixed columns + 2 machines: the escaped '|' does not add a column
            assert len(line.replace("\\|", "").split("|")) == 2 + 4
    assert "tpu: evil \\| col ## Injected heading $x$" in text


def test_far_future_file_does_not_win_a_duplicate(tmp_path: Path) -> None:
    root = _copy_fixtures(tmp_path)
    fake = json.loads((root / "tpu" / "03_training.json").read_text())
    fake["created"] = "2999-01-01T00:00:00+00:00"
    fake["metrics"]["epoch_time"]["value"] = 0.001
    (root / "tpu-fake").mkdir()
    (root / "tpu-fake" / "03_training.json").write_text(json.dumps(fake))
    collection = report.collect([root])
    rows = {(r.notebook, r.metric): r for r in report.comparison(collection, CPU)}
    assert rows[("03_training", "epoch_time")].values[TPU] == 4.8
    assert any("in the future" in e.problem for e in collection.rejected)


def test_negative_rate_is_rejected(tmp_path: Path) -> None:
    root = _copy_fixtures(tmp_path)
    path = root / "tpu" / "02_pipelines.json"
    doc = json.loads(path.read_text())
    doc["metrics"]["tuned_images_per_s"]["value"] = -20000.0
    path.write_text(json.dumps(doc))
    collection = report.collect([root])
    assert any("negative rate" in e.problem for e in collection.rejected)


def test_report_is_world_readable(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert report.main([str(FIXTURES), "--out", str(out), "--no-charts"]) == 0
    assert out.stat().st_mode & 0o777 == 0o644
