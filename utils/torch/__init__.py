"""PyTorch's part of the course. **Importing any module here imports torch** (and ``xla``,
torch_xla). Keep it out of TensorFlow and JAX processes: the first framework owns the TPU.

- ``models``: the seed's CNN in PyTorch.
- ``xla``: PyTorch/XLA teaching helpers (device choice, counters, loaders, train loop).
"""
