"""Per-host input files (notebook 08): a data set written as shard files, each host reading its own.

:func:`write_shards` lays ``n`` examples out as ``files`` files, ``shard-FFFFF-of-NNNNN.npz``,
each holding ``ids``, ``images``, ``labels``. File ``f`` holds slot ``f`` of every global batch
(global batch ``s`` is examples ``s*B ... s*B+B-1``; file ``f`` has rows ``f*B/F ... (f+1)*B/F-1``
of each), so when ``P`` processes each read ``F/P`` consecutive files, process ``p``'s local
batch is rows ``p*B/P ... (p+1)*B/P-1`` of the global batch: the same global batch for any
process count (2 processes x 4 devices compute what 1 x 8 computes), and every example of an
epoch is read exactly once, by exactly one process.

(Grain's ``ShardByJaxProcess`` and ``tf.data``'s ``shard(process_count, process_index)`` also
give each process its own share of the examples, but which examples meet in a global batch then
depends on the process count.) :func:`my_files` is the reader's rule. Numpy only; no JAX import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_NAME = "shard-{:05d}-of-{:05d}.npz"
_NAME_RE = re.compile(r"^shard-(\d{5})-of-(\d{5})\.npz$")


def write_shards(
    directory: str | Path,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    global_batch: int,
    files: int,
) -> list[Path]:
    """Write ``images``/``labels`` as ``files`` shard files in ``directory``; their paths.

    Needs ``len(images)`` to be a multiple of ``global_batch`` (whole epochs) and
    ``global_batch`` a multiple of ``files`` (each file holds the same slot of every batch).
    """
    n = len(images)
    if len(labels) != n:
        raise ValueError(f"{n} images but {len(labels)} labels")
    if global_batch < 1 or n % global_batch:
        raise ValueError(f"{n} examples are not a whole number of global batches of {global_batch}")
    if files < 1 or global_batch % files:
        raise ValueError(f"global batch {global_batch} does not split into {files} equal slots")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = np.arange(n)
    slot = global_batch // files
    paths = []
    for f in range(files):
        mine = ids[(ids % global_batch) // slot == f]  # batch 0's slot f, batch 1's slot f, ...
        path = directory / _NAME.format(f, files)
        np.savez(path, ids=mine, images=images[mine], labels=labels[mine])
        paths.append(path)
    return paths


def my_files(names: Sequence[str], process_index: int, process_count: int) -> list[str]:
    """This process's consecutive share of the shard files (sorted by name); a clear error if
    the files are not a complete set or do not split evenly over the processes."""
    found = sorted(
        (int(m.group(1)), int(m.group(2)), name)
        for name in names
        if (m := _NAME_RE.match(Path(name).name))
    )
    if not found:
        raise FileNotFoundError("no shard-FFFFF-of-NNNNN.npz files")
    total = found[0][1]
    if [f for f, _, _ in found] != list(range(total)) or any(t != total for _, t, _ in found):
        raise ValueError(f"incomplete shard set: {[Path(n).name for *_, n in found]}")
    if total % process_count:
        raise ValueError(f"{total} files do not split evenly over {process_count} processes")
    per = total // process_count
    return [name for *_, name in found[process_index * per : (process_index + 1) * per]]
