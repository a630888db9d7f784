"""``.npz`` checkpoints written atomically: a kill during a write never leaves a checkpoint that
loads as complete.

:func:`save_checkpoint` writes to a temporary file in the same folder, flushes and fsyncs it, then
renames it with :func:`os.replace` (atomic on POSIX); :func:`latest_checkpoint` reads only files
with a checkpoint's name, so a reader sees the old set of checkpoints or the new one. Notebook 08
shows :func:`save_checkpoint`'s source as the pattern to copy. Framework-free (numpy only).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CheckpointError", "latest_checkpoint", "save_checkpoint"]

_CKPT_RE = re.compile(r"^ckpt-(\d{8})\.npz$")


class CheckpointError(RuntimeError):
    """A checkpoint file disagrees with its name."""


def save_checkpoint(
    directory: str | os.PathLike[str], step: int, arrays: Mapping[str, Any]
) -> Path:
    """Write ``arrays`` (name -> numpy array) as ``ckpt-<step>.npz``, atomically.

    The data goes to a temporary file in the same directory, is flushed and fsynced, then
    renamed with :func:`os.replace` (atomic on POSIX): a reader sees the old set of
    checkpoints or the new one, never a half-written file under a checkpoint name.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"ckpt-{int(step):08d}.npz"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-ckpt-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __step__=np.asarray(int(step)), **dict(arrays))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return final


def latest_checkpoint(directory: str | os.PathLike[str]) -> tuple[int, dict[str, Any]] | None:
    """``(step, arrays)`` of the newest complete checkpoint in ``directory``, or ``None``.

    Temporary files of an interrupted write are ignored (they never carry a checkpoint name).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return None
    found = sorted(
        (int(m.group(1)), p) for p in directory.iterdir() if (m := _CKPT_RE.match(p.name))
    )
    if not found:
        return None
    step, path = found[-1]
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "__step__"}
        if int(data["__step__"]) != step:
            raise CheckpointError(f"{path} says step {int(data['__step__'])}, its name says {step}")
    return step, arrays
