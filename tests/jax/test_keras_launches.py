"""utils.jax.ladder_bench.keras_launches counts what Keras's JAX trainer launches per execution:
K one-step programs (Keras up to 3.15.1) or one scanned program (keras#23527, after 3.15.1).

Both behaviours are faked with the trainer's own hook (``trainer.jit``), so the count is tested
for the day the release ships, whatever Keras is installed; notebook 09 accepts either.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("keras")

import jax  # noqa: E402
from keras.src.backend.jax import trainer  # noqa: E402

from utils.jax import ladder_bench as lb  # noqa: E402


class FakeModel:
    """The few methods keras_launches calls; ``scanned``: one jitted program runs K steps."""

    def __init__(self, scanned: bool) -> None:
        self.scanned, self.optimizer, self.loss, self.k = scanned, "adam", "mse", 1

    def compile(self, *, optimizer: Any, loss: Any, steps_per_execution: int) -> None:
        self.k = steps_per_execution

    def make_train_function(self, force: bool = False) -> None:
        def step(w: Any) -> Any:
            return w + 1.0

        def k_steps(w: Any) -> Any:
            return jax.lax.fori_loop(0, self.k, lambda _, v: v + 1.0, w)

        program = trainer.jit(k_steps if self.scanned else step)
        if self.scanned:  # keras#23527: one launch per execution
            self.train_function = lambda w: program(w)
        else:  # up to 3.15.1: a host loop over the one-step program
            self.train_function = lambda w: [w := program(w) for _ in range(self.k)][-1]

    def fit(self, x: np.ndarray, y: np.ndarray, *, batch_size: int, epochs: int, verbose: int):
        for _ in range(len(x) // (batch_size * self.k)):  # one execution per K batches
            self.train_function(np.float32(0))


@pytest.mark.parametrize(("scanned", "launches"), [(False, 4), (True, 1)])
def test_launches_per_execution_for_either_keras(scanned: bool, launches: int) -> None:
    x = np.zeros((4 * 8, 2), np.float32)
    assert lb.keras_launches(FakeModel(scanned), x, x, 8, 4) == (1, launches)
