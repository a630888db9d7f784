"""09's scanned rungs (rungs 5-6, ``utils.jax.ladder_bench``): one ``run()`` trains every image it
counts, once, and leaves the trained variables in the model.

The rate a rung reports is ``images / seconds``, so a run that trains fewer chunks than its
``images`` claims reports a faster rate than the truth. Keras on JAX runs in a child process
(this one's Keras may run on TensorFlow): tiny models, the float32 and uint8 rungs, for
several image counts; the optimizer's step counter, written back by the scanned trainer, says
how many steps ran. Nothing asserts a speed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from utils import fresh_process

pytest.importorskip("jax")
pytest.importorskip("keras")

IMAGES = (32, 69)  # exactly 1 chunk; 2 chunks and a remainder
BATCH, STEPS = 8, 4


def rungs(images: int) -> dict[str, Any]:
    """The child's work: rungs 5-6 on ``images`` images, each run twice."""
    import numpy as np

    from utils.jax import ladder_bench as lb
    from utils.keras import ladder

    rng = np.random.default_rng(0)
    x8 = rng.integers(0, 256, (images, 32, 32, 3), dtype=np.uint8)
    y = (np.arange(images) % 10).astype(np.int32)
    out = {}
    for spec in ladder.ladder_specs(BATCH, knee=BATCH, steps=STEPS)[4:]:
        rung = lb.build_rung(spec, x8.astype("float32") / 255, x8, y, tiny=True)
        before = [np.array(w) for w in rung.model.get_weights()]
        counts = []
        for _ in range(2):
            rung.run()
            counts.append(int(rung.model.optimizer.iterations.numpy()))
        after = rung.model.get_weights()
        moved = any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
        out[spec.name] = {
            "images": rung.images,
            "work": rung.variant().work,
            "steps_after_each_run": counts,
            "weights_moved": moved,
        }
    return out


@pytest.fixture(scope="module")
def trained() -> dict[int, dict[str, Any]]:
    env = {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    done = fresh_process.run_python([__file__], env=env, timeout_s=600)
    result = fresh_process.result_of(done.stdout, context=done.stdout + done.stderr)
    return {int(k): v for k, v in result.items()}


@pytest.mark.parametrize("images", IMAGES)
def test_a_scanned_run_trains_every_image_it_counts(
    trained: dict[int, dict[str, Any]], images: int
) -> None:
    whole = images // (BATCH * STEPS) * BATCH * STEPS  # whole chunks of STEPS batches only
    assert set(trained[images]) == {"5 scan 4 steps", "6 uint8 input"}
    for name, rung in trained[images].items():
        assert rung["images"] == rung["work"] == whole, name
        steps = whole // BATCH
        assert rung["steps_after_each_run"] == [steps, 2 * steps], name
        assert rung["weights_moved"], f"{name}: the model does not hold the trained weights"


if __name__ == "__main__":  # the child
    print(fresh_process.RESULT_PREFIX + json.dumps({n: rungs(n) for n in IMAGES}))
    sys.stdout.flush()
