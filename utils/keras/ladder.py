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

:func:`build_rungs` returns the rungs; :func:`compare_rungs` measures them with
:func:`utils.compare.compare` (interleaved rounds, warm-up excluded, the peak at each rung's dtype
measured in every round). Every rung trains for the same number of calls, so from rung 2 on
every model has seen the same images when :meth:`Rung.accuracy` is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import keras
import numpy as np

from utils import compare as compare_mod
from utils import flops as flops_mod
from utils import mfu as mfu_mod

__all__ = [
    "Rung",
    "RungSpec",
    "build_model",
    "build_rungs",
    "changed_levers",
    "one_lever",
    "steps_per_call",
    "tiny_rung",
    "compare_rungs",
    "ladder_specs",
    "step_pairs",
    "report",
    "table",
]

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
    if batch < 1 or batch_scale < 1 or steps_per_execution < 1 or mxu_width < 1:
        raise ValueError("batch, batch_scale, steps_per_execution and mxu_width must be >= 1")
    seed = RungSpec("1 seed: fit(numpy)", "the seed's way", batch, learning_rate)
    static = replace(
        seed, name="2 static shapes", lever="drop the partial batch", drop_remainder=True
    )
    big = replace(
        static,
        name=f"3 batch x{batch_scale}, lr x{batch_scale}",
        lever=f"batch {batch} -> {batch * batch_scale}, learning rate scaled with it",
        batch=batch * batch_scale,
        learning_rate=learning_rate * batch_scale,
    )
    bf16 = replace(
        big, name="4 mixed_bfloat16", lever="policy mixed_bfloat16", policy="mixed_bfloat16"
    )
    spe = replace(
        bf16,
        name=f"5 steps_per_execution {steps_per_execution}",
        lever=f"steps_per_execution 1 -> {steps_per_execution}",
        steps_per_execution=steps_per_execution,
    )
    wide = replace(
        spe,
        name=f"6 width {mxu_width}",
        lever=f"every layer {mxu_width} wide (the MXU's edge)",
        widths=(mxu_width,) * 4,
    )
    return [seed, static, big, bf16, spe, wide]


def build_model(spec: RungSpec, num_classes: int = 10, *, seed: int = 0) -> keras.Model:
    """The seed CNN at ``spec``'s widths and policy, compiled the seed's way plus ``spec``."""
    keras.utils.set_random_seed(seed)
    c1, c2, c3, dense = spec.widths
    kw = {"dtype": spec.policy}
    model = keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            keras.layers.Conv2D(c1, (3, 3), activation="relu", **kw),
            keras.layers.MaxPooling2D((2, 2), **kw),
            keras.layers.Conv2D(c2, (3, 3), activation="relu", **kw),
            keras.layers.MaxPooling2D((2, 2), **kw),
            keras.layers.Conv2D(c3, (3, 3), activation="relu", **kw),
            keras.layers.Flatten(**kw),
            keras.layers.Dense(dense, activation="relu", **kw),
            keras.layers.Dense(num_classes, **kw),
        ],
        name=f"cnn_{c1}_{c2}_{c3}_{dense}",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(spec.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=spec.steps_per_execution,
    )
    return model


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

    @property
    def flops_per_call(self) -> float:
        return self.spec.flops_per_image * self.images

    def run(self) -> None:
        """One pass over the training arrays (one timed unit)."""
        self.model.fit(self.x, self.y, batch_size=self.spec.batch, epochs=1, verbose=0)

    def variant(self) -> compare_mod.Variant:
        if self.tiny:  # no model math to speak of: no MFU
            return compare_mod.Variant(self.spec.name, self.run, work=self.images)
        return compare_mod.Variant(
            self.spec.name,
            self.run,
            work=self.images,
            flops=self.flops_per_call,
            peak=self.spec.peak_key,
        )

    def accuracy(self, x_test: np.ndarray, y_test: np.ndarray) -> float:
        """Test accuracy of the model as trained so far."""
        logs = self.model.evaluate(
            x_test, y_test, batch_size=self.spec.batch, verbose=0, return_dict=True
        )
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
        xs, ys = (x[:keep], y[:keep]) if spec.drop_remainder else (x, y)
        rungs.append(Rung(spec, build_model(spec, num_classes, seed=seed), xs, ys))
    return rungs


def tiny_rung(spec: RungSpec, x: np.ndarray, y: np.ndarray, *, num_classes: int = 10) -> Rung:
    """``spec``'s way of training (batch, steps per call) with a model that has almost no work
    (Flatten -> Dense): its time per step is the host's overhead per step, fed the same way."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input(shape=(32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(num_classes)],
        name="tiny",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(spec.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=spec.steps_per_execution,
    )
    keep = len(x) // spec.batch * spec.batch if spec.drop_remainder else len(x)
    name = f"host overhead, steps_per_execution {spec.steps_per_execution}"
    return Rung(replace(spec, name=name), model, x[:keep], y[:keep], tiny=True)


def steps_per_call(rung: Rung) -> int:
    """Training steps in one call of ``rung.run()`` (the partial batch counts as a step)."""
    return -(-rung.images // rung.spec.batch)


LEVERS = (
    frozenset({"batch", "learning_rate"}),
    frozenset({"drop_remainder"}),
    frozenset({"policy"}),
    frozenset({"steps_per_execution"}),
    frozenset({"widths"}),
    frozenset({"learning_rate"}),
    frozenset({"batch"}),
)
"""The levers a rung may change, one at a time (a batch change may bring its learning rate)."""


def changed_levers(before: RungSpec, after: RungSpec) -> frozenset[str]:
    """The training fields that differ between two specs (names and lever texts aside)."""
    fields = ("batch", "learning_rate", "policy", "steps_per_execution", "widths", "drop_remainder")
    return frozenset(f for f in fields if getattr(before, f) != getattr(after, f))


def one_lever(before: RungSpec, after: RungSpec) -> bool:
    """Whether ``after`` is ``before`` with exactly one lever of :data:`LEVERS` changed."""
    return changed_levers(before, after) in LEVERS


def compare_rungs(
    rungs: Sequence[Rung],
    *,
    peaks: Mapping[str, Callable[[], float]],
    rounds: int = 3,
    warmup: int = 1,
    progress: Callable[[int, int], object] | None = None,
) -> compare_mod.Comparison:
    """All rungs interleaved, ``warmup`` untimed passes each, the peaks measured every round."""
    return compare_mod.compare(
        [r.variant() for r in rungs], rounds=rounds, warmup=warmup, peaks=peaks, progress=progress
    )


def step_pairs(rungs: Sequence[Rung], course: str | None = None) -> list[tuple[str, str]]:
    """(rung, the rung before it) for every step up the ladder, and (course, seed) if given."""
    names = [r.spec.name for r in rungs]
    pairs = list(zip(names[1:], names[:-1], strict=True))
    if course is not None and (course, names[0]) not in pairs and course != names[0]:
        pairs.append((course, names[0]))
    return pairs


def table(
    result: compare_mod.Comparison, rungs: Sequence[Rung], accuracy: Mapping[str, float]
) -> str:
    """images/s (median, IQR), MFU at the rung's dtype, test accuracy, images per pass."""
    head = f"{'rung':<28}{'images/s':>10}{'IQR':>19}{'MFU':>7}{'accuracy':>10}{'images':>8}"
    lines = [head]
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
