"""Tests for utils.native_logs: banners written to descriptor 2 are dropped, other lines kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from utils import native_logs


def test_is_noise_knows_the_banners_and_nothing_else():
    assert native_logs.is_noise("I0000 port.cc:153] oneDNN custom operations are on. You may ...")
    assert native_logs.is_noise("E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL")
    assert not native_logs.is_noise("ValueError: shapes do not match")


def test_filtered_stderr_drops_banners_written_by_native_code():
    code = textwrap.dedent(
        """
        import os
        from utils.native_logs import filtered_stderr
        with filtered_stderr():
            os.write(2, b"I0000 port.cc:153] oneDNN custom operations are on.\\n")
            os.write(2, b"a real problem\\n")
        os.write(2, b"after\\n")
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["a real problem", "after"]
