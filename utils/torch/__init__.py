"""PyTorch's part of the course. Importing ``models`` or ``xla`` imports torch (``xla``: torch_xla
too); keep them out of TensorFlow and JAX processes: the first framework owns the TPU.

- ``models``: the seed's CNN in PyTorch.
- ``xla``: PyTorch/XLA teaching helpers (the torch/torch_xla version check and the PJRT device,
  run before torch_xla is imported; counters, loaders, the train loop, a steps runner).
- ``launch``: running torch_xla scripts in a fresh process and reading their debug output.
  Framework-free.
- ``spmd_train``: notebook 06's SPMD script for a fresh process, run as a file, never imported;
  the same code as the notebook's ``%%save_script`` cell (a test), so that on a TPU the notebook
  can start it before its kernel opens the chips.
"""
