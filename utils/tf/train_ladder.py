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
from collections.abc import Sequence
from dataclasses import dataclass, replace

import keras
import tensorflow as tf

from utils import bench, mfu, roofline
from utils.tf.training import EpochTimer

__all__ = [
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


def matmul_peak(dtype: str = "float32", n: int = 1024, repeats: int = 9) -> float:
    """Best FLOP/s of an ``n x n x n`` matmul at ``dtype`` (``float32``/``bfloat16``) here.

    The best sample (not the median) of TensorFlow's matmul and, for float32, of NumPy's (BLAS)
    too: the peak is what the hardware does when nobody else is using it, and MFU divides by
    the peak. On a shared machine a busy moment only ever lowers it.
    """
    a = tf.cast(tf.random.stateless_normal((n, n), seed=(1, 2)), dtype)
    b = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)), dtype)

    def tf_matmul() -> None:
        tf.linalg.matmul(a, b).numpy()  # .numpy(): wait for the result

    candidates = [tf_matmul]
    if dtype == "float32":
        a_np, b_np = a.numpy(), b.numpy()
        candidates.append(lambda: a_np @ b_np)
    best = 0.0
    for fn in candidates:
        result = bench.matmul_gflops(fn, n, n, n, repeats=repeats, target_s=0.05)
        best = max(best, 2.0 * n**3 / result.timing.min)
    return best


def memory_bandwidth(nbytes: int = 64 << 20, repeats: int = 5) -> float:
    """Best copy bandwidth (bytes/s) of an ``nbytes`` array: larger than the caches -> DRAM."""
    result = bench.copy_bandwidth(nbytes, repeats=repeats)
    return 2.0 * (nbytes // 4) * 4 / result.timing.min


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
    clock = EpochTimer(images_per_epoch)  # the course's epoch timer (utils.tf.training)
    if args and isinstance(args[0], tf.data.Dataset):
        # A repeated dataset has no end: fit needs to be told how long an epoch is, and each
        # call runs steps_per_execution steps whatever the epoch length: keep them multiples.
        spe = int(getattr(model, "steps_per_execution", 1) or 1)
        if steps_per_epoch % spe:
            raise ValueError(
                f"steps_per_epoch={steps_per_epoch} is not a multiple of the model's "
                f"steps_per_execution={spe}: on a repeated dataset every call runs {spe} steps, "
                "so the epoch would do more work than counted"
            )
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
    """Run the training ladder and the roofline check on this machine; print the tables.

    The rungs are those of notebook 09 (which shows their code); fp32 throughout except rung 3
    (bf16) and the sweep, which keep bf16 as the notebook does when it is faster.
    """
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
    work = {"images_per_epoch": steps * batch, "steps_per_epoch": steps}

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

    peaks = [matmul_peak("float32")]
    peak16 = matmul_peak("bfloat16")
    bandwidth = memory_bandwidth()
    print(
        f"measured now: fp32 matmul {peaks[0] / 1e9:.1f} GFLOP/s, bf16 matmul "
        f"{peak16 / 1e9:.1f} GFLOP/s, copy bandwidth {bandwidth / 1e9:.1f} GB/s"
    )

    # --- host overhead per step: a model with no work, fed each way ----------------------------
    ds = dataset(batch)
    nsteps = math.ceil(len(x) / batch)
    host: dict[object, float] = {
        "numpy": host_step_s(
            x / 255.0, y, batch_size=batch, images_per_epoch=len(x), steps_per_epoch=nsteps
        )
    }
    sweep, sweep_steps = (1, 4, 16, 64), 64
    for spe in sweep:
        host[spe] = host_step_s(
            ds,
            steps_per_execution=spe,
            steps_per_epoch=sweep_steps,
            images_per_epoch=sweep_steps * batch,
        )
    _, tiny_per_call = roofline.fit_host_overhead(sweep, [host[s] for s in sweep])
    numpy_extra = max(host["numpy"] - host[1], 0.0)
    print(
        f"host overhead per step: fit(numpy) {host['numpy'] * 1e3:.2f} ms; tf.data "
        + ", ".join(f"spe={s} {host[s] * 1e3:.2f} ms" for s in sweep)
        + f"; per call (what steps_per_execution divides) {tiny_per_call * 1e3:.3f} ms"
    )

    # --- the ladder ----------------------------------------------------------------------------
    seed_flops = _per_image_flops()
    v5e = roofline.PUBLISHED["v5e"]

    # TPU predictions carry over the per-call host time (what steps_per_execution divides),
    # measured with the tiny model in one go; a noisy fit can dip below zero: floor at zero.
    per_call = max(tiny_per_call, 0.0)

    def v5e_pred(b: int, dtype_bytes: int, spe: int = 1, extra: float = 0.0, **kw: object):
        layers = roofline.cnn_costs(b, dtype_bytes=dtype_bytes, **kw)  # type: ignore[arg-type]
        return roofline.predict_step(layers, v5e, batch=b, host_s=extra + per_call / spe)

    def rung(name, model, *fit_args, pred, bf16=False, flops=seed_flops, **fit_kw) -> FitTiming:
        t = time_fit(model, *fit_args, repeats=args.repeats, **fit_kw)
        rungs.append(Rung(name, t.images_per_s, flops, peak16 if bf16 else max(peaks)))
        preds.append(pred)
        bf16s.append(bf16)
        print(f"  {name}: {t.images_per_s:,.0f} images/s")
        return t

    rungs: list[Rung] = []
    preds: list[dict] = []
    bf16s: list[bool] = []
    keras.utils.set_random_seed(0)
    rung(
        "1 seed: fit(numpy)",
        _compile(cnn_variant()),
        x / 255.0,
        y,
        batch_size=batch,
        images_per_epoch=len(x),
        steps_per_epoch=nsteps,
        pred={"b": batch, "dtype_bytes": 4, "extra": numpy_extra},
    )
    seed_t = rung(
        "2 tf.data, static shapes",
        _compile(cnn_variant()),
        ds,
        pred={"b": batch, "dtype_bytes": 4},
        **work,
    )
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        rung(
            "3 + bf16",
            _compile(cnn_variant()),
            ds,
            pred={"b": batch, "dtype_bytes": 2},
            bf16=True,
            **work,
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    use_bf16 = rungs[2].images_per_s > rungs[1].images_per_s
    peaks.append(matmul_peak("float32"))
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if use_bf16 else "float32")
    try:
        for spe in sweep[1:]:
            rung(
                f"4 + steps_per_execution={spe}",
                _compile(cnn_variant(), spe),
                ds,
                pred={"b": batch, "dtype_bytes": 2, "spe": spe},
                bf16=use_bf16,
                steps_per_epoch=sweep_steps,
                images_per_epoch=sweep_steps * batch,
            )
        big = 4 * batch
        big_steps = max(len(x) // big, 1)
        big_spe = max(s for s in sweep if s <= big_steps)
        tpu_kw = {"channels": (128, 128, 128), "dense": 128}
        rung(
            f"5 TPU-shaped (128 ch, batch {big})",
            _compile(cnn_variant(**tpu_kw), big_spe),
            dataset(big),
            pred={"b": big, "dtype_bytes": 2, "spe": big_spe, **tpu_kw},
            bf16=use_bf16,
            flops=_per_image_flops(**tpu_kw),
            steps_per_epoch=big_steps,
            images_per_epoch=big_steps * big,
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")
    base = rungs[2] if use_bf16 else rungs[1]
    sweep_s = [batch / r.images_per_s for r in [base, *rungs[3 : 3 + len(sweep) - 1]]]
    sweep_per_call = roofline.fit_host_overhead(sweep, sweep_s)[1]
    print(
        f"  seed CNN: {(sweep_s[0] - sweep_s[-1]) * 1e3:.2f} ms per step removed by "
        f"steps_per_execution={sweep[-1]}; fit {sweep_per_call * 1e3:.3f} ms per call (rungs "
        "minutes apart: the machine's load differs too)"
    )

    # --- the predictor on this CPU: the seed (rung 2) and a 4x wider CNN -----------------------
    wide_kw, wide_batch = {"channels": (128, 256, 256), "dense": 256}, 32
    wide_t = time_fit(
        _compile(cnn_variant(**wide_kw)),
        dataset(wide_batch),
        steps_per_epoch=4,
        images_per_epoch=4 * wide_batch,
        repeats=args.repeats,
    )
    peaks.append(matmul_peak("float32"))
    peak = max(peaks)
    rungs = [
        replace(r, peak=peak16 if bf else peak, predicted=v5e_pred(**p))
        for r, bf, p in zip(rungs, bf16s, preds, strict=True)
    ]
    cpu = roofline.cpu_machine(peak, bandwidth)
    print(
        "\nfp32 matmul peak in this run: "
        + ", ".join(f"{p / 1e9:.1f}" for p in peaks)
        + f" GFLOP/s; MFU and the roofline use the best, {peak / 1e9:.1f}"
    )
    errors = {}
    for name, kw, b, measured in (
        ("seed", {}, batch, seed_t.step_s),
        ("wide 4x", wide_kw, wide_batch, wide_t.step_s),
    ):
        layers = roofline.cnn_costs(b, **kw)  # type: ignore[arg-type]
        pred = roofline.predict_step(layers, cpu, batch=b, host_s=host[1])
        errors[name] = roofline.relative_error(pred.step_s, measured)
        print(f"{name} CNN, batch {b}: " + roofline.diagnose(pred, measured))

    # --- one published accelerator figure --------------------------------------------------------
    pub = roofline.PUBLISHED_RESNET50
    per_chip = pub["global_batch"] // pub["chips"]
    resnet = roofline.predict_step(
        roofline.resnet50_costs(per_chip, dtype_bytes=2),
        roofline.PUBLISHED[pub["generation"]],
        batch=per_chip,
    )
    published = pub["images"] / pub["seconds"] / pub["chips"]

    print(
        "\n" + ladder_table(rungs, machine="on this CPU (MFU: this run's peak at the rung's dtype)")
    )
    for name, err in errors.items():
        print(
            f"roofline vs measured on this CPU, {name} CNN: {err:+.0%} "
            f"({'within' if abs(err) <= 0.3 else 'outside'} the 30% target)"
        )
    print(
        f"ResNet-50 on TPU v2, per chip: published {published:,.0f} images/s, roofline "
        f"{resnet.images_per_s:,.0f}: published / predicted = {published / resnet.images_per_s:.2f}"
        f"\n  ({pub['source']})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
