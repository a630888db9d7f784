"""Stored outputs that nbval compares must not depend on the machine (issue 12, part 1).

A compared output (a code cell without ``# NBVAL_IGNORE_OUTPUT`` on its first line) that names this
machine's CPU model or an instruction-set feature differs on the next CI machine; native start-up
banners (oneDNN, cuInit) are noise that must not be stored at all. Covers notebooks 04, 05 and 07
(extend ``NOTEBOOKS`` as the other notebooks pass).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from utils import runtime

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = ["04_keras_cifar10_tpu", "05_custom_training_loop", "07_tf_data_performance"]
BANNERS = ("cuInit", "oneDNN custom operations", "absl::InitializeLog")


def _outputs(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        elif "data" in out:
            parts.append("".join(out["data"].get("text/plain", "")))
        elif out.get("output_type") == "error":
            parts.append(out.get("evalue", ""))
    return "".join(parts)


def _machine_words() -> list[str]:
    rt = runtime.detect()
    # "avx", "fma", "bf16" are too generic to search for in text
    words = [f for f in runtime.NOTABLE_CPU_FLAGS if len(f) > 4]
    if rt.cpu_model and rt.cpu_model.strip():
        words.append(rt.cpu_model.strip())
    return words


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_compared_outputs_hold_nothing_machine_specific(name):
    cells = json.loads((NOTEBOOK_DIR / f"{name}.ipynb").read_text())["cells"]
    words = _machine_words()
    problems = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        text = _outputs(cell)
        for banner in BANNERS:  # never stored, ignored cell or not
            if banner in text:
                problems.append(f"cell {i}: stored output contains {banner!r}")
        comments = [
            line.strip().lstrip("#").strip()
            for line in "".join(cell["source"]).splitlines()
            if line.strip().startswith("#")
        ]
        if "NBVAL_IGNORE_OUTPUT" in comments:  # as nbval reads it: a comment line anywhere
            continue
        for word in words:
            if re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text):
                problems.append(f"cell {i}: compared output names the machine's {word!r}")
    assert not problems, "\n".join(problems)
