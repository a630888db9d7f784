"""The training-speed ladder: the seed's CNN trained six ways, each rung changing one lever.

Backend-agnostic Keras 3 (the scanned loop of rungs 5-6 and the Grain feed are JAX: they live in
:mod:`utils.jax.ladder_bench`). The rungs, each from the one before it:

1. **seed**: ``fit`` on float32 numpy arrays, batch 128, Adam 1e-3; a ragged last batch.
2. **static shapes**: whole batches only (``drop_remainder``): one shape, one program.
3. **batch at the knee**: the per-chip batch where doubling stops paying, Adam's learning rate
   scaled by the square root of the batch ratio (Malladi et al. 2022).
4. **bfloat16**: the ``mixed_bfloat16`` policy.
5. **K steps per program**: a ``jax.lax.scan`` over K batches in one jitted call.
6. **uint8 input**: the batches sent as uint8 and normalised on the device (4x fewer bytes).

The input is checked beside the ladder, not as a rung: Grain's delivered rate, timed alone, against
the rate the step needs (:func:`v5e_ladder`'s last lever).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import keras
import numpy as np

from utils import compare as compare_mod
from utils import flops as flops_mod
from utils import mfu as mfu_mod
from utils import roofline
from utils.keras import models

IMAGE_BYTES = 32 * 32 * 3  # one CIFAR-10 image as uint8
LEVERS = ("drop_remainder", "batch", "learning_rate", "policy", "steps", "input_dtype")


@dataclass(frozen=True)
class RungSpec:
    """How one rung trains. ``lever`` says what changed from the rung before."""

    name: str
    lever: str
    batch: int
    learning_rate: float = 1e-3
    policy: str = "float32"
    drop_remainder: bool = False
    steps: int = 1  # training steps in one device program (1: Keras' fit)
    input_dtype: str = "float32"

    @property
    def peak_key(self) -> str:
        return "bfloat16" if "bfloat16" in self.policy else "float32"

    @property
    def flops_per_image(self) -> float:
        return float(mfu_mod.training_flops(flops_mod.seed_cnn_costs(1)))

    @property
    def bytes_per_step(self) -> int:
        """Image bytes sent to the device per training step."""
        return self.batch * IMAGE_BYTES * np.dtype(self.input_dtype).itemsize


def sqrt_scaled_lr(learning_rate: float, batch: int, base_batch: int) -> float:
    """Adam's learning rate for ``batch``: the square-root rule (Malladi et al. 2022)."""
    return learning_rate * (batch / base_batch) ** 0.5


def ladder_specs(batch: int = 128, knee: int = 128, steps: int = 4) -> list[RungSpec]:
    """The six rungs; each is the previous one with one lever changed."""
    specs = [RungSpec("1 seed fit", "the seed's way", batch)]
    lr = sqrt_scaled_lr(specs[0].learning_rate, knee, batch)
    for name, lever, change in (
        ("2 static shapes", "whole batches only", {"drop_remainder": True}),
        (
            f"3 batch {knee}",
            f"batch {batch} -> {knee}, lr x{knee / batch:g}**0.5",
            {"batch": knee, "learning_rate": lr},
        ),
        ("4 mixed_bfloat16", "policy mixed_bfloat16", {"policy": "mixed_bfloat16"}),
        (f"5 scan {steps} steps", f"{steps} steps per device program", {"steps": steps}),
        ("6 uint8 input", "uint8 sent, normalised on the device", {"input_dtype": "uint8"}),
    ):
        specs.append(replace(specs[-1], name=name, lever=lever, **change))
    return specs


def changed_levers(before: RungSpec, after: RungSpec) -> frozenset[str]:
    """The training fields that differ between two specs (names and lever texts aside)."""
    return frozenset(f for f in LEVERS if getattr(before, f) != getattr(after, f))


def one_lever(before: RungSpec, after: RungSpec) -> bool:
    """Exactly one lever changed (a batch change may bring its learning rate)."""
    changed = changed_levers(before, after)
    return len(changed) == 1 or changed == {"batch", "learning_rate"}


def build_model(spec: RungSpec, num_classes: int = 10, *, seed: int = 0, tiny: bool = False):
    """The seed CNN at ``spec``'s policy, compiled the seed's way with ``spec``'s learning rate
    (``tiny``: Flatten -> Dense instead, a model with almost no work)."""
    keras.utils.set_random_seed(seed)
    if tiny:
        kw = {"dtype": spec.policy}
        model = keras.Sequential(
            [keras.Input(shape=(32, 32, 3)), keras.layers.Flatten(**kw)]
            + [keras.layers.Dense(num_classes, **kw)],
            name="tiny",
        )
    else:
        model = models.seed_cnn(num_classes, dtype=spec.policy)
    model.compile(
        optimizer=keras.optimizers.Adam(spec.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


@dataclass
class Rung:
    """One rung, ready to run: ``run()`` trains one pass over ``images`` images."""

    spec: RungSpec
    model: keras.Model
    run: Callable[[], object]
    images: int
    tiny: bool = False

    def variant(self) -> compare_mod.Variant:
        """For :func:`utils.compare.compare` (a tiny rung has no model math: no MFU)."""
        if self.tiny:
            return compare_mod.Variant(self.spec.name, self.run, self.images)
        flops = self.spec.flops_per_image * self.images
        return compare_mod.Variant(self.spec.name, self.run, self.images, flops, self.spec.peak_key)

    def accuracy(self, x_test: np.ndarray, y_test: np.ndarray) -> float:
        """Test accuracy of the model as trained so far."""
        logs = self.model.evaluate(x_test, y_test, 256, verbose=0, return_dict=True)
        return float(logs["accuracy"])


def fit_rung(spec: RungSpec, x, y, *, seed: int = 0, tiny: bool = False) -> Rung:
    """A rung that trains with ``model.fit`` (rungs 1-4); whole batches when ``drop_remainder``."""
    n = len(x) // spec.batch * spec.batch if spec.drop_remainder else len(x)
    model = build_model(spec, seed=seed, tiny=tiny)

    def run() -> None:
        model.fit(x[:n], y[:n], batch_size=spec.batch, epochs=1, verbose=0)

    return Rung(spec, model, run, n, tiny)


def knee(result: compare_mod.Comparison, names: Mapping[int, str]) -> int:
    """The smallest batch whose double is not *faster* (``names``: batch -> variant name)."""
    batches = sorted(names)
    for small, big in zip(batches, batches[1:], strict=False):
        if result.verdict(names[big], names[small]).state != compare_mod.FASTER:
            return small
    return batches[-1]


def step_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """(rung, the rung before it) for every step up the ladder, then (last, first)."""
    return [*zip(names[1:], names[:-1], strict=True), (names[-1], names[0])]


def table(result: compare_mod.Comparison, names: Sequence[str], accuracy: Mapping[str, float]):
    """Per rung: images/s, the verdict against the rung before (paired ratio, state, interval),
    MFU, accuracy; then what "paired" means."""
    lines = [
        f"{'rung':<18}{'images/s':>9}  {'vs the rung before':<26}{'interval':>12}"
        f"{'MFU':>7}{'accuracy':>10}"
    ]
    for before, name in zip([None, *names], names, strict=False):
        v = result.verdict(name, before) if before else None
        state, interval = (
            (f"{v.ratio:.2f}x {v.state}", f"{v.low:.2f}-{v.high:.2f}x") if v else ("-", "")
        )
        lines.append(
            f"{name:<18}{result.rate(name):>9,.0f}  {state:<26}{interval:>12}"
            f"{result.mfu(name):>7.1%}{accuracy[name]:>10.3f}"
        )
    return "\n".join([*lines, compare_mod.PAIRED_NOTE])


def v5e_step(batch: int, loop_s: float, copy_bps: float, machine: roofline.Machine):
    """The seed CNN's float32 step at ``batch`` on ``machine``: host part = ``fit``'s loop per
    step (measured) + copying the float32 batch at ``copy_bps`` (measured)."""
    host = loop_s + batch * IMAGE_BYTES * 4 / copy_bps
    costs = flops_mod.seed_cnn_costs(batch)
    return roofline.predict_step(costs, machine, batch=batch, host_s=host)


def predicted_knee(steps: Mapping[int, roofline.StepPrediction], bar: float = 0.05) -> int:
    """The smallest batch whose double is not predicted faster by more than ``bar``."""
    batches = sorted(steps)
    for small, big in zip(batches, batches[1:], strict=False):
        if roofline.lever("batch", steps[small], steps[big]).gain <= 1 + bar:
            return small
    return batches[-1]


def v5e_sweep(
    loop_s: float, copy_bps: float, *, batches: Sequence[int],
    machine: roofline.Machine = roofline.PUBLISHED["v5e"],
) -> tuple[int, list[roofline.Lever]]:  # fmt: skip
    """(the knee on ``machine``, each doubling of ``batches`` as a lever): the seed's float32
    step at each batch, predicted from fit's host loop ``loop_s`` and the copy rate ``copy_bps``,
    both measured here."""
    steps = {b: v5e_step(b, loop_s, copy_bps, machine) for b in sorted(batches)}
    pairs = zip(steps, list(steps)[1:], strict=False)
    doublings = [roofline.lever(f"batch {b} vs {a}", steps[a], steps[b]) for a, b in pairs]
    return predicted_knee(steps), doublings


def v5e_ladder(
    loop_s: float, copy_bps: float, delivered: float, *, batch: int, batches: Sequence[int],
    steps: int, machine: roofline.Machine = roofline.PUBLISHED["v5e"],
) -> tuple[int, list[roofline.Lever]]:  # fmt: skip
    """(the knee on ``machine``, each rung 2-6 as a lever from the rung before, then "input": the
    top rung fed at ``delivered``), by the course's one predictor: ``loop_s`` fit's host loop per
    step and ``copy_bps`` the host's copy rate, both measured here; ``delivered`` the input
    pipeline's images/s, measured alone."""
    knee, _ = v5e_sweep(loop_s, copy_bps, batches=batches, machine=machine)
    seed, at_knee = (v5e_step(b, loop_s, copy_bps, machine) for b in (batch, knee))
    bf16 = roofline.in_bfloat16(at_knee)
    copy_s = knee * IMAGE_BYTES * 4 / copy_bps  # paid per step, not per call
    scanned = roofline.k_steps_per_call(bf16, steps, per_step_s=copy_s)
    uint8 = roofline.with_host(scanned, scanned.host_s - copy_s * 3 / 4)
    grain = roofline.fed_at(uint8, delivered)
    rungs = [seed, seed, at_knee, bf16, scanned, uint8, grain]  # static shapes: per step, equal
    names = ["static shapes", f"batch {knee}", "bf16", f"{steps} steps/call", "uint8", "input"]
    pairs = zip(names, rungs, rungs[1:], strict=False)
    return knee, [roofline.lever(n, a, b) for n, a, b in pairs]


def lever_alone(
    loop_s: float, copy_bps: float, *, batch: int, steps: int,
    machine: roofline.Machine = roofline.PUBLISHED["v5e"],
) -> dict[str, roofline.Lever]:  # fmt: skip
    """Each host- or device-side lever applied alone to the seed's step (not one after another)."""
    seed = v5e_step(batch, loop_s, copy_bps, machine)
    copy_s = batch * IMAGE_BYTES * 4 / copy_bps
    after = {
        "batch x2": v5e_step(2 * batch, loop_s, copy_bps, machine),
        "bf16": roofline.in_bfloat16(seed),
        f"{steps} steps/call": roofline.k_steps_per_call(seed, steps, per_step_s=copy_s),
        "uint8": roofline.with_host(seed, seed.host_s - copy_s * 3 / 4),
    }
    return {name: roofline.lever(name, seed, p) for name, p in after.items()}


def plot_lever_sweep(loops_s: Sequence[float], measured_s: float, **lever_kw):
    """Each lever's predicted gain on one v5e chip, alone on the seed's step
    (:func:`lever_alone`), against fit's host loop per step (log scale); the loop measured here
    is marked."""
    import matplotlib.pyplot as plt

    gains: dict[str, list[float]] = {}
    for loop in loops_s:
        for name, lev in lever_alone(loop, **lever_kw).items():
            gains.setdefault(name, []).append(lev.gain)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for name, ys in gains.items():
        ax.plot(np.asarray(loops_s) * 1e3, ys, marker=".", label=name)
    ax.axvline(measured_s * 1e3, color="grey", ls="--", label="fit's loop measured here")
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("fit's host loop per step (ms, log)")
    ax.set_ylabel("predicted gain on one v5e (x)")
    ax.legend(fontsize=8)
    ax.set_title("Each lever alone on the seed's step, one v5e chip (predicted)")
    fig.tight_layout()
    return fig


def plot_ladder(names, measured, spread, bands, marks, *, machine: str = "this CPU"):
    """Per rung: the rate measured here (median, IQR whiskers) beside a predicted band
    (``bands``: (low, high) per rung), log scale; ``marks``: the verdict per rung, written above."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.2))
    xs = np.arange(len(names))
    lows, highs = np.array(bands).T
    height = np.maximum(highs - lows, lows * 0.04)  # a point prediction still shows
    ax.bar(xs + 0.2, height, 0.35, bottom=lows, alpha=0.5, label="v5e, one chip: predicted")
    m = np.asarray(measured)
    lo, hi = np.array(spread).T
    yerr = np.clip([m - lo, hi - m], 0, None)
    ax.errorbar(
        xs - 0.2,
        m,
        yerr=yerr,
        fmt="o",
        color="black",
        capsize=3,
        label=f"{machine}: measured (median, IQR)",
    )
    for x, y, mark in zip(xs, m, marks, strict=True):
        ax.annotate(
            mark, (x - 0.2, y), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=7
        )
    ax.set_yscale("log")
    ax.set_ylabel("training images/s (log)")
    ax.set_xticks(xs, names, rotation=15, ha="right", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("The ladder: measured here, predicted for one v5e chip")
    fig.tight_layout()
    return fig
