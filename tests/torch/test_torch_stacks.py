"""utils.torch.stacks: the torch/torch_xla match and the TorchTPU line (framework-free)."""

from __future__ import annotations

import sys

import pytest

from utils.torch import stacks


def test_matching_pairs_pass() -> None:
    assert stacks.torch_xla_problem({"torch": "2.9.0+cu128", "torch_xla": "2.9.0"}) is None
    assert stacks.torch_xla_problem({"torch": "2.8.0+cpu", "torch_xla": "2.8.0"}) is None
    assert stacks.torch_xla_problem({"torch": "2.11.0", "torch_xla": None}) is None  # no torch_xla


def test_a_mismatch_is_named_with_its_fix() -> None:
    text = stacks.torch_xla_problem({"torch": "2.10.0", "torch_xla": "2.9.0"})
    assert "torch 2.10.0 does not match torch_xla 2.9.0" in text
    assert "pip install torch==2.9.0 torch_xla==2.9.0" in text and "restart" in text
    assert "pytorch/xla#8292" in text
    with pytest.raises(stacks.StackMismatchError, match="does not match"):
        stacks.check_torch_xla({"torch": "2.10.0", "torch_xla": "2.9.0"})


def test_torch_tpu_upgrading_torch_is_explained() -> None:
    text = stacks.torch_xla_problem({"torch": "2.12.0", "torch_xla": "2.9.0", "torch_tpu": "0.2.0"})
    assert "torch_tpu 0.2.0 pulled in torch 2.12.0" in text


def test_torch_xla_without_torch() -> None:
    assert "torch is not" in stacks.torch_xla_problem({"torch": None, "torch_xla": "2.9.0"})


def test_installed_reads_metadata_here() -> None:
    found = stacks.installed()
    assert found["torch"] and found["torch"].startswith("2.9")
    assert found["torch_xla"] == "2.9.0"
    assert stacks.torch_xla_problem() is None  # the course's own environment matches


def test_torch_tpu_line_for_each_case() -> None:
    none = stacks.torch_tpu_line({"torch_tpu": None}, on_tpu=False)
    assert "not installed" in none and "\n" not in none
    no_tpu = stacks.torch_tpu_line({"torch_tpu": "0.2.0", "torch": "2.12.0"}, on_tpu=False)
    assert "no TPU" in no_tpu and "no CPU or simulated-device mode" in no_tpu
    old_torch = stacks.torch_tpu_line({"torch_tpu": "0.2.0", "torch": "2.9.0"}, on_tpu=True)
    assert "needs torch 2.11-2.15" in old_torch
    new = {"torch_tpu": "0.2.0", "torch": "2.12.0"}
    held = stacks.torch_tpu_line(new, on_tpu=True, tpu_held=True)
    assert "holds the TPU" in held
    ready = stacks.torch_tpu_line({"torch_tpu": "0.2.0", "torch": "2.12.0"}, on_tpu=True)
    assert ready.startswith("ready:")
    for line in (none, no_tpu, old_torch, held):
        assert not line.startswith("ready:")


def test_stacks_does_not_import_torch() -> None:
    from utils.fresh_process import run_python_json

    code = (
        "import json, sys; from utils.torch import stacks; stacks.torch_xla_problem(); "
        "stacks.torch_tpu_line(on_tpu=False); "
        "loaded = sorted(m for m in ('torch', 'torch_xla') if m in sys.modules); "
        "print('RESULT ' + json.dumps(loaded))"
    )
    assert run_python_json(code, timeout_s=120) == []
    assert sys.version_info >= (3, 10)
