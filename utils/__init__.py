"""Shared code for the "Train faster on TPUs" course.

Notebooks show the idea; this package holds the plumbing. A module's place says what importing
it loads: on a TPU VM the first framework imported owns the TPU, so a notebook imports one
stack's subpackage only, and the core from anywhere.

Core (framework-free, at any depth: ``tests/test_layout.py`` reads every import with ``ast``,
and imports each core module in a fresh interpreter):
- set-up: ``runtime`` (where am I running),
  ``bootstrap`` (the set-up cell: quiet logs, the right packages), ``parameters`` (checked
  notebook parameters: ``Range``, ``Choice``, ``check_params``, ``check_together``),
  ``simulated_devices`` (N XLA devices on one CPU, per-device batch), ``backend_setup`` (Keras
  backend and JAX devices chosen before import, checked after), ``native_logs`` (C++ log noise).
- data and results: ``data`` (CIFAR-10, real or an announced stand-in), ``results`` (results
  files).
- measuring: ``compare`` (interleaved rounds -> a verdict with an interval: every speed claim),
  ``bench``, ``throughput``, ``flops``, ``mfu``, ``roofline``, ``systolic``,
  ``trace_summary``; drawing: ``hardware_plots``, ``training_plots``.
- processes: ``fresh_process`` (the one child-process runner), ``launcher`` (a multi-host job
  rehearsed on 127.0.0.1), ``script_cells`` (``%%save_script``: a visible cell saved as a script
  for a fresh process).

Stacks (importing loads the framework): ``utils.tf`` (TensorFlow), ``utils.keras`` (Keras 3, any
backend), ``utils.torch`` (PyTorch and torch_xla), ``utils.jax`` (JAX).

Maintainer tools (``make run``, ``refresh``, ``twice``, ``test-platforms``) live in ``tests/tools``.
"""

from __future__ import annotations

from pathlib import Path

# The course's root folder (the one holding utils/, notebooks/, tests/): the one definition.
ROOT = Path(__file__).resolve().parent.parent

# The public GitHub repository of the course, as "owner/name". Colab links in README.md and the
# set-up cell of every notebook use it; `make set-repo-url REPO=owner/name` rewrites them all and
# a test checks that they agree with this value.
COURSE_REPO = "train-faster-on-tpus/course"

__all__ = ["COURSE_REPO", "ROOT"]
