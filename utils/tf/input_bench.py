"""The tf.data benchmark of notebook 07 and ``make bench``: one workload, many pipelines (TF).

The workload (:func:`make_workload`) is honest about what it simulates:

- **Storage latency, simulated**: examples live in PNG-encoded TFRecord shards on the local disk,
  which is far faster than the network storage (a Cloud Storage bucket) that feeds a TPU. Each
  record read sleeps ``record_latency_s`` and the first record of each file also sleeps
  ``open_latency_s`` (time to first byte), inside a ``tf.py_function`` like the guide's
  ``ArtificialDataset``. Sleeping threads use no CPU, exactly like threads waiting for a bucket.
  A sleeping ``py_function`` blocks a thread of TensorFlow's shared pool (one thread per core),
  where a real file read blocks the reader's own thread; so every pipeline here runs with a
  private pool of :data:`SIMULATION_THREADS` threads (:func:`simulation_options`), the same for
  all, and two sleeping readers do not stop the CPU work.
- **Compute, real**: every example is parsed, PNG-decoded, randomly cropped and resized back to
  its size (``tf.image.crop_and_resize``), randomly flipped and scaled to float32 in [0, 1].

Every pipeline does that same work per example; they differ only in how tf.data schedules it.
:data:`LADDER` applies the seed text's techniques one at a time; :func:`guide_pipeline` is the
optimized pipeline of the tf.data performance guide (https://www.tensorflow.org/guide/data_performance,
"Best practice summary": interleave -> batch -> parallel map -> cache -> map -> prefetch);
:func:`tuned_pipeline` is the course's. :func:`measure` times one run of a pipeline over a few
epochs and :func:`ladder` runs every row once (a map of where the time goes). A *verdict* (faster,
slower, no difference) comes only from :func:`utils.compare.compare`, fed with
:func:`first_epoch_runner` / :func:`epoch_runner` (interleaved rounds, warm-up excluded).

The measuring harness itself (:class:`~utils.throughput.Result`, ``measure``, ``input_wait``,
``format_table``) is framework-free, in :mod:`utils.throughput`; this module adds the TensorFlow
side (datasets, distributed iterators, the workload and its pipelines).

Run ``python -m utils.tf.input_bench`` (``make bench``) for the table on this machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import tensorflow as tf

from utils import throughput
from utils.fresh_process import run_python
from utils.tf import tfrecords
from utils.tf.stamps import timed
from utils.throughput import Result
from utils.timeline import Timeline

AUTOTUNE = tf.data.AUTOTUNE
SIMULATION_THREADS = 32
Features = dict[str, tf.Tensor]

__all__ = [
    "LADDER",
    "PipelineConfig",
    "Result",
    "Workload",
    "build_pipeline",
    "cache_growth_bytes",
    "cache_growth_in_subprocess",
    "decode_stage",
    "epoch_runner",
    "first_epoch_runner",
    "format_table",
    "guide_pipeline",
    "input_wait",
    "ladder",
    "make_workload",
    "measure",
    "naive_pipeline",
    "read_stage",
    "record_timeline",
    "simulation_options",
    "transform_stage",
    "tuned_pipeline",
]


# --------------------------------------------------------------------------------------------
# The workload
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Sharded PNG TFRecords plus the simulated storage latencies and the batch size."""

    manifest: tfrecords.Manifest
    open_latency_s: float = 0.02
    record_latency_s: float = 0.0005
    batch_size: int = 128
    records_per_read: int = 16
    min_crop_area: float = 0.6  # random crops keep 60-100 % of the image area

    @property
    def num_examples(self) -> int:
        """Examples per epoch (the pipelines drop no example when this is a batch multiple)."""
        return sum(self.manifest.counts)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(H, W, C)`` of the stored and of the produced images."""
        return self.manifest.image_shape

    @property
    def storage_wait_s(self) -> float:
        """Simulated storage waiting in one epoch when nothing overlaps (files one after another).

        An epoch that takes less than this can only come from waiting on several files at once.
        """
        return (
            len(self.manifest.files) * self.open_latency_s
            + self.num_examples * self.record_latency_s
        )

    def describe(self) -> str:
        """One paragraph: what is simulated and what is real."""
        files = len(self.manifest.files)
        per_file = self.num_examples // files
        sleep = self.storage_wait_s
        return (
            f"{self.num_examples} examples {self.image_shape} in {files} PNG TFRecord shards "
            f"of ~{per_file} records. Simulated storage: {self.open_latency_s * 1e3:g} ms to open "
            f"a file, {self.record_latency_s * 1e3:g} ms per record, read {self.records_per_read} "
            f"records per request ({sleep:.2f} s of waiting "
            f"per epoch if nothing overlaps). Real compute per example: parse, PNG decode, "
            f"random crop + resize, flip, scale. Batches of {self.batch_size}."
        )


def make_workload(
    images: np.ndarray,
    labels: np.ndarray,
    out_dir: str | os.PathLike[str],
    *,
    num_shards: int = 16,
    open_latency_s: float = 0.02,
    record_latency_s: float = 0.0005,
    batch_size: int = 128,
) -> Workload:
    """Write ``images`` as PNG shards in ``out_dir`` and describe the workload built on them."""
    tfrecords.write_shards(images, labels, out_dir, num_shards=num_shards, encoding="png")
    return Workload(
        manifest=tfrecords.load_manifest(out_dir),
        open_latency_s=open_latency_s,
        record_latency_s=record_latency_s,
        batch_size=batch_size,
    )


def simulation_options() -> tf.data.Options:
    """Options every benchmarked pipeline gets: a private thread pool for the sleeping readers."""
    options = tf.data.Options()
    options.threading.private_threadpool_size = SIMULATION_THREADS
    return options


# --------------------------------------------------------------------------------------------
# Stages: read (simulated latency), decode (parse + PNG), transform (crop/resize/flip/scale)
# --------------------------------------------------------------------------------------------


def read_stage(wl: Workload, stamp: bool) -> Callable[[tf.Tensor], tf.data.Dataset]:
    """Per file: a dataset of ``{"record": bytes}`` that pays the simulated storage latency.

    Storage is read in requests of ``wl.records_per_read`` records (real readers fetch buffers,
    not single records: ``TFRecordDataset`` reads 256 KB at a time). A request costs
    ``records x record_latency_s``, the first one of a file also ``open_latency_s``. One
    ``tf.py_function`` sleep per request keeps the simulation's own overhead small.
    """

    def wait(request: tf.Tensor, records: tf.Tensor) -> tf.Tensor:
        seconds = int(records) * wl.record_latency_s
        if int(request) == 0:
            seconds += wl.open_latency_s
        time.sleep(seconds)
        return request

    def read(features: Features) -> Features:
        records = features["record"]
        done = tf.py_function(wait, [features["request"], tf.size(records)], tf.int64)
        with tf.control_dependencies([done]):
            return {"record": tf.identity(records)}

    stage = timed("read", read) if stamp else read

    def read_file(path: tf.Tensor) -> tf.data.Dataset:
        requests = tf.data.TFRecordDataset(path).batch(wl.records_per_read).enumerate()
        return requests.map(lambda i, r: stage({"request": i, "record": r})).unbatch()

    return read_file


def decode_stage(wl: Workload) -> Callable[[Features], Features]:
    """Parse and PNG-decode one record or a batch of records (the batch: one parse call)."""
    shape = wl.image_shape

    def decode(features: Features) -> Features:
        record = features.pop("record")
        parse = tfrecords.parse_single if record.shape.rank == 0 else tfrecords.parse_batch
        parsed = parse(record, encoding="png", image_shape=shape)
        return {**features, **parsed}

    return decode


def random_resized_crop_and_flip(
    images: tf.Tensor, *, min_area: float, size: Sequence[int]
) -> tf.Tensor:
    """A random crop of each image (``min_area``-100 % of it), resized to ``size``, maybe flipped.

    Vectorised over a batch ``(B, H, W, C)``: one ``crop_and_resize`` call with a box per image.
    Returns float32 in the input's value range.
    """
    batch = tf.shape(images)[0]
    area = tf.random.uniform([batch], min_area, 1.0)
    aspect = tf.exp(tf.random.uniform([batch], np.log(3 / 4), np.log(4 / 3)))
    h = tf.minimum(tf.sqrt(area / aspect), 1.0)
    w = tf.minimum(tf.sqrt(area * aspect), 1.0)
    y0 = tf.random.uniform([batch]) * (1.0 - h)
    x0 = tf.random.uniform([batch]) * (1.0 - w)
    boxes = tf.stack([y0, x0, y0 + h, x0 + w], axis=1)
    out = tf.image.crop_and_resize(
        tf.cast(images, tf.float32), boxes, tf.range(batch), crop_size=list(size)
    )
    flip = tf.random.uniform([batch]) < 0.5
    return tf.where(flip[:, None, None, None], tf.reverse(out, axis=[2]), out)


def transform_stage(wl: Workload) -> Callable[[Features], Features]:
    """Augment and scale one example or a batch: the per-epoch work (after any cache)."""
    size = wl.image_shape[:2]

    def transform(features: Features) -> Features:
        image = features["image"]
        single = image.shape.rank == 3
        batch = image[tf.newaxis] if single else image
        out = random_resized_crop_and_flip(batch, min_area=wl.min_crop_area, size=size) / 255.0
        return {
            **features,
            "image": out[0] if single else out,
            "label": tf.cast(features["label"], tf.int32),
        }

    return transform


# --------------------------------------------------------------------------------------------
# Pipelines
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelineConfig:
    """Which techniques a pipeline uses; :func:`build_pipeline` turns it into a dataset."""

    name: str
    prefetch: bool = False
    parallel_map: bool = False
    cycle_length: int = 0  # 0: read files one after the other (flat_map)
    block_length: int = 16
    read_threads: int | None = None  # interleave's num_parallel_calls; None: AUTOTUNE
    vectorize: bool = False  # batch before map
    cache: bool = False
    repeat: bool = False  # one iterator over all epochs (measure() honours it)
    options: bool = False  # autotune on, deterministic=False
    shuffle: bool = False
    note: str = ""


def build_pipeline(wl: Workload, cfg: PipelineConfig, *, stamp: bool = False) -> tf.data.Dataset:
    """The workload's dataset with the techniques of ``cfg``; ``stamp`` adds timeline stamps.

    Elements are dicts ``image`` float32 ``(B, H, W, C)``, ``label`` int32, ``index`` int64.
    """
    par = AUTOTUNE if cfg.parallel_map else None
    det = None if not cfg.options else False  # None: follow Options (deterministic by default)
    decode, transform = decode_stage(wl), transform_stage(wl)
    if stamp:
        decode, transform = timed("decode", decode), timed("transform", transform)
    files = tf.data.Dataset.from_tensor_slices(wl.manifest.files)
    read_file = read_stage(wl, stamp)
    if cfg.cycle_length:
        ds = files.interleave(
            read_file,
            cycle_length=cfg.cycle_length,
            block_length=cfg.block_length,
            num_parallel_calls=cfg.read_threads or AUTOTUNE,
            deterministic=det,
        )
    else:
        ds = files.flat_map(read_file)
    batch = wl.batch_size
    if cfg.vectorize:
        ds = ds.batch(batch).map(decode, num_parallel_calls=par, deterministic=det)
        if cfg.cache or cfg.shuffle:
            ds = ds.unbatch()  # cache and shuffle single examples
    else:
        ds = ds.map(decode, num_parallel_calls=par, deterministic=det)
    if cfg.cache:
        ds = ds.cache()
    if cfg.shuffle:
        ds = ds.shuffle(wl.num_examples, reshuffle_each_iteration=True)
    if cfg.vectorize:
        if cfg.cache or cfg.shuffle:
            ds = ds.batch(batch, drop_remainder=True)
        ds = ds.map(transform, num_parallel_calls=par, deterministic=det)
    else:
        ds = ds.map(transform, num_parallel_calls=par, deterministic=det).batch(batch)
    if cfg.prefetch:
        ds = ds.prefetch(AUTOTUNE)
    ds = ds.with_options(simulation_options())
    if cfg.options:
        options = tf.data.Options()
        options.autotune.enabled = True
        options.deterministic = False
        ds = ds.with_options(options)
    return ds


def _ladder(*steps: tuple[str, str, dict[str, Any]]) -> tuple[PipelineConfig, ...]:
    """Cumulative configs: each step is the previous config plus the flags it names."""
    configs = [PipelineConfig(steps[0][0], note=steps[0][1], **steps[0][2])]
    for name, note, flags in steps[1:]:
        configs.append(replace(configs[-1], name=name, note=note, **flags))
    return tuple(configs)


#: The seed text's techniques, applied one at a time (each row keeps the previous ones).
LADDER: tuple[PipelineConfig, ...] = _ladder(
    ("naive", "from_tensor_slices(files), read one file after another, map, batch", {}),
    ("+ prefetch", "prefetch(tf.data.AUTOTUNE)", {"prefetch": True}),
    ("+ parallel map", "map(num_parallel_calls=AUTOTUNE)", {"parallel_map": True}),
    (
        "+ interleave",
        "interleave(cycle_length=4, block_length=16, num_parallel_calls=AUTOTUNE)",
        {"cycle_length": 4},
    ),
    (
        "+ batch before map",
        "batch, then parse_example and transform whole batches",
        {"vectorize": True},
    ),
    ("+ cache", "cache() decoded uint8 examples, augment after it", {"cache": True}),
    (
        "+ repeat",
        "repeat(): one iterator for all epochs, no refill at epoch boundaries",
        {"repeat": True},
    ),
    ("+ Options", "Options: autotune.enabled, deterministic=False", {"options": True}),
)

#: The course's tuned pipeline: the ladder's last row, more files open than cores (reading is
#: latency-bound, not CPU-bound), and a full shuffle of the cached examples (training needs it).
TUNED = replace(
    LADDER[-1],
    name="course tuned",
    cycle_length=16,
    shuffle=True,
    note="+ cycle_length=16 (latency-bound reads) + shuffle(all cached examples)",
)
NAIVE = LADDER[0]
#: The tuned pipeline without its shuffle: the shuffle's cost, measured as its own row.
TUNED_NO_SHUFFLE = replace(
    TUNED, name="tuned, no shuffle", shuffle=False, note="course tuned - shuffle"
)


def naive_pipeline(wl: Workload, *, stamp: bool = False) -> tf.data.Dataset:
    """The seed's steps as written: sequential reads, per-example map, batch."""
    return build_pipeline(wl, NAIVE, stamp=stamp)


def tuned_pipeline(wl: Workload, *, stamp: bool = False, shuffle: bool = True) -> tf.data.Dataset:
    """The course's tuned pipeline (:data:`TUNED`; ``shuffle=False``: :data:`TUNED_NO_SHUFFLE`)."""
    return build_pipeline(wl, TUNED if shuffle else TUNED_NO_SHUFFLE, stamp=stamp)


def guide_pipeline(wl: Workload, *, stamp: bool = False) -> tf.data.Dataset:
    """The tf.data guide's optimized pipeline, verbatim in structure, on this workload.

    ``interleave(num_parallel_calls=AUTOTUNE)`` (default cycle_length: the number of CPU cores)
    -> ``batch`` -> ``map(time-consuming part, AUTOTUNE)`` -> ``cache`` ->
    ``map(memory-consuming part, AUTOTUNE)`` -> ``prefetch(AUTOTUNE)``. Here the time-consuming
    part is parse + decode, the part after the cache is the augmentation (it must differ per
    epoch). No shuffle, like the guide.
    """
    decode, transform = decode_stage(wl), transform_stage(wl)
    if stamp:
        decode, transform = timed("decode", decode), timed("transform", transform)
    files = tf.data.Dataset.from_tensor_slices(wl.manifest.files)
    return (
        files.interleave(read_stage(wl, stamp), num_parallel_calls=AUTOTUNE)
        .batch(wl.batch_size, drop_remainder=True)
        .map(decode, num_parallel_calls=AUTOTUNE)
        .cache()
        .map(transform, num_parallel_calls=AUTOTUNE)
        .prefetch(AUTOTUNE)
        .with_options(simulation_options())
    )


# --------------------------------------------------------------------------------------------
# Measuring: the TensorFlow side of utils.throughput (the framework-free harness)
# --------------------------------------------------------------------------------------------


def _count(batch: Any) -> int:
    if isinstance(batch, Mapping):
        return int(tf.shape(batch["label"])[0])
    return int(tf.shape(tf.nest.flatten(batch)[0])[0])


def measure(
    dataset: tf.data.Dataset | Callable[[], Iterable[Any]],
    *,
    epochs: int,
    name: str,
    repeat: bool = False,
    epoch_size: int | None = None,
    note: str = "",
    step: Callable[[Any], object] | None = None,
    count: Callable[[Any], int] | None = None,
) -> Result:
    """Iterate ``epochs`` epochs of a pipeline and time them (:func:`utils.throughput.measure`).

    ``repeat=False``: a fresh iterator per epoch (``for batch in dataset``). ``repeat=True``:
    one iterator over ``dataset.repeat(epochs)``; epoch boundaries are found by counting
    ``epoch_size`` examples. ``step`` (optional) is called on every batch, like a training step.
    ``dataset`` may also be a callable returning an iterable (e.g. a distributed dataset);
    ``count(batch)`` then says how many examples a batch holds (default: the leading dimension).
    """
    source: Any = dataset
    if repeat:
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError("repeat=True needs a tf.data.Dataset")
        source = dataset.repeat(epochs)
    return throughput.measure(
        source,
        epochs=epochs,
        name=name,
        count=count or _count,
        repeat=repeat,
        epoch_size=epoch_size,
        step=step,
        note=note,
    )


def ladder(
    wl: Workload,
    *,
    epochs: int = 3,
    configs: Sequence[PipelineConfig] | None = None,
    include_guide: bool = True,
    extra: Mapping[str, Callable[[], Result]] | None = None,
    build: Callable[[Workload, PipelineConfig], tf.data.Dataset] | None = None,
) -> list[Result]:
    """One run of each ladder row (or ``configs``), of ``extra`` and of the guide's pipeline.

    ``build(wl, cfg)`` turns a row into its dataset (default :func:`build_pipeline`; notebook 07
    passes its own, editable copy).

    A map of where the time goes, one run per row: single runs on a shared machine cannot say
    that one row is faster than another (use :func:`utils.compare.compare` for that). The guide's
    pipeline is run both ways: as the guide runs it (a fresh iterator per epoch: ``guide
    optimized``) and iterated like the course's tuned pipeline (``dataset.repeat(epochs)``:
    ``guide + repeat``).
    """

    def run(make: Callable[[], tf.data.Dataset], name: str, repeat: bool, note: str) -> Result:
        return measure(
            make(), epochs=epochs, name=name, repeat=repeat, epoch_size=wl.num_examples, note=note
        )

    chosen = configs if configs is not None else (*LADDER, TUNED)
    make = build or build_pipeline
    results = [run(lambda cfg=cfg: make(wl, cfg), cfg.name, cfg.repeat, cfg.note) for cfg in chosen]
    results += [fn() for fn in (extra or {}).values()]
    if include_guide:
        results.append(
            run(
                lambda: guide_pipeline(wl),
                "guide optimized",
                False,
                "tf.data guide: interleave, batch, map, cache, map, prefetch",
            )
        )
        results.append(
            run(
                lambda: guide_pipeline(wl),
                "guide + repeat",
                True,
                "the guide's pipeline, iterated like course tuned (repeat)",
            )
        )
    return results


def first_epoch_runner(
    make: Callable[[], Iterable[Any]], *, epoch_size: int, count: Callable[[Any], int] | None = None
) -> Callable[[], int]:
    """:func:`utils.throughput.first_epoch_runner` counting examples of tf.data batches."""
    return throughput.first_epoch_runner(make, epoch_size=epoch_size, count=count or _count)


def epoch_runner(
    make: Callable[[], Iterable[Any]], *, epoch_size: int, count: Callable[[Any], int] | None = None
) -> Callable[[], int]:
    """:func:`utils.throughput.epoch_runner` counting examples of tf.data batches."""
    return throughput.epoch_runner(make, epoch_size=epoch_size, count=count or _count)


def format_table(results: Sequence[Result], *, baseline: str = "naive") -> str:
    """:func:`utils.throughput.format_table` with the naive pipeline as the baseline."""
    return throughput.format_table(results, baseline=baseline)


def record_timeline(
    dataset: tf.data.Dataset,
    *,
    epochs: int = 2,
    step_s: float = 0.0,
    step: Callable[[Any], object] | None = None,
    repeat: bool = False,
) -> Timeline:
    """Iterate a stamped pipeline; the consumer sleeps ``step_s`` (or runs ``step``) per batch.

    ``repeat=False``: a new iterator per epoch (the pipeline restarts at every epoch boundary).
    ``repeat=True``: one iterator over ``dataset.repeat(epochs)``, as a training loop that uses
    ``repeat`` iterates it (no restart between epochs).
    """

    def consume(batch: Any) -> None:
        if step is not None:
            step(batch)
        elif step_s:
            time.sleep(step_s)

    timeline = Timeline()
    if repeat:
        timeline.record_consumer(dataset.repeat(epochs), consume, epochs=1)
    else:
        timeline.record_consumer(dataset, consume, epochs=epochs)
    return timeline


def input_wait(
    dataset: tf.data.Dataset,
    train_step: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    *,
    steps: int,
    warmup: int = 1,
    strategy: tf.distribute.Strategy | None = None,
) -> dict[str, float]:
    """Run ``steps`` training steps; how much of each step was spent waiting for input.

    ``train_step(images, labels)`` returns the loss; reading the loss (``float(...)``) waits
    for the step to finish, so the step time is real. With a ``strategy`` the batches come
    from ``strategy.experimental_distribute_dataset`` (per-replica values, already on the
    replicas' devices), so ``train_step`` should call ``strategy.run`` and reduce the loss.
    Returns ``wait_pct``, ``step_ms`` and ``wait_ms`` (:func:`utils.throughput.input_wait`);
    the first ``warmup`` steps (tracing, pipeline start) are not counted.
    """
    repeated = dataset.repeat()
    if strategy is not None:
        repeated = strategy.experimental_distribute_dataset(repeated)

    def step(batch: Any) -> None:
        images, labels = (batch["image"], batch["label"]) if isinstance(batch, Mapping) else batch
        float(train_step(images, labels))

    return throughput.input_wait(iter(repeated), step, steps=steps, warmup=warmup)


def cache_growth_bytes(placement: str, n: int, *, seed: int = 0) -> int:
    """Resident-memory growth of filling a ``cache()`` placed before or after the seed's map.

    ``placement``: ``"before"`` caches the ``uint8`` 32x32 source, ``"after"`` the 224x224
    float32 output of :func:`utils.tf.pipelines.seed_preprocess`. Meaningful in a fresh process
    only (:func:`cache_growth_in_subprocess`): a long-running one first reuses memory it freed.
    """
    import psutil

    from utils.tf import pipelines

    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    ds = tf.data.Dataset.from_tensor_slices((images, np.zeros(n, np.int64)))
    if placement == "before":
        ds = ds.cache().map(pipelines.seed_preprocess)
    elif placement == "after":
        ds = ds.map(pipelines.seed_preprocess).cache()
    else:
        raise ValueError(f"placement must be 'before' or 'after'; got {placement!r}")
    for _ in ds.take(1):  # build everything once, so only the cache remains to grow
        pass
    proc = psutil.Process()
    before = proc.memory_info().rss
    for _ in ds:
        pass
    return proc.memory_info().rss - before


def cache_growth_in_subprocess(placement: str, n: int) -> int:
    """:func:`cache_growth_bytes` in a fresh Python process (clean memory); returns bytes.

    The child imports TensorFlow: do not call this on a TPU VM while another process (a
    notebook's kernel) holds the chips. A failing child raises
    :class:`utils.fresh_process.FreshProcessError` with the tail of its output.
    """
    done = run_python(
        ["-m", "utils.tf.input_bench", "--cache-growth", placement, str(n)],
        env={"CUDA_VISIBLE_DEVICES": ""},  # host memory is the question; leave any GPU alone
    )
    return int(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# make bench
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Naive vs the guide's optimized vs the course's tuned pipeline on the workload."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--open-latency-ms", type=float, default=20.0)
    parser.add_argument("--record-latency-ms", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per verdict")
    parser.add_argument("--ladder", action="store_true", help="also time every ladder step")
    parser.add_argument(
        "--cache-growth",
        nargs=2,
        metavar=("PLACEMENT", "N"),
        help="print only the memory growth (bytes) of a cache before/after the seed's map",
    )
    args = parser.parse_args(argv)
    if args.cache_growth:
        placement, n = args.cache_growth
        print(cache_growth_bytes(placement, int(n)))
        return 0

    from utils.data import load_cifar10

    data = load_cifar10(subset=args.examples, offline=True)  # the stand-in: no network needed
    print(data.source)
    with tempfile.TemporaryDirectory(prefix="bench-pipelines-") as tmp:
        wl = make_workload(
            data.x_train[: args.examples],
            data.y_train[: args.examples],
            tmp,
            num_shards=args.shards,
            open_latency_s=args.open_latency_ms / 1e3,
            record_latency_s=args.record_latency_ms / 1e3,
        )
        print(wl.describe())
        print(
            f"CPU cores available: {os.cpu_count()}; epochs per pipeline: {args.epochs}; "
            f"{args.rounds} interleaved rounds per verdict\n"
        )
        configs = (*LADDER, TUNED) if args.ladder else (NAIVE, TUNED)
        print(format_table(ladder(wl, epochs=args.epochs, configs=configs)))
        print("(one run per row: a map, not a verdict)\n")
        first, steady = tuned_vs_guide(wl, rounds=args.rounds)
    for name, result in (("first epoch", first), ("steady epoch", steady)):
        print(f"{name}:\n{result.table(baseline='guide')}")
        for other in result.names[1:]:
            print("  " + result.verdict(result.names[0], other).sentence())
    return 0


def tuned_vs_guide(wl: Workload, *, rounds: int = 5) -> tuple[Any, Any]:
    """course tuned, tuned without its shuffle, and the guide's pipeline, by utils.compare.

    Two comparisons: the first epoch (a fresh pipeline per call: storage) and the steady epoch
    (one long-lived iterator each, the cache full). Returns the two ``Comparison`` objects.
    """
    from utils.compare import Variant, compare

    size = wl.num_examples
    makers = {
        "course tuned": lambda: tuned_pipeline(wl),
        "tuned, no shuffle": lambda: tuned_pipeline(wl, shuffle=False),
        "guide": lambda: guide_pipeline(wl),
    }
    first = compare(
        [Variant(n, first_epoch_runner(m, epoch_size=size), work=size) for n, m in makers.items()],
        rounds=rounds,
        warmup=1,
    )
    steady = compare(
        [
            Variant(n, epoch_runner(lambda m=m: m().repeat(), epoch_size=size), work=size)
            for n, m in makers.items()
        ],
        rounds=rounds,
        warmup=1,
    )
    return first, steady


if __name__ == "__main__":
    raise SystemExit(main())
