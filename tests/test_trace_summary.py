"""utils.trace_summary on small synthetic trace files and HLO text."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from utils import trace_summary as ts


def _op(name: str, dur: float, module: str = "jit_train_step") -> dict:
    return {"ph": "X", "pid": 1, "tid": 2, "ts": 0.0, "dur": dur, "name": name,
            "args": {"hlo_op": name, "hlo_module": module}}  # fmt: skip


EVENTS = [
    {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "X", "pid": 1, "tid": 3, "ts": 0.0, "dur": 999.0, "name": "PjitFunction(train_step)"},
    _op("fusion.1", 30.0),
    _op("fusion.1", 30.0),
    _op("fusion.2", 20.0),
    _op("convolution", 20.0),
    _op("other_op", 500.0, module="jit_something_else"),
    {"ph": "i", "name": "instant", "args": {"hlo_op": "x"}},
]


def _write(path: Path, payload: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(payload, f)
    return path


def test_top_ops_sums_and_sorts(tmp_path: Path) -> None:
    path = _write(tmp_path / "plugins/profile/run1/perfetto_trace.json.gz", {"traceEvents": EVENTS})
    events = ts.load_events(ts.find_trace_file(tmp_path))
    stats = ts.top_ops(events, module="train_step")
    assert [(s.name, s.calls, s.total_us) for s in stats] == [
        ("fusion.1", 2, 60.0),
        ("convolution", 1, 20.0),
        ("fusion.2", 1, 20.0),
    ]
    assert stats[0].share == pytest.approx(0.6)
    assert sum(s.share for s in stats) == pytest.approx(1.0)
    assert path.exists()


def test_top_ops_by_kind_all_modules_and_top() -> None:
    kinds = ts.top_ops(EVENTS, by_kind=True, top=None)
    assert [(s.name, s.calls, s.total_us) for s in kinds] == [
        ("other_op", 1, 500.0),
        ("fusion", 3, 80.0),
        ("convolution", 1, 20.0),
    ]
    assert len(ts.top_ops(EVENTS, top=1)) == 1
    assert ts.top_ops([], top=5) == []


def test_load_events_plain_list_and_json(tmp_path: Path) -> None:
    plain = tmp_path / "x.trace.json"
    plain.write_text(json.dumps(EVENTS), encoding="utf-8")
    assert len(ts.load_events(plain)) == len(EVENTS)
    assert ts.find_trace_file(tmp_path) == plain


def test_find_trace_file_prefers_perfetto_and_explains_absence(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no trace file"):
        ts.find_trace_file(tmp_path)
    _write(tmp_path / "p/r/host.trace.json.gz", [])
    perfetto = _write(tmp_path / "p/r/perfetto_trace.json.gz", [])
    assert ts.find_trace_file(tmp_path) == perfetto


HLO = "\n".join(
    [
        "ENTRY %main.1 (images.1: f32[8,32,32,3]) -> (f32[]) {",
        "  %images.1 = f32[8,32,32,3]{3,2,1,0} parameter(0)",
        "  %ynn_fusion.15 = f32[8,30,30,32]{3,2,1,0} fusion(%images.1, %w), kind=kCustom, "
        'calls=%c, metadata={op_name="jit(train_step)/jvp()/conv_general_dilated" '
        "stack_frame_id=50}",
        "  %wrapped_iota.1 = s32[8,30,30,32]{3,2,1,0} fusion(), kind=kLoop, calls=%w.1",
        "  %wrapped_reduce-window = (f32[8,15,15,32]{3,2,1,0}, s32[8,15,15,32]{3,2,1,0}) "
        "fusion(%a, %b), kind=kLoop",
        "  ROOT %tuple.9 = (f32[]) tuple(%x)",
        "}",
    ]
)


def test_hlo_op_info_and_table() -> None:
    ops = ts.hlo_op_info(HLO)
    assert ops["ynn_fusion.15"].shape == "f32[8,30,30,32]"
    assert ops["ynn_fusion.15"].source == "jit(train_step)/jvp()/conv_general_dilated"
    assert ops["wrapped_iota.1"].source == ""
    assert ops["wrapped_reduce-window"].shape == "(f32[8,15,15,32], s32[8,15,15,32])"
    assert ts.short_shape(ops["wrapped_reduce-window"].shape) == "(f32[8,15,15,32], +1 more)"
    assert ts.short_shape("f32[2]") == "f32[2]"
    assert ops["tuple.9"].shape == "(f32[])"
    stats = [
        ts.OpStat("ynn_fusion.15", 3, 1500.0, 0.75),
        ts.OpStat("wrapped_iota.1", 3, 500.0, 0.25),
    ]
    table = ts.format_table(stats, ops).splitlines()
    assert table[0].startswith("op") and "JAX source op" in table[0]
    assert "1.50" in table[1] and "75.0%" in table[1] and "jvp()/conv_general_dilated" in table[1]
    assert "(made by XLA)" in table[2]
    assert "source" not in ts.format_table(stats).splitlines()[0]


def test_op_kind() -> None:
    assert ts.op_kind("ynn_fusion.15") == "ynn_fusion"
    assert ts.op_kind("wrapped_reduce-window") == "wrapped_reduce-window"
    assert ts.op_kind("a.b.3") == "a.b"


TPU_EVENTS = [
    {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:TPU:0"}},
    {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "XLA Modules"}},
    {"ph": "M", "pid": 7, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
    {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "M", "pid": 9, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
    {"ph": "X", "pid": 7, "tid": 1, "ts": 100.0, "dur": 50.0, "name": "jit_train_step(3)"},
    {"ph": "X", "pid": 7, "tid": 1, "ts": 200.0, "dur": 50.0, "name": "jit_eval(4)"},
    {
        "ph": "X",
        "pid": 7,
        "tid": 2,
        "ts": 110.0,
        "dur": 30.0,
        "name": "fusion.3",
        "args": {"long_name": "fusion.3 = f32[8] fusion(...)"},
    },  # fmt: skip
    {"ph": "X", "pid": 7, "tid": 2, "ts": 120.0, "dur": 10.0, "name": "convolution.1"},
    {"ph": "X", "pid": 7, "tid": 2, "ts": 210.0, "dur": 40.0, "name": "fusion.9"},
    {"ph": "X", "pid": 9, "tid": 2, "ts": 110.0, "dur": 99.0, "name": "host_thing"},  # not a TPU
]


def test_tpu_ops_are_read_from_xprof_lines() -> None:
    ops = ts.device_op_events(TPU_EVENTS)
    assert {e["args"]["hlo_op"] for e in ops} == {"fusion.3", "convolution.1", "fusion.9"}
    stats = ts.top_ops(ops, module="train_step", top=None)
    assert [(s.name, s.calls, s.total_us) for s in stats] == [
        ("fusion.3", 1, 30.0),
        ("convolution.1", 1, 10.0),
    ]
    assert ops[0]["args"]["long_name"].startswith("fusion.3")  # the TPU's own args are kept


def test_cpu_events_pass_through_and_nothing_matched_is_empty() -> None:
    assert ts.device_op_events(EVENTS) == [e for e in EVENTS[2:7]]
    unknown = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 5.0, "name": "kernel"},
    ]
    assert ts.device_op_events(unknown) == []
    assert ts.top_ops(ts.device_op_events(unknown), module="train_step") == []


def test_profiler_noise_matches_the_jax_0_7_line_only() -> None:
    line = "E1201 03:14:02.965852 24424 python_hooks.cc:416] "
    line += "Can't import tensorflow.python.profiler.trace"
    assert any(p.search(line) for p in ts.PROFILER_NOISE)
    assert not any(p.search("Can't import tensorflow.python.ops") for p in ts.PROFILER_NOISE)
