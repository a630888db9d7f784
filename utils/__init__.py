"""Shared code for the "Train faster on TPUs" course.

Notebooks show the idea; this package holds the plumbing. Importing it (or any of its
submodules that say so) never imports TensorFlow, PyTorch or JAX: on a TPU VM, importing a
framework grabs the TPU, so only the notebook that trains may do it.

Modules, one concern each:
- ``runtime``: where am I running (platform, accelerator, TPU kind), without importing a framework.
- ``bootstrap``: the set-up cell's work (quiet logs, install only what Colab/Kaggle lack).
- ``tf_tpu``: connect to a TPU and pick a ``tf.distribute`` strategy (imports TensorFlow).
- ``data``: CIFAR-10 (real, from Keras' cache or a verified download; or an announced stand-in).
- ``models``, ``training``, ``training_plots``: the seed's Keras CNN, timing, custom loops, plots.
- ``pipelines``, ``tfrecords``, ``timeline``, ``bench_pipelines``: tf.data input pipelines,
  sharded TFRecords, per-element timelines, and the ``make bench`` benchmark.
- ``bench``, ``flops``, ``systolic``, ``hardware_plots``: measuring hardware and drawing it.
- ``torch_models``, ``xla``: the seed's CNN in PyTorch and PyTorch/XLA helpers.
- ``results``, ``report``, ``run_course``, ``nbtools``: batch runs, results files, reports.
"""

from __future__ import annotations

# The public GitHub repository of the course, as "owner/name". Colab links in README.md and the
# set-up cell of every notebook use it; `make set-repo-url REPO=owner/name` rewrites them all and
# a test checks that they agree with this value.
COURSE_REPO = "train-faster-on-tpus/course"

__all__ = ["COURSE_REPO"]
