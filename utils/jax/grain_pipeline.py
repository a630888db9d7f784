"""Notebook 07's records, read with Grain (no TensorFlow).

Grain (https://google-grain.readthedocs.io) is the input library of the JAX stack, preinstalled on
Colab's and Kaggle's TPU images. This module's functions are plain numpy, used inside Grain
pipelines, so it lives in :mod:`utils.jax` with them.

- :func:`encode` / :func:`decode`: one record = one label byte + the image as PNG.
- :class:`SlowSource`: a data source whose every read waits, like remote storage.
- :func:`augment_batch`: random crop resized back bilinearly, random flip, uint8 in and out
  (the model scales to [0, 1] on the device: a quarter of float32's bytes on the wire);
  ``utils.tf.input_bench.augment`` is its TensorFlow twin.
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SlowSource", "augment_batch", "decode", "encode"]


def encode(image: np.ndarray, label: int) -> bytes:
    """One record: the label (0-255) as one byte, then the ``uint8`` image as PNG."""
    from PIL import Image  # Pillow ships with matplotlib, a core dependency

    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG")
    return bytes([int(label)]) + out.getvalue()


def decode(record: bytes) -> dict[str, Any]:
    """``image`` uint8 ``(H, W, C)`` and ``label`` of one :func:`encode` record."""
    from PIL import Image

    with Image.open(io.BytesIO(record[1:])) as img:
        image = np.asarray(img, dtype=np.uint8)
    return {"image": image[..., None] if image.ndim == 2 else image, "label": record[0]}


class SlowSource:
    """Grain's data-source protocol over ``records``, each read waiting ``latency_s`` first."""

    def __init__(self, records: Sequence[bytes], latency_s: float) -> None:
        self.records, self.latency_s = records, latency_s

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> bytes:
        time.sleep(self.latency_s)
        return self.records[index]

    def __repr__(self) -> str:
        return f"SlowSource({len(self)} records, {1e3 * self.latency_s:g} ms per read)"


def augment_batch(
    batch: dict[str, np.ndarray], rng: np.random.Generator, *, min_area: float = 0.6
) -> dict[str, np.ndarray]:
    """Random crop (``min_area``-100 % of the area) resized back bilinearly, random flip.

    Works on a uint8 batch ``(B, H, W, C)`` and returns uint8 (rounded); box edges map to pixel
    centres, as in ``tf.image.crop_and_resize``.
    """
    images = batch["image"].astype(np.float32)
    b, h, w, _ = images.shape
    area = rng.uniform(min_area, 1.0, b)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3), b))
    bh = np.minimum(np.sqrt(area / aspect), 1.0)
    bw = np.minimum(np.sqrt(area * aspect), 1.0)
    y0 = rng.uniform(size=b) * (1.0 - bh)
    x0 = rng.uniform(size=b) * (1.0 - bw)
    ys = (y0[:, None] + bh[:, None] * np.linspace(0, 1, h)[None]) * (h - 1)  # (B, H)
    xs = (x0[:, None] + bw[:, None] * np.linspace(0, 1, w)[None]) * (w - 1)  # (B, W)
    yl, xl = np.floor(ys).astype(int), np.floor(xs).astype(int)
    yh, xh = np.minimum(yl + 1, h - 1), np.minimum(xl + 1, w - 1)
    fy, fx = (ys - yl)[:, :, None, None], (xs - xl)[:, None, :, None]
    idx = np.arange(b)[:, None, None]

    def at(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        return images[idx, yy[:, :, None], xx[:, None, :]]

    top = at(yl, xl) * (1 - fx) + at(yl, xh) * fx
    bottom = at(yh, xl) * (1 - fx) + at(yh, xh) * fx
    out = top * (1 - fy) + bottom * fy
    flip = rng.uniform(size=b) < 0.5
    out[flip] = out[flip, :, ::-1]
    image = np.clip(np.round(out), 0, 255).astype(np.uint8)
    return {"image": image, "label": batch["label"].astype(np.int32)}
