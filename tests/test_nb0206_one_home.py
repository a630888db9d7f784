"""Notebooks 02, 03, 04 and 06 take shared jobs from one home, and say the same about them.

Framework-free: reads the stored notebooks as JSON.

* The peak MFU divides by: every notebook calls ``utils.mfu`` (``choose_peaks`` or ``ceiling``),
  none writes the choice out (a published figure, or a matmul per dtype, by hand).
* The ceiling is described once, by ``mfu.ceiling_label``, printed beside 02's and 03's MFU.
* Adam's learning rate follows the global batch by notebook 09's square-root rule, from the seed's
  1e-3 at its batch of 128, in 02 (its recipe too), 03 and 04.
* 02's steady epoch is ``utils.keras.timing.steady``'s, not a median of its own.
"""

from __future__ import annotations

import re

import pytest

from tests.nbcells import NOTEBOOKS, cells, text

NB = {n: next(NOTEBOOKS.glob(f"{n}_*.ipynb")) for n in ("02", "03", "04", "06")}
SQRT_RULE = re.compile(r"1e-3 \* \(global_batch / 128\) \*\* 0\.5")


def code(nb: str) -> str:
    return "\n".join(text(c) for c in cells(NB[nb]) if c["cell_type"] == "code")


def prose(nb: str) -> str:
    return "\n".join(text(c) for c in cells(NB[nb]) if c["cell_type"] == "markdown")


def peaks_written_out(source: str) -> list[str]:
    """What in ``source`` chooses a peak by hand instead of calling ``utils.mfu``."""
    found = [s for s in ("peak_flops(", "PUBLISHED_PEAK_TFLOPS", "TPU_CHIPS") if s in source]
    found += re.findall(r"matmul_peak\([^)]*\"(?:float32|bfloat16)\"", source)  # one per dtype
    if "mfu.choose_peaks(" not in source and "mfu.ceiling(" not in source:
        found.append("no call of mfu.choose_peaks or mfu.ceiling")
    return found


@pytest.mark.parametrize("nb", sorted(NB))
def test_the_peak_comes_from_mfu(nb: str) -> None:
    assert peaks_written_out(code(nb)) == []


def test_a_peak_written_out_by_hand_is_caught() -> None:
    """Planted: 02's old cell, the published figure and two measured dtypes written out."""
    old = (
        "if rt.accelerator == 'tpu':\n    published = mfu.peak_flops(tpu_generation=g, chips=8)\n"
        'else:\n    peaks = {"float32": jax_peak.matmul_peak(1024, "float32")}\n'
    )
    assert len(peaks_written_out(old)) == 3


@pytest.mark.parametrize("nb", ["02", "03"])
def test_the_mfu_line_names_its_ceiling_in_mfus_words(nb: str) -> None:
    source = code(nb)
    assert "mfu.ceiling_label(tpu, chips)" in source
    assert "float32 1024×1024 matmul" not in prose(nb)  # 03's old, other description


@pytest.mark.parametrize("nb", ["02", "03", "04"])
def test_adams_rate_follows_the_square_root_rule(nb: str) -> None:
    source = code(nb)
    assert len(SQRT_RULE.findall(source)) == (2 if nb == "02" else 1)  # 02: its recipe as well
    fixed = r"(?:[Aa]dam\((?:learning_rate=)?1e-3\))|(?:^(?i:learning_rate) = 1e-3\s*(?:#|$))"
    assert not re.search(fixed, source, flags=re.MULTILINE), "a rate that ignores the batch"
    assert "keeps the seed's 1e-3" not in prose(nb)


def test_02_takes_its_steady_epoch_from_timing() -> None:
    source = code("02")
    assert "timing.steady(timer.train_s)" in source and "np.median(" not in source


def test_02_evaluates_every_test_image_its_devices_can_split() -> None:
    """The training arrays are cut to whole global batches, the test arrays only to the devices."""
    source = code("02")
    assert "drop_remainder(cifar.x_test, cifar.y_test, batch=n_devices)" in source
    assert "drop_remainder(cifar.x_test, cifar.y_test, batch=global_batch)" not in source
    stored = next(
        "".join(o.get("text", "")) for c in cells(NB["02"]) for o in c.get("outputs", [])
        if "test images evaluated" in "".join(o.get("text", ""))
    )  # fmt: skip
    evaluated, total = re.search(r"([\d,]+) of ([\d,]+) test images evaluated", stored).groups()
    assert evaluated == total, stored


def test_04_divides_both_comparisons_by_one_ceiling() -> None:
    """Section 4's and section 5's MFU share one ceiling (float32's MFU was 33 % in one, 17 % in
    the other when section 4 passed only float32's peak)."""
    calls = re.findall(r"compare\.compare\([^)]*\)", code("04"))
    assert len(calls) == 2 and all("peaks=peaks)" in c for c in calls), calls
