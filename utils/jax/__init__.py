"""JAX's part of the course. **Importing any module here imports JAX** (and optax where used):
on a CPU, ask for simulated devices with ``utils.simulated_devices.request(...)`` *before* the
first import.

- ``cnn``: the seed's CIFAR-10 CNN in plain JAX (``jax.lax`` convolutions and pooling),
  ``init_params``, ``apply``, ``loss_fn`` and ``make_train_step`` (``jax.value_and_grad`` + optax).
- ``compiles``: count compilations with JAX's ``jax_log_compiles`` log records and a jitted
  function's cache size.
- ``peak``: the jitted matmul that MFU divides by (timed by ``utils.mfu.measured_peak``).
- ``speed_check``: ``speed_check(model, data)``, a few measured probes of a learner's Keras model
  on JAX and a ranked to-do list with the gain predicted on a v5e chip.
- ``ladder_bench``: ``make bench``'s JAX training ladder (``utils.keras.ladder``) with verdicts.
- ``grain_pipeline``: notebook 07's Grain pipeline over ArrayRecord shards, uint8 batches on the
  wire (``import grain`` imports JAX).
- ``multihost_*``: the multi-host workers of notebook 08 (``multihost_worker``, ``multihost_keras``,
  ``multihost_allreduce``) and how they join a job and find their shard files (``multihost_env``:
  imports JAX only when joining).

Framework-free helpers the JAX notebooks use live in the core: ``utils.simulated_devices``
(``XLA_FLAGS`` before import, device counts, batch divisibility) and ``utils.trace_summary``
(top ops of a profiler trace file, HLO op shapes).
"""
