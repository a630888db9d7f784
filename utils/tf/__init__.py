"""TensorFlow's part of the course. **Importing any module here imports TensorFlow.**

On a TPU VM the first framework imported owns the TPU, so a notebook imports from one stack's
subpackage only (``utils.tf``, ``utils.torch`` or ``utils.jax``), and the framework-free core
(``utils.runtime``, ``utils.data``, ...) from anywhere.

- ``tpu_connect``: connect this process to the local TPU (``TPUClusterResolver(tpu="local")``).
- ``strategies``: pick a ``tf.distribute`` strategy, compile arguments for it.
- ``pipelines``: ``tf.data`` input pipelines over in-memory arrays.
- ``training``: epoch timing, the replicated custom training loop, per-replica views.
- ``input_bench``: notebook 07's ``tf.data`` lab: its records as TFRecord shards, the per-example
  and per-batch augmentation, and the tuning ladder as data (one technique per step).
- ``peak``: the matmul that MFU divides by under TensorFlow.
"""
