"""Keep native libraries' start-up banners out of notebook outputs (framework-free).

TensorFlow's C++ side writes to the process's stderr (file descriptor 2) before Python's logging
exists, so ``TF_CPP_MIN_LOG_LEVEL`` does not silence all of it: the oneDNN banner ("oneDNN custom
operations are on ...", twice), absl's "All log messages before absl::InitializeLog() ..." and,
on a machine without a GPU, "failed call to cuInit". They say nothing about the lesson and change
from machine to machine. :func:`filtered_stderr` redirects descriptor 2 while a block runs and
then writes back every line that is not one of those known banners, so a real error still shows.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence

__all__ = ["NOISE", "filtered_stderr", "is_noise"]

NOISE: tuple[re.Pattern[str], ...] = (
    re.compile(r"All log messages before absl::InitializeLog\(\) is called"),
    re.compile(r"oneDNN custom operations are on"),
    re.compile(r"failed call to cuInit"),
    re.compile(r"Unable to register cu(DNN|FFT|BLAS) factory"),
    re.compile(r"computation placer already registered"),
    re.compile(r"TF-TRT Warning: Could not find TensorRT"),
)
"""Lines dropped by :func:`filtered_stderr`: banners, never errors of the user's code."""


def is_noise(line: str, patterns: Sequence[re.Pattern[str]] = NOISE) -> bool:
    """Whether ``line`` is one of the known start-up banners."""
    return any(p.search(line) for p in patterns)


@contextlib.contextmanager
def filtered_stderr(patterns: Sequence[re.Pattern[str]] = NOISE) -> Iterator[None]:
    """Run a block with descriptor 2 captured; afterwards write back all but the banner lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode("utf-8", errors="replace").splitlines()
            kept = "".join(f"{ln}\n" for ln in lines if ln.strip() and not is_noise(ln, patterns))
            sys.stderr.write(kept)
            sys.stderr.flush()
