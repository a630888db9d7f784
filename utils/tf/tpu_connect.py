"""Connect TensorFlow to a TPU VM's chips, trying first in a fresh process (imports TensorFlow).

**Importing this module imports TensorFlow.** On a TPU VM the first framework a process starts
on the chips owns them (libtpu allows one process), so import it only in a notebook that trains
with TensorFlow; ``utils.runtime`` says what the machine has without importing anything.

- :func:`try_resolver`: ``TPUClusterResolver(tpu=...)``, ``experimental_connect_to_cluster`` and
  ``initialize_tpu_system`` in a fresh process, bounded in time: a TPU that never answers costs
  that process, not this one. It returns the error's first line, or None.
- :func:`connect_tpu`: the same steps in this process once the trial succeeded.
- :data:`TODAY`: what became of the old ``COLAB_TPU_ADDR`` first cell.
- :func:`save_options`: SavedModel options that let a TPU program write to the local disk.

Choosing a ``tf.distribute`` strategy is :mod:`utils.tf.strategies`.
"""

from __future__ import annotations

from utils import fresh_process, native_logs

with native_logs.filtered_stderr():  # the oneDNN banner and cuInit line, not errors
    import tensorflow as tf

    tf.config.list_physical_devices()  # device discovery: where the cuInit line is written

# Keep TensorFlow's Python INFO lines out of notebook output; warnings and errors still show.
tf.get_logger().setLevel("ERROR")

__all__ = ["TODAY", "TPUConnectionError", "connect_tpu", "save_options", "try_resolver"]

IMPORT_ALLOWANCE_S = 120.0
"""Seconds the trial process gets to import TensorFlow (slow on a busy small machine), on top of
the limit for the TPU steps."""

TODAY = (
    "COLAB_TPU_ADDR held the gRPC address of a TPU Node, a TPU on another machine; Google retired "
    "TPU Nodes (end of life 2025-04-25) and no runtime sets it now. Today's TPUs are TPU VMs: the "
    "chips are on the notebook's own host, and TensorFlow connects with "
    "TPUClusterResolver(tpu='local'). The free TPUs (Colab, Kaggle) ship JAX and PyTorch/XLA, not "
    "TensorFlow's TPU build (tensorflow-tpu): use Keras 3 on JAX there (notebook 02)."
)

# The trial: the TPU steps in a thread, so the process answers within the limit even when they
# hang; os._exit ends it with that thread still waiting.
_TRIAL = """
import json, os, sys, threading
import tensorflow as tf

result = {"error": f"no answer within {sys.argv[2]} s"}

def attempt():
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=sys.argv[1])
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        result["error"] = None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        result["error"] = f"{type(exc).__name__}: {first[:300]}"

thread = threading.Thread(target=attempt, daemon=True)
thread.start()
thread.join(float(sys.argv[2]))
print("RESULT " + json.dumps(result), flush=True)
os._exit(0)
"""


class TPUConnectionError(RuntimeError):
    """TensorFlow could not connect to the TPU; the message says why and what to do."""


def try_resolver(tpu: str = "local", *, timeout_s: float = 60.0) -> str | None:
    """Resolve, connect to and initialise ``tpu`` in a fresh process; None if that worked.

    The TPU steps get ``timeout_s``, importing TensorFlow :data:`IMPORT_ALLOWANCE_S` more.
    Otherwise returns the error's first line (``"NotFoundError: ..."``, ``"no answer within
    5.0 s"``). This process's TensorFlow is not touched, whatever happens there.
    """
    try:
        done = fresh_process.run_python(
            ["-c", _TRIAL, tpu, str(timeout_s)],
            env={"TF_CPP_MIN_LOG_LEVEL": "3"},
            timeout_s=timeout_s + IMPORT_ALLOWANCE_S,
        )
        return fresh_process.result_of(done.stdout)["error"]
    except fresh_process.FreshProcessError as exc:
        return f"the trial process failed: {str(exc).strip().splitlines()[-1]}"


def connect_tpu(*, timeout_s: float = 60.0) -> tf.distribute.cluster_resolver.TPUClusterResolver:
    """Connect this process to the TPU VM's chips; return the resolver for ``TPUStrategy``.

    The steps run first in a fresh process (:func:`try_resolver`): if they fail or time out
    there, :class:`TPUConnectionError` says why and this process is untouched (a CPU fallback
    still works). ``initialize_tpu_system`` wipes the TPU's memory: call this once per process
    (``get_strategy`` caches its strategy).
    """
    error = try_resolver("local", timeout_s=timeout_s)
    if error:
        raise TPUConnectionError(
            f"TPUClusterResolver(tpu='local') failed in a trial process: {error}\n"
            "If another process holds the TPU (one process owns the chips), restart the "
            f"runtime. {TODAY}"
        )
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return resolver


def save_options() -> tf.saved_model.SaveOptions:
    """``tf.saved_model.save`` / ``model.export`` options that write through this host.

    A TPU program's variables live on the TPU; saving a SavedModel to a local path needs the
    host (``/job:localhost``) as the I/O device. Keras 3's ``model.save('x.keras')`` and
    ``save_weights`` copy values to the host themselves and need no options.
    """
    return tf.saved_model.SaveOptions(experimental_io_device="/job:localhost")
