"""The measuring harness of notebook 09's training speed ladder and ``make bench`` (imports TF).

Notebook 09 shows each rung's code (the tf.data chain, the compile call); this module only
measures:

- :func:`matmul_peak`: the best fp32 (or bf16) matmul rate of TensorFlow on this machine, measured
  in the same run as the training it is compared with (``utils.bench.matmul_gflops``).
- :func:`memory_bandwidth`: the best NumPy copy bandwidth (``utils.bench.copy_bandwidth``).
- :func:`time_fit`: ``model.fit`` for ``1 + repeats`` epochs; the first (trace, compile, warm-up)
  is dropped and the **best** of the others kept. The machine may be shared: the best of a few
  repeats is the figure least disturbed by other programs.
- :func:`host_step_s`: the step time of a model with almost no work (Flatten -> Dense(10)) fed
  the same way: the per-step host overhead of that way of training (Keras' loop, the input
  route, the call into the step function), measured.
- :class:`Rung` and :func:`ladder_table`: images/s and MFU per rung, beside a roofline
  prediction for a TPU (:mod:`utils.roofline`).

``python -m utils.tf.train_ladder`` (part of ``make bench``) runs the whole ladder and the
predictor's check on this machine and prints them.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import keras
import tensorflow as tf

from utils import bench, mfu, roofline

__all__ = [
    "EpochClock",
    "FitTiming",
    "Rung",
    "cnn_variant",
    "host_step_s",
    "ladder_table",
    "main",
    "matmul_peak",
    "memory_bandwidth",
    "time_fit",
    "tiny_model",
]


def matmul_peak(dtype: str = "float32", n: int = 1024, repeats: int = 5) -> float:
    """Best FLOP/s of an ``n x n x n`` TensorFlow matmul at ``dtype`` (``float32``/``bfloat16``).

    The best sample (not the median): the peak is what the hardware can do when nobody else
    is using it, and MFU divides by the peak.
    """
    a = tf.cast(tf.random.stateless_normal((n, n), seed=(1, 2)), dtype)
    b = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)), dtype)

    def matmul() -> None:
        tf.linalg.matmul(a, b).numpy()  # .numpy(): wait for the result

    result = bench.matmul_gflops(matmul, n, n, n, repeats=repeats, target_s=0.05)
    return 2.0 * n**3 / result.timing.min


def memory_bandwidth(nbytes: int = 64 << 20, repeats: int = 5) -> float:
    """Best copy bandwidth (bytes/s) of an ``nbytes`` array: larger than the caches -> DRAM."""
    result = bench.copy_bandwidth(nbytes, repeats=repeats)
    return 2.0 * (nbytes // 4) * 4 / result.timing.min


class EpochClock(keras.callbacks.Callback):
    """Records the wall time of every epoch of ``fit``."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch_s: list[float] = []
        self._start = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch_s.append(time.perf_counter() - self._start)


@dataclass(frozen=True)
class FitTiming:
    """Epoch times of one ``fit`` call; the first epoch (warm-up) is kept apart."""

    epoch_s: tuple[float, ...]
    images_per_epoch: int
    steps_per_epoch: int

    @property
    def best_s(self) -> float:
        """The fastest epoch after the first (the first if there is only one)."""
        return min(self.epoch_s[1:] or self.epoch_s)

    @property
    def images_per_s(self) -> float:
        return self.images_per_epoch / self.best_s

    @property
    def step_s(self) -> float:
        return self.best_s / self.steps_per_epoch


def time_fit(
    model: keras.Model,
    *args: object,
    images_per_epoch: int,
    steps_per_epoch: int,
    repeats: int = 2,
    **fit_kwargs: object,
) -> FitTiming:
    """``model.fit(*args, epochs=1 + repeats, ...)`` timed per epoch (best of ``repeats``).

    Pass the input as ``fit`` wants it: numpy arrays with ``batch_size=``, or a repeated dataset
    (then ``steps_per_epoch`` is passed on to ``fit``). ``images_per_epoch``/``steps_per_epoch``
    say how much work one epoch is.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    clock = EpochClock()
    if args and isinstance(args[0], tf.data.Dataset):
        # A repeated dataset has no end: fit needs to be told how long an epoch is.
        fit_kwargs["steps_per_epoch"] = steps_per_epoch
        fit_kwargs.setdefault("shuffle", False)  # the dataset shuffles; Keras would warn otherwise
    model.fit(*args, epochs=1 + repeats, verbose=0, callbacks=[clock], **fit_kwargs)
    return FitTiming(tuple(clock.epoch_s), images_per_epoch, steps_per_epoch)


def cnn_variant(
    channels: tuple[int, int, int] = (32, 64, 64), dense: int = 64, *, num_classes: int = 10
) -> keras.Sequential:
    """The seed CNN's shape with other widths (``(32, 64, 64), 64`` is the seed)."""
    c1, c2, c3 = channels
    return keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            keras.layers.Conv2D(c1, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(c2, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(c3, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(dense, activation="relu"),
            keras.layers.Dense(num_classes),
        ]
    )


def tiny_model(num_classes: int = 10) -> keras.Sequential:
    """Almost no work per image (a 3,072 x 10 matmul): its step time is the host overhead."""
    return keras.Sequential(
        [keras.Input(shape=(32, 32, 3)), keras.layers.Flatten(), keras.layers.Dense(num_classes)]
    )


def _compile(model: keras.Model, steps_per_execution: int = 1) -> keras.Model:
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
    return model


def host_step_s(
    *fit_args: object,
    steps_per_execution: int = 1,
    steps_per_epoch: int,
    images_per_epoch: int,
    repeats: int = 3,
    **fit_kwargs: object,
) -> float:
    """Per-step time of :func:`tiny_model` fed like the real model: the host overhead per step."""
    model = _compile(tiny_model(), steps_per_execution)
    timing = time_fit(
        model,
        *fit_args,
        images_per_epoch=images_per_epoch,
        steps_per_epoch=steps_per_epoch,
        repeats=repeats,
        **fit_kwargs,
    )
    return timing.step_s


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: measured here, with the roofline's prediction for a TPU beside it.

    ``flops_per_image``: training FLOPs per image (``utils.mfu.training_flops`` of the layers
    costed for one image); ``peak``: the FLOP/s MFU divides by, measured in the same run.
    """

    name: str
    images_per_s: float
    flops_per_image: float
    peak: float
    predicted: roofline.StepPrediction | None = None
    accuracy: float | None = None

    @property
    def mfu(self) -> float:
        return mfu.mfu(self.flops_per_image * self.images_per_s, 1.0, self.peak)


def ladder_table(rungs: Sequence[Rung], *, machine: str = "here") -> str:
    """Images/s and MFU per rung, the speed-up over the first rung, and the TPU prediction."""
    base = rungs[0].images_per_s
    pred_machine = next((r.predicted.machine.name for r in rungs if r.predicted), "")
    rows = [
        f"{'rung':<30}{'images/s':>10}{'vs seed':>9}{'MFU':>7}{'accuracy':>10}"
        f"{'pred. images/s':>16}{'pred. MFU':>10}  bound"
    ]
    for r in rungs:
        acc = f"{r.accuracy:.3f}" if r.accuracy is not None else "-"
        p = r.predicted
        pred = f"{p.images_per_s:>16,.0f}{p.mfu:>10.1%}  {p.bound}" if p else f"{'-':>16}{'-':>10}"
        rows.append(
            f"{r.name:<30}{r.images_per_s:>10,.0f}{r.images_per_s / base:>8.2f}x{r.mfu:>7.1%}"
            f"{acc:>10}{pred}"
        )
    rows.append(f"measured {machine}; predictions: {pred_machine} (roofline, not measured)")
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------
# `make bench`: the ladder and the predictor's check, in one process
# --------------------------------------------------------------------------------------------


def _per_image_flops(**kw: object) -> float:
    return float(mfu.training_flops(roofline.cnn_costs(1, **kw)))  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the training ladder and the roofline check on this machine; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048, help="training images (stand-in)")
    parser.add_argument("--repeats", type=int, default=2, help="timed epochs per rung (best)")
    args = parser.parse_args(argv)

    from utils.data import load_cifar10

    data = load_cifar10(source="standin", subset=args.images, offline=True)
    x, y = data.x_train, data.y_train.astype("int32")
    print(data.source)
    batch = 128
    steps = len(x) // batch

    def dataset(b: int) -> tf.data.Dataset:
        return (
            tf.data.Dataset.from_tensor_slices((x, y))
            .cache()
            .shuffle(len(x), seed=0)
            .repeat()
            .batch(b, drop_remainder=True)
            .map(lambda im, lab: (tf.cast(im, tf.float32) / 255.0, lab), num_parallel_calls=-1)
            .prefetch(-1)
        )

    peak32 = matmul_peak("float32")
    peak16 = matmul_peak("bfloat16")
    bandwidth = memory_bandwidth()
    print(
        f"this machine, measured now: fp32 matmul {peak32 / 1e9:.1f} GFLOP/s, bf16 matmul "
        f"{peak16 / 1e9:.1f} GFLOP/s, copy bandwidth {bandwidth / 1e9:.1f} GB/s"
    )

    # --- host overhead per step, per input route and steps_per_execution ---------------------
    ds = dataset(batch)
    work = {"images_per_epoch": steps * batch, "steps_per_epoch": steps}
    host = {}
    host["numpy"] = host_step_s(
        x / 255.0,
        y,
        batch_size=batch,
        images_per_epoch=len(x),
        steps_per_epoch=math.ceil(len(x) / batch),
    )
    sweep = (1, 4, 16, 64)
    sweep_steps = 64
    for spe in sweep:
        host[spe] = host_step_s(
            ds,
            steps_per_execution=spe,
            steps_per_epoch=sweep_steps,
            images_per_epoch=sweep_steps * batch,
        )
    per_step, per_call = roofline.fit_host_overhead(sweep, [host[s] for s in sweep])
    print(
        f"host overhead per step (tiny model): fit(numpy) {host['numpy'] * 1e3:.2f} ms; tf.data "
        + ", ".join(f"spe={s}: {host[s] * 1e3:.2f} ms" for s in sweep)
        + f" -> {per_call * 1e3:.2f} ms per call that steps_per_execution divides"
    )

    # --- the predictor on this CPU: seed and 4x wider ------------------------------------------
    cpu = roofline.cpu_machine(peak32, bandwidth)
    errors = {}
    for name, channels, dense, b in (
        ("seed", (32, 64, 64), 64, 128),
        ("wide 4x", (128, 256, 256), 256, 32),
    ):
        model = _compile(cnn_variant(channels, dense))
        n_steps = 16 if b == batch else 4
        t = time_fit(
            model,
            dataset(b),
            steps_per_epoch=n_steps,
            images_per_epoch=n_steps * b,
            repeats=args.repeats,
        )
        pred = roofline.predict_step(
            roofline.cnn_costs(b, channels=channels, dense=dense), cpu, batch=b, host_s=host[1]
        )
        errors[name] = roofline.relative_error(pred.step_s, t.step_s)
        print(f"\n{name} CNN, batch {b}:")
        print(roofline.diagnose(pred, t.step_s))

    # --- the ladder ----------------------------------------------------------------------------
    seed_flops = _per_image_flops()
    v5e = roofline.PUBLISHED["v5e"]

    def v5e_pred(b: int, host_s: float, dtype_bytes: int, **kw: object) -> roofline.StepPrediction:
        return roofline.predict_step(
            roofline.cnn_costs(b, dtype_bytes=dtype_bytes, **kw), v5e, batch=b, host_s=host_s
        )

    rungs = []
    keras.utils.set_random_seed(0)
    m = _compile(cnn_variant())
    t = time_fit(
        m,
        x / 255.0,
        y,
        batch_size=batch,
        images_per_epoch=len(x),
        steps_per_epoch=math.ceil(len(x) / batch),
        repeats=args.repeats,
    )
    rungs.append(
        Rung(
            "1 seed: fit(numpy)",
            t.images_per_s,
            seed_flops,
            peak32,
            v5e_pred(batch, host["numpy"], 4),
        )
    )
    m = _compile(cnn_variant())
    t = time_fit(m, ds, repeats=args.repeats, **work)
    rungs.append(
        Rung(
            "2 tf.data, static shapes",
            t.images_per_s,
            seed_flops,
            peak32,
            v5e_pred(batch, host[1], 4),
        )
    )
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        m = _compile(cnn_variant())
        t = time_fit(m, ds, repeats=args.repeats, **work)
        rungs.append(
            Rung(
                "3 + bf16 (MFU vs fp32 peak)",
                t.images_per_s,
                seed_flops,
                peak32,
                v5e_pred(batch, host[1], 2),
            )
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for spe in sweep[1:]:
        m = _compile(cnn_variant(), spe)
        t = time_fit(
            m,
            ds,
            steps_per_epoch=sweep_steps,
            images_per_epoch=sweep_steps * batch,
            repeats=args.repeats,
        )
        rungs.append(
            Rung(
                f"4 + steps_per_execution={spe}",
                t.images_per_s,
                seed_flops,
                peak32,
                v5e_pred(batch, host[spe], 2),
            )
        )
    # TPU-shaped: channels in multiples of 128, a 4x larger batch, bf16, steps_per_execution=64
    big = 4 * batch
    big_steps = max(len(x) // big, 1)
    tpu_kw = {"channels": (128, 128, 128), "dense": 128}
    host_big = host_step_s(
        dataset(big),
        steps_per_execution=64,
        steps_per_epoch=big_steps,
        images_per_epoch=big_steps * big,
    )
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        m = _compile(cnn_variant(**tpu_kw), 64)
        t = time_fit(
            m,
            dataset(big),
            steps_per_epoch=big_steps,
            images_per_epoch=big_steps * big,
            repeats=args.repeats,
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    rungs.append(
        Rung(
            "5 TPU-shaped (128 ch, batch 512)",
            t.images_per_s,
            _per_image_flops(**tpu_kw),
            peak32,
            v5e_pred(big, host_big, 2, **tpu_kw),
        )
    )
    print("\n" + ladder_table(rungs, machine="on this CPU, fp32 peak measured in this run"))
    for name, err in errors.items():
        print(
            f"roofline error on this CPU, {name} CNN: {err:+.0%} "
            f"({'within' if abs(err) <= 0.3 else 'outside'} the 30% target)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
