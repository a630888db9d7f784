"""Shared code for the "Train faster on TPUs" course.

Notebooks show the idea; this package holds the plumbing. A module's place says what importing
it loads: on a TPU VM the first framework imported owns the TPU, so a notebook imports one
stack's subpackage only, and the core from anywhere.

Core (framework-free; a test imports each in a fresh interpreter and checks):
- ``runtime``: where am I running (platform, accelerator, TPU kind).
- ``tpu_address``: the one grammar for TPU addresses (``local``, ``host:port``, a name).
- ``bootstrap``: the set-up cell's work (quiet logs, what each runtime can run, parameter checks).
- ``data``: CIFAR-10 (real, verified; or an announced stand-in).
- ``bench``, ``flops``, ``mfu``, ``systolic``, ``hardware_plots``: measuring hardware, counting
  FLOPs, model FLOPs utilisation, and drawing them.
- ``timeline``, ``training_plots``, ``results``, ``fresh_process``: timelines, plots, results
  files, run-once-per-process work.

Stacks (importing loads the framework): ``utils.tf`` (TensorFlow), ``utils.keras`` (Keras 3, any
backend), ``utils.torch`` (PyTorch and torch_xla), ``utils.jax`` (JAX).

Maintainer tools, never imported by notebooks: ``utils.tools`` (run_course, report, nbtools).
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
