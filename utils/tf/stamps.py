"""The TensorFlow half of :mod:`utils.timeline`: stamp each tf.data stage (imports TensorFlow).

:func:`timed` wraps a stage's function so that it stamps its start and end with
``tf.timestamp()`` (a graph op: no Python, no GIL) into the element itself, as ``t_<stage>``;
:class:`utils.timeline.Timeline` reads the stamps back and checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from utils.timeline import STAMP_PREFIX

__all__ = ["timed"]


def timed(stage: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable:
    """Wrap a dict-in, dict-out stage function so its output carries ``t_<stage>`` stamps.

    The start stamp is taken before any op of ``fn`` runs (control dependency) and the end
    stamp after all its outputs exist. For a batch (``index`` of rank 1) the stamp is repeated
    per element, shape ``(B, 2)``; for a single element it is ``(2,)``.
    """

    def wrapper(features: dict[str, Any]) -> dict[str, Any]:
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            features = {k: tf.identity(v) for k, v in features.items()}
            out = dict(fn(features))
        with tf.control_dependencies(tf.nest.flatten(out)):
            end = tf.timestamp()
        stamp = tf.stack([start, end])
        index = out.get("index", out.get("record"))  # what says how many elements there are
        if index is not None and index.shape.rank == 1:
            stamp = tf.tile(stamp[tf.newaxis, :], [tf.shape(index)[0], 1])
        out[STAMP_PREFIX + stage] = stamp
        return out

    return wrapper
