"""Connect TensorFlow to a TPU VM's chips (imports TensorFlow).

**Importing this module imports TensorFlow.** On a TPU VM the first framework a process starts
on the chips owns them (libtpu allows one process), so import it only in a notebook that trains
with TensorFlow; ``utils.runtime`` says what the machine has without importing anything.

- :func:`connect_tpu`: ``TPUClusterResolver(tpu="local")``, ``experimental_connect_to_cluster``
  and ``initialize_tpu_system``, with an error that says what to do. (A bounded trial of the
  same steps in a fresh process, run before this process imports TensorFlow, is
  :func:`utils.runtime.try_resolver`.)
- :func:`save_options`: SavedModel options that let a TPU program write to the local disk.

Choosing a ``tf.distribute`` strategy is :mod:`utils.tf.strategies`.
"""

from __future__ import annotations

from utils import native_logs, runtime

with native_logs.filtered_stderr():  # the oneDNN banner and cuInit line, not errors
    import tensorflow as tf

    tf.config.list_physical_devices()  # device discovery: where the cuInit line is written

# Keep TensorFlow's Python INFO lines out of notebook output; warnings and errors still show.
tf.get_logger().setLevel("ERROR")

__all__ = ["TPUConnectionError", "connect_tpu", "save_options"]


class TPUConnectionError(RuntimeError):
    """TensorFlow could not connect to the TPU; the message says why and what to do."""


def connect_tpu() -> tf.distribute.cluster_resolver.TPUClusterResolver:
    """Connect this process to the TPU VM's chips; return the resolver for ``TPUStrategy``.

    On a TPU VM the chips are local, so the steps fail fast rather than hang (a busy TPU, no TPU
    kernels). ``initialize_tpu_system`` wipes the TPU's memory: call this once per process
    (``get_strategy`` caches its strategy).

    Raises:
        TPUConnectionError: with TensorFlow's first line, what to do, and what happens today.
    """
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as exc:
        raise TPUConnectionError(
            f"TPUClusterResolver(tpu='local') failed: {runtime.error_line(exc)}\n"
            "If another process holds the TPU (one process owns the chips), restart the "
            f"runtime. {runtime.TPU_TODAY}"
        ) from exc
    return resolver


def save_options() -> tf.saved_model.SaveOptions:
    """``tf.saved_model.save`` / ``model.export`` options that write through this host.

    A TPU program's variables live on the TPU; saving a SavedModel to a local path needs the
    host (``/job:localhost``) as the I/O device. Keras 3's ``model.save('x.keras')`` and
    ``save_weights`` copy values to the host themselves and need no options.
    """
    return tf.saved_model.SaveOptions(experimental_io_device="/job:localhost")
