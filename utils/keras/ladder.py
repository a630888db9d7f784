"""The training-speed ladder: the seed's CNN trained six ways, each rung changing one lever.

Backend-agnostic Keras 3 (notebook 09 runs it on JAX, the free TPUs' stack; ``make bench`` too).
The rungs, each from the one before it:

1. **seed**: ``fit`` on numpy arrays with the seed's defaults (batch 128, Adam 1e-3); the last
   partial batch has its own shape.
2. **static shapes**: the arrays cut to whole batches (the arrays' ``drop_remainder=True``): one
   shape, one compiled program. Every later rung trains exactly these images.
3. **larger batch**: ``batch_scale`` x the batch with the learning rate scaled by the same factor
   (the linear scaling rule, Goyal et al. 2017, arXiv:1706.02677), so the accuracy column says
   whether the rule held.
4. **bfloat16**: the ``mixed_bfloat16`` policy (bf16 math, float32 weights).
5. **steps_per_execution**: ``N`` steps per call from Keras' loop (under JAX in Keras 3.15 a
   Python loop over a one-step jitted function: it saves per-step callback and logging work).
6. **MXU-shaped width**: every layer ``mxu_width`` wide (128: a v5e MXU's edge), so its matmuls
   fill the matrix unit.

:func:`build_rungs` returns the rungs; :func:`utils.compare.compare` measures their
:meth:`Rung.variant` (interleaved rounds, warm-up excluded, the peak at each rung's dtype measured
in every round). Every rung trains for the same number of calls, so from rung 2 on
every model has seen the same images when :meth:`Rung.accuracy` is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import keras
import numpy as np

from utils import compare as compare_mod
from utils import flops as flops_mod
from utils import mfu as mfu_mod

SEED_WIDTHS = (32, 64, 64, 64)
"""The seed CNN's conv channels and hidden dense units."""


@dataclass(frozen=True)
class RungSpec:
    """How one rung trains. ``lever`` says what changed from the rung before."""

    name: str
    lever: str
    batch: int
    learning_rate: float = 1e-3
    policy: str = "float32"
    steps_per_execution: int = 1
    widths: tuple[int, int, int, int] = SEED_WIDTHS
    drop_remainder: bool = False

    @property
    def peak_key(self) -> str:
        """The dtype its math runs in: the peak MFU divides by."""
        return "bfloat16" if "bfloat16" in self.policy else "float32"

    @property
    def flops_per_image(self) -> float:
        """Training FLOPs per image (forward + backward, :func:`utils.mfu.training_flops`)."""
        c1, c2, c3, dense = self.widths
        costs = flops_mod.seed_cnn_costs(1, channels=(c1, c2, c3), dense=dense)
        return float(mfu_mod.training_flops(costs))


def ladder_specs(
    batch: int = 128,
    *,
    learning_rate: float = 1e-3,
    batch_scale: int = 4,
    steps_per_execution: int = 4,
    mxu_width: int = 128,
) -> list[RungSpec]:
    """The six rungs; each is the previous one with one field changed (``lever`` names it)."""
    n, spe, w = batch_scale, steps_per_execution, mxu_width
    specs = [RungSpec("1 seed: fit(numpy)", "the seed's way", batch, learning_rate)]
    for name, lever, change in (
        ("2 static shapes", "drop the partial batch", {"drop_remainder": True}),
        (
            f"3 batch x{n}, lr x{n}",
            f"batch {batch} -> {batch * n}, learning rate scaled with it",
            {"batch": batch * n, "learning_rate": learning_rate * n},
        ),
        ("4 mixed_bfloat16", "policy mixed_bfloat16", {"policy": "mixed_bfloat16"}),
        (
            f"5 steps_per_execution {spe}",
            f"steps_per_execution 1 -> {spe}",
            {"steps_per_execution": spe},
        ),
        (f"6 width {w}", f"every layer {w} wide (the MXU's edge)", {"widths": (w,) * 4}),
    ):
        specs.append(replace(specs[-1], name=name, lever=lever, **change))
    return specs


def _compiled(model: keras.Model, spec: RungSpec) -> keras.Model:
    model.compile(
        optimizer=keras.optimizers.Adam(spec.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=spec.steps_per_execution,
    )
    return model


def build_model(spec: RungSpec, num_classes: int = 10, *, seed: int = 0) -> keras.Model:
    """The seed CNN at ``spec``'s widths and policy, compiled the seed's way plus ``spec``."""
    keras.utils.set_random_seed(seed)
    c1, c2, c3, dense = spec.widths
    kw = {"dtype": spec.policy}
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            layers.Conv2D(c1, (3, 3), activation="relu", **kw),
            layers.MaxPooling2D((2, 2), **kw),
            layers.Conv2D(c2, (3, 3), activation="relu", **kw),
            layers.MaxPooling2D((2, 2), **kw),
            layers.Conv2D(c3, (3, 3), activation="relu", **kw),
            layers.Flatten(**kw),
            layers.Dense(dense, activation="relu", **kw),
            layers.Dense(num_classes, **kw),
        ],
        name=f"cnn_{c1}_{c2}_{c3}_{dense}",
    )
    return _compiled(model, spec)


@dataclass
class Rung:
    """One rung, ready to run: its model and the arrays one call trains on (one pass)."""

    spec: RungSpec
    model: keras.Model
    x: np.ndarray
    y: np.ndarray
    tiny: bool = False

    @property
    def images(self) -> int:
        """Images trained per call."""
        return len(self.x)

    def run(self) -> None:
        """One pass over the training arrays (one timed unit)."""
        self.model.fit(self.x, self.y, batch_size=self.spec.batch, epochs=1, verbose=0)

    def variant(self) -> compare_mod.Variant:
        """The rung for :func:`utils.compare.compare` (a tiny rung has no model math: no MFU)."""
        flops = self.spec.flops_per_image * self.images
        flops, peak = (None, None) if self.tiny else (flops, self.spec.peak_key)
        return compare_mod.Variant(self.spec.name, self.run, self.images, flops, peak)

    def accuracy(self, x_test: np.ndarray, y_test: np.ndarray) -> float:
        """Test accuracy of the model as trained so far."""
        logs = self.model.evaluate(x_test, y_test, self.spec.batch, verbose=0, return_dict=True)
        return float(logs["accuracy"])


def build_rungs(
    specs: Sequence[RungSpec], x: np.ndarray, y: np.ndarray, *, num_classes: int = 10, seed: int = 0
) -> list[Rung]:
    """A model per spec. Rungs with ``drop_remainder`` train on the arrays cut to a multiple of
    the largest batch of those rungs, so all of them see exactly the same images.

    Raises:
        ValueError: fewer images than the largest batch, or arrays of different lengths.
    """
    if len(x) != len(y):
        raise ValueError(f"x and y have different lengths: {len(x)}, {len(y)}")
    cut_batch = max((s.batch for s in specs if s.drop_remainder), default=1)
    keep = len(x) // cut_batch * cut_batch
    if keep == 0:
        raise ValueError(f"{len(x)} images make no full batch of {cut_batch}")
    rungs = []
    for spec in specs:
        n = keep if spec.drop_remainder else len(x)
        rungs.append(Rung(spec, build_model(spec, num_classes, seed=seed), x[:n], y[:n]))
    return rungs


def tiny_rung(spec: RungSpec, x: np.ndarray, y: np.ndarray, *, num_classes: int = 10) -> Rung:
    """``spec``'s way of training (batch, steps per call) with a model that has almost no work
    (Flatten -> Dense): its time per step is the host's overhead per step, fed the same way."""
    keras.utils.set_random_seed(0)
    layers = [
        keras.Input(shape=(32, 32, 3)),
        keras.layers.Flatten(),
        keras.layers.Dense(num_classes),
    ]
    model = _compiled(keras.Sequential(layers, name="tiny"), spec)
    keep = len(x) // spec.batch * spec.batch if spec.drop_remainder else len(x)
    name = f"host overhead, steps_per_execution {spec.steps_per_execution}"
    return Rung(replace(spec, name=name), model, x[:keep], y[:keep], tiny=True)


def steps_per_call(rung: Rung) -> int:
    """Training steps in one call of ``rung.run()`` (the partial batch counts as a step)."""
    return -(-rung.images // rung.spec.batch)


def changed_levers(before: RungSpec, after: RungSpec) -> frozenset[str]:
    """The training fields that differ between two specs (names and lever texts aside)."""
    fields = ("batch", "learning_rate", "policy", "steps_per_execution", "widths", "drop_remainder")
    return frozenset(f for f in fields if getattr(before, f) != getattr(after, f))


def one_lever(before: RungSpec, after: RungSpec) -> bool:
    """Whether ``after`` is ``before`` with exactly one lever changed (a batch change may bring
    its learning rate)."""
    changed = changed_levers(before, after)
    return len(changed) == 1 or changed == {"batch", "learning_rate"}


def step_pairs(rungs: Sequence[Rung], course: str | None = None) -> list[tuple[str, str]]:
    """(rung, the rung before it) for every step up the ladder, and (course, seed) if given."""
    names = [r.spec.name for r in rungs]
    pairs = list(zip(names[1:], names[:-1], strict=True))
    if course is not None and course != names[0] and (course, names[0]) not in pairs:
        pairs.append((course, names[0]))
    return pairs


def table(
    result: compare_mod.Comparison, rungs: Sequence[Rung], accuracy: Mapping[str, float]
) -> str:
    """images/s (median, IQR), MFU at the rung's dtype, test accuracy, images per pass."""
    lines = [f"{'rung':<28}{'images/s':>10}{'IQR':>19}{'MFU':>7}{'accuracy':>10}{'images':>8}"]
    for r in rungs:
        name = r.spec.name
        lo, hi = result.rate_spread(name)
        lines.append(
            f"{name:<28}{result.rate(name):>10,.0f}{lo:>9,.0f}-{hi:<9,.0f}"
            f"{result.mfu(name):>7.1%}{accuracy[name]:>10.3f}{r.images:>8}"
        )
    return "\n".join(lines)


def report(
    result: compare_mod.Comparison, rungs: Sequence[Rung], x_test: np.ndarray, y_test: np.ndarray
) -> str:
    """The ladder's table (with each rung's test accuracy) and one verdict per step, as text."""
    accuracy = {r.spec.name: r.accuracy(x_test, y_test) for r in rungs}
    verdicts = [result.verdict(a, b).sentence() for a, b in step_pairs(rungs)]
    return "\n".join([table(result, rungs, accuracy), *verdicts])
