"""Notebook 01's lesson, run: a bare ``TPUClusterResolver()`` raises the ValueError the notebook
names, and ``tpu='local'`` on a machine without TPU kernels gives TensorFlow's own error, cut at a
word (``utils.runtime.try_resolver``, each in a fresh process: this one imports no TensorFlow)."""

from __future__ import annotations

import importlib.util

import pytest

from utils import results, runtime

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"
    ),
    pytest.mark.skipif(
        bool(results.version("tensorflow-tpu")),
        reason="tensorflow-tpu is installed: not the plain-CPU case",
    ),
]


def test_a_bare_resolver_asks_for_a_tpu_name() -> None:
    assert runtime.try_resolver(None, timeout_s=30) == (
        "ValueError: Please provide a TPU Name to connect to."
    )


def test_local_gives_tensorflows_error_cut_at_a_word() -> None:
    error = runtime.try_resolver("local", timeout_s=30)
    assert error and error.startswith("NotFoundError: ") and "'ConfigureDistributedTPU'" in error
    assert len(error) <= 160 and runtime.error_line(error) == error
    assert error.endswith(" ...") and error.removesuffix(" ...")[-1] != " "
