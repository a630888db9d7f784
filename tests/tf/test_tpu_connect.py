"""Tests for utils.runtime.try_resolver and utils.tf.tpu_connect: the bounded trial, connecting.

They import TensorFlow (once, in this process). The only address ever contacted is a port on
127.0.0.1 that accepts connections and never answers.
"""

from __future__ import annotations

import socket
import time

import pytest

tf = pytest.importorskip("tensorflow")

from utils import results  # noqa: E402
from utils import runtime as runtime_mod  # noqa: E402
from utils.tf import tpu_connect  # noqa: E402


def test_trial_on_this_cpu_reports_the_real_error():
    """On a machine without TPU kernels, the trial returns TensorFlow's own first line."""
    if results.version("tensorflow-tpu"):
        pytest.skip("tensorflow-tpu is installed: not the plain-CPU case")
    error = runtime_mod.try_resolver("local", timeout_s=30)
    assert error and error.startswith("NotFoundError") and "ConfigureDistributedTPU" in error


def test_a_silent_address_costs_the_trial_not_this_process():
    """An address that accepts TCP and never answers: the trial gives up within its limit."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        start = time.monotonic()
        error = runtime_mod.try_resolver(f"grpc://127.0.0.1:{sock.getsockname()[1]}", timeout_s=3)
    assert error == "no answer within 3 s", error
    assert time.monotonic() - start < 3 + runtime_mod.IMPORT_ALLOWANCE_S
    assert float(tf.reduce_sum(tf.ones((4, 4)))) == 16.0  # this process's TensorFlow still works


def test_connect_tpu_on_this_cpu_says_what_to_do():
    if results.version("tensorflow-tpu"):
        pytest.skip("tensorflow-tpu is installed: not the plain-CPU case")
    with pytest.raises(tpu_connect.TPUConnectionError, match="ConfigureDistributedTPU") as info:
        tpu_connect.connect_tpu()
    assert "restart the" in str(info.value) and "tpu='local'" in str(info.value)
    assert isinstance(info.value.__cause__, tf.errors.NotFoundError)


def test_save_options_use_the_host():
    assert tpu_connect.save_options().experimental_io_device == "/job:localhost"
