"""The JAX half of notebook 09's ladder (rungs 5-6) and its input check.

- :func:`scanned_trainer`: K training steps of a Keras model in one jitted ``jax.lax.scan``,
  from the model's ``stateless_call`` and the optimizer's ``stateless_apply`` (Keras 3's JAX
  training-loop recipe), the trained variables written back into the model; notebook 09 shows
  it and passes its copy to :func:`build_rung`.
- :func:`scan_rung`: a rung that trains with it (float32 or uint8 batches).
- :func:`grain_chunks`: K-step chunks from Grain with multiprocess prefetch (the input check).
- :func:`keras_launches`: how many compiled programs Keras' ``fit`` launches per call.
Importing this module imports JAX and Keras. ``make bench`` (tests/tools/bench.py) runs the ladder.
"""

from __future__ import annotations

from unittest import mock

import jax
import keras
import numpy as np

from utils.keras import ladder


def scanned_trainer(model, optimizer, loss_fn, normalise=False):
    """``train(chunks)``: each chunk ``(xs, ys)`` is ``len(xs)`` steps in one device program;
    then the model and optimizer hold the trained variables. Returns the last chunk's losses."""
    optimizer.build(model.trainable_variables)

    def loss_and_state(trainable, non_trainable, x, y):
        y_pred, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_fn(y, y_pred), non_trainable

    grad_fn = jax.value_and_grad(loss_and_state, has_aux=True)

    def step(state, batch):
        trainable, non_trainable, opt_vars = state
        x, y = batch
        if normalise:  # uint8 arrived: scale on the device
            x = x.astype("float32") / 255.0
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, x, y)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return (trainable, non_trainable, opt_vars), loss

    @jax.jit
    def program(state, xs, ys):  # K steps, one device program
        # unroll: K copies of the step, no loop (XLA:CPU may run a looped conv slowly: jax#12868)
        return jax.lax.scan(step, state, (xs, ys), unroll=True)

    variables = (model.trainable_variables, model.non_trainable_variables, optimizer.variables)

    def train(chunks):
        state, losses = tuple([v.value for v in group] for group in variables), None
        for xs, ys in chunks:
            state, losses = program(state, xs, ys)
        for group, values in zip(variables, state, strict=True):
            for variable, value in zip(group, values, strict=True):
                variable.assign(value)  # the model now holds what it trained
        return losses

    return train


class ArraySource:
    """Grain's random-access source over arrays (module level: worker processes import it)."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.x[i], self.y[i]


OPEN_FEEDS: list = []  # Grain iterators whose worker processes are running


def close_feeds() -> None:
    """Stop every Grain worker process :func:`grain_chunks` started (none outlives its cell)."""
    while OPEN_FEEDS:
        OPEN_FEEDS.pop().close()


def grain_chunks(x, y, batch: int, steps: int, *, workers: int = 1, seed: int = 0):
    """An endless iterator of ``(steps, batch, ...)`` chunks from Grain, prefetched by
    ``workers`` processes (``mp_prefetch``)."""
    import grain
    from absl import flags

    if not flags.FLAGS.is_parsed():  # Grain reads absl flags; a notebook never parses them
        flags.FLAGS.mark_as_parsed()
    ds = grain.MapDataset.source(ArraySource(x, y)).shuffle(seed=seed).repeat()
    ds = ds.batch(batch, drop_remainder=True).batch(steps, drop_remainder=True).to_iter_dataset()
    feed = iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)))
    OPEN_FEEDS.append(feed)
    return feed


def scan_rung(
    spec: ladder.RungSpec, x, y, *, seed: int = 0, tiny: bool = False, trainer=scanned_trainer
) -> ladder.Rung:
    """A rung trained by ``trainer`` (:func:`scanned_trainer` or a copy of it): ``spec.steps``
    batches per program; ``x`` is float32 in [0, 1] or uint8 (``spec.input_dtype``).
    One ``run()`` trains every whole chunk once."""
    model = ladder.build_model(spec, seed=seed, tiny=tiny)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train = trainer(model, model.optimizer, loss, normalise=spec.input_dtype == "uint8")
    chunk = spec.batch * spec.steps
    n = len(x) // chunk * chunk
    shape = (n // chunk, spec.steps, spec.batch, *x.shape[1:])
    xs, ys = x[:n].reshape(shape), y[:n].reshape(shape[:3])

    def run() -> None:
        jax.block_until_ready(train(zip(xs, ys, strict=True)))

    return ladder.Rung(spec, model, run, n, tiny)


def build_rung(
    spec, x_float, x_uint8, y, *, seed: int = 0, tiny: bool = False, trainer=scanned_trainer
) -> ladder.Rung:
    """A rung for ``spec``: ``fit`` for one step per program, ``trainer``'s scanned loop
    otherwise (``tiny``: a model with almost no work, so its time is the host's part)."""
    if spec.steps == 1:
        return ladder.fit_rung(spec, x_float, y, seed=seed, tiny=tiny)
    x = x_uint8 if spec.input_dtype == "uint8" else x_float
    return scan_rung(spec, x, y, seed=seed, tiny=tiny, trainer=trainer)


def keras_launches(model, x, y, batch: int, steps_per_execution: int) -> tuple[int, int]:
    """(calls of Keras' train function, launches of its compiled step) in one ``fit`` pass with
    ``steps_per_execution``: Keras' JAX trainer is handed a ``jit`` that counts calls."""
    from keras.src.backend.jax import trainer

    launches = []

    def counting_jit(fn, **kw):
        compiled = jax.jit(fn, **kw)
        return lambda *a: (launches.append(1), compiled(*a))[1]

    model.compile(
        optimizer=model.optimizer, loss=model.loss, steps_per_execution=steps_per_execution
    )
    with mock.patch.object(trainer, "jit", counting_jit):
        model.make_train_function(force=True)
    calls, inner = [], model.train_function
    model.train_function = lambda *a: (calls.append(1), inner(*a))[1]
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
    return len(calls), len(launches)
