"""PyTorch's part of the course. Importing ``models`` or ``xla`` imports torch (``xla``: torch_xla
too); keep them out of TensorFlow and JAX processes: the first framework owns the TPU.

- ``models``: the seed's CNN in PyTorch.
- ``xla``: PyTorch/XLA teaching helpers (device choice, counters, loaders, train loop, and the
  checks that must pass before the XLA runtime starts: simulated devices, SPMD).
- ``launch``: running torch_xla scripts in a fresh process and reading their output (debug
  output, profiler traces). Framework-free.
- ``stacks``: which PyTorch-on-TPU stack is installed and whether it can work (torch/torch_xla
  match, TorchTPU). Framework-free.
- ``spmd_train``, ``multi_process``, ``cached_step``: notebook 06's scripts for fresh processes
  (SPMD, the multi-process recipe, the persistent cache), run as files, never imported; the same
  code as the notebook's ``%%save_script`` cells (a test), so that on a TPU the notebook can start
  them before its kernel opens the chips.
"""
