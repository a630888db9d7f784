"""CIFAR-10 for the course: the real data set when it is available, an announced stand-in when not.

Framework-free (numpy only), so the PyTorch notebooks can use it without importing TensorFlow
(on a TPU VM, importing TensorFlow grabs the TPU); no ``source`` imports Keras either.

Where the real data comes from, in order:

1. Keras' download cache (``$KERAS_HOME/datasets`` or ``~/.keras/datasets``), in any of the
   layouts Keras versions have used: the extracted ``cifar-10-batches-py`` folder or the
   ``.tar.gz`` archive. It is parsed here with :mod:`pickle` (CIFAR-10's "python version":
   ``data_batch_1`` .. ``data_batch_5``, ``test_batch``, ``batches.meta``; each batch holds
   ``data``, uint8 ``(N, 3072)`` rows in channel-major order, and ``labels``) and verified:
   an archive's SHA-256 is checked on every load (under a second), a folder's format and
   labels are checked, and a damaged cache raises :class:`CifarFormatError` saying which file
   to delete so that the next load downloads it again. When the cache holds fewer images than
   ``subset`` asks for, ``CifarData.source`` says so ("5,000 of the 8,000 training images
   asked for") and the shortfall is printed.
2. A download from the CIFAR-10 home page into that same cache, checked against the SHA-256 that
   Keras' own loader uses, when the network is reachable (``offline=False``, or a bounded probe).

``source="keras"`` is ``"cifar10"``: the files the seed's ``keras.datasets.cifar10.load_data()``
downloads and reads, found and read here as above.

Offline means reproducible: with ``offline=True`` or ``COURSE_OFFLINE=1`` (``make test``, ``make
refresh``, CI, this course's reference machine) ``source="auto"`` returns a deterministic synthetic
stand-in with the same shapes, dtypes and label range, even when a real copy is cached, so stored
outputs do not depend on what a machine happens to have downloaded. ``source="cifar10"`` uses the
cached real data offline too (it only skips the download). Without a cache or network, ``auto``
falls back to the same stand-in. ``CifarData.source`` says which one you got; notebooks print it,
so nobody mistakes the stand-in for CIFAR-10.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import socket
import tarfile
import threading
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASS_NAMES: tuple[str, ...] = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
NUM_TRAIN, NUM_TEST = 50_000, 10_000
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
# The SHA-256 that keras.datasets.cifar10.load_data() checks the download against.
CIFAR10_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
BATCH_DIR = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
META = "batches.meta"
# Folder and archive names that Keras 2 and Keras 3 releases have used under .../datasets.
CACHE_DIRS = (
    BATCH_DIR,
    f"cifar-10-batches-py-target/{BATCH_DIR}",
    f"cifar-10-batches-py_extracted/{BATCH_DIR}",
)
CACHE_ARCHIVES = (
    "cifar-10-python.tar.gz",
    "cifar-10-batches-py.tar.gz",
    "cifar-10-batches-py-target_archive",
)
# What each stand-in class looks like (shape family x colour family).
STANDIN_PATTERNS: tuple[str, ...] = (
    "warm disc",
    "cool disc",
    "warm square",
    "cool square",
    "warm ring",
    "cool ring",
    "warm cross",
    "cool cross",
    "warm stripes",
    "cool stripes",
)


class CifarFormatError(ValueError):
    """A CIFAR-10 file is missing, truncated or not in CIFAR-10's format (the message names it)."""


def _remedy(path: Path | str) -> str:
    what = "the folder" if Path(path).is_dir() else "the file"
    return (
        f"The cached copy is damaged or incomplete: delete {what} {path} and re-download "
        "(load_cifar10 downloads it again when the network is on)."
    )


@dataclass(frozen=True)
class CifarData:
    """Train and test arrays plus a sentence saying what they are.

    Images are NHWC ``uint8`` (or ``float32`` in [0, 1] with ``normalize=True``), labels ``int64``
    of shape ``(N,)`` with values 0-9.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: tuple[str, ...]
    source: str
    is_standin: bool
    shortfall: str = ""  # "" or a sentence: fewer images loaded than asked for

    @property
    def loaded(self) -> tuple[int, int]:
        """(train, test) images actually loaded."""
        return len(self.x_train), len(self.x_test)

    def __repr__(self) -> str:  # arrays are too long to print usefully
        return (
            f"CifarData(train={self.x_train.shape} {self.x_train.dtype}, "
            f"test={self.x_test.shape} {self.x_test.dtype}, is_standin={self.is_standin})"
        )


# --------------------------------------------------------------------------------------------
# Parsing CIFAR-10's python format without a framework
# --------------------------------------------------------------------------------------------


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds numpy arrays (CIFAR files hold nothing else)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 store bytes
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR file")


def _unpickle(raw: bytes, name: str) -> dict[str, object]:
    """Decode one CIFAR pickle (written by Python 2: byte-string keys) into a str-keyed dict."""
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as err:  # truncated or corrupt: say which file
        raise CifarFormatError(f"{name}: cannot unpickle ({type(err).__name__}: {err})") from err
    if not isinstance(obj, dict):
        raise CifarFormatError(f"{name}: expected a dict, found {type(obj).__name__}")
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def parse_batch(raw: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse one CIFAR-10 batch file's bytes into NHWC uint8 images and int64 labels."""
    d = _unpickle(raw, name)
    if "data" not in d or "labels" not in d:
        raise CifarFormatError(f"{name}: missing 'data' or 'labels' (keys: {sorted(d)})")
    data = np.asarray(d["data"])
    labels = np.asarray(d["labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise CifarFormatError(
            f"{name}: data is {data.dtype}{data.shape}, expected uint8 (N, 3072)"
        )
    if labels.shape != (data.shape[0],):
        raise CifarFormatError(f"{name}: {labels.shape[0]} labels for {data.shape[0]} images")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise CifarFormatError(f"{name}: labels outside 0-9 ({labels.min()}..{labels.max()})")
    # Each row is the red plane, then green, then blue, each 32x32 row-major: CHW -> HWC.
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def _assemble(read: Callable[[str], bytes], where: str) -> tuple[np.ndarray, ...]:
    """Read the six batches and the metadata through ``read(name)`` and check them."""
    meta = _unpickle(read(META), f"{where}/{META}")
    names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in meta["label_names"])
    if names != CLASS_NAMES:
        raise CifarFormatError(f"{where}/{META}: label names {names} are not CIFAR-10's")
    parts = [parse_batch(read(b), f"{where}/{b}") for b in TRAIN_BATCHES]
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    x_test, y_test = parse_batch(read(TEST_BATCH), f"{where}/{TEST_BATCH}")
    return x_train, y_train, x_test, y_test


def read_batches_dir(path: str | os.PathLike[str]) -> tuple[np.ndarray, ...]:
    """Parse an extracted ``cifar-10-batches-py`` folder: ``(x_train, y_train, x_test, y_test)``."""
    folder = Path(path)

    def read(name: str) -> bytes:
        f = folder / name
        if not f.is_file():
            raise CifarFormatError(f"{f}: file missing from the CIFAR-10 folder")
        return f.read_bytes()

    return _assemble(read, str(folder))


def read_archive(path: str | os.PathLike[str]) -> tuple[np.ndarray, ...]:
    """Parse CIFAR-10's ``cifar-10-python.tar.gz`` without extracting it to disk."""
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError) as err:
        raise CifarFormatError(f"{path}: not a readable tar archive ({err})") from err
    with tar:

        def read(name: str) -> bytes:
            try:
                member = tar.extractfile(f"{BATCH_DIR}/{name}")
                if member is None:
                    raise KeyError(name)
                return member.read()
            except KeyError as err:
                raise CifarFormatError(f"{path}: {BATCH_DIR}/{name} missing") from err
            except (tarfile.TarError, OSError, EOFError) as err:
                raise CifarFormatError(f"{path}: {BATCH_DIR}/{name} unreadable ({err})") from err

        return _assemble(read, f"{path}:{BATCH_DIR}")


def keras_datasets_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Keras' download cache: ``<cache_dir or $KERAS_HOME or ~/.keras>/datasets``."""
    base = cache_dir or os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")
    return Path(os.path.expanduser(str(base))) / "datasets"


def find_cached(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The first CIFAR-10 folder (preferred) or archive found in Keras' cache, else ``None``."""
    root = keras_datasets_dir(cache_dir)
    for rel in CACHE_DIRS:
        if (root / rel / TEST_BATCH).is_file():
            return root / rel
    for rel in CACHE_ARCHIVES:
        if (root / rel).is_file():
            return root / rel
    return None


def sha256_of(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """SHA-256 of a file, read in 1 MiB chunks (CIFAR-10's 170 MB: under a second)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify_archive(path: str | os.PathLike[str]) -> None:
    """Raise :class:`CifarFormatError` (with the remedy) unless the archive is CIFAR-10's own."""
    try:
        got = sha256_of(path)
    except OSError as err:
        raise CifarFormatError(f"{path}: cannot read ({err}). {_remedy(path)}") from err
    if got != CIFAR10_SHA256:
        raise CifarFormatError(
            f"{path}: SHA-256 {got[:16]}... is not CIFAR-10's ({CIFAR10_SHA256[:16]}...). "
            f"{_remedy(path)}"
        )


def read_cached(path: Path) -> tuple[np.ndarray, ...]:
    """Parse what :func:`find_cached` found (a folder or an archive; an archive's SHA-256 is
    verified first). A damaged cache raises :class:`CifarFormatError` with the remedy."""
    if path.is_dir():
        try:
            return read_batches_dir(path)
        except CifarFormatError as err:
            raise CifarFormatError(f"{err} {_remedy(path)}") from err
    verify_archive(path)
    try:
        return read_archive(path)
    except CifarFormatError as err:  # only possible if CIFAR10_SHA256 itself is replaced
        raise CifarFormatError(f"{err} {_remedy(path)}") from err


# --------------------------------------------------------------------------------------------
# Network: a bounded reachability probe and a verified download
# --------------------------------------------------------------------------------------------


def network_available(
    host: str = "www.cs.toronto.edu", port: int = 443, timeout_s: float = 3.0
) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout_s`` (DNS included).

    Runs in a daemon thread because name resolution ignores socket timeouts, so this never
    blocks longer than ``timeout_s``.
    """
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return bool(result and result[0])


def download_cifar10(
    cache_dir: str | os.PathLike[str] | None = None, timeout_s: float = 60.0
) -> Path:
    """Download CIFAR-10's archive into Keras' cache, verify its SHA-256, return its path."""
    target = keras_datasets_dir(cache_dir) / CACHE_ARCHIVES[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(CIFAR10_URL, timeout=timeout_s) as resp, open(tmp, "wb") as out:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != CIFAR10_SHA256:
            raise CifarFormatError(f"{CIFAR10_URL}: SHA-256 mismatch (download corrupted)")
        os.replace(tmp, target)
    except BaseException:  # network error, bad checksum, Ctrl-C: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise
    return target


def _declared_offline(offline: bool | None) -> bool | None:
    """Explicit ``offline``, then ``$COURSE_OFFLINE`` (1/true/yes, 0/false/no), else ``None``."""
    if offline is not None:
        return offline
    env = os.environ.get("COURSE_OFFLINE", "").strip().lower()
    if env in {"1", "true", "yes"}:
        return True
    if env in {"0", "false", "no"}:
        return False
    return None


def _is_offline(offline: bool | None, timeout_s: float) -> bool:
    """:func:`_declared_offline`, or when nothing is declared, a bounded network probe."""
    declared = _declared_offline(offline)
    if declared is not None:
        return declared
    return not network_available(timeout_s=timeout_s)


# --------------------------------------------------------------------------------------------
# The offline stand-in
# --------------------------------------------------------------------------------------------


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectorised HSV (all in [0, 1]) to RGB, shape (..., 3)."""
    i = np.floor(h * 6.0).astype(int) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros((*h.shape, 3), dtype=np.float32)
    for k, (r, g, b) in enumerate(choices):
        sel = i == k
        out[sel] = np.stack([r[sel], g[sel], b[sel]], axis=-1)
    return out


def _shape_masks(kind: np.ndarray, cx, cy, r, angle, yy, xx) -> np.ndarray:
    """Soft masks (N, 32, 32) in [0, 1] of shape ``kind`` (0 disc .. 4 stripes) per image."""
    dx, dy = xx[None] - cx[:, None, None], yy[None] - cy[:, None, None]
    c, s = np.cos(angle)[:, None, None], np.sin(angle)[:, None, None]
    u, w = c * dx + s * dy, -s * dx + c * dy  # rotated coordinates
    rr = r[:, None, None]
    dist = np.sqrt(dx**2 + dy**2)
    box = np.maximum(np.abs(u), np.abs(w))
    masks = np.stack(
        [
            dist < rr,  # disc
            box < rr * 0.85,  # square (rotated)
            np.abs(dist - rr) < rr * 0.28,  # ring
            ((np.abs(u) < rr * 0.3) | (np.abs(w) < rr * 0.3)) & (box < rr),  # cross
            (np.sin(u * 2.2) > 0) & (box < rr * 1.1),  # stripes
        ]
    ).astype(np.float32)
    return np.take_along_axis(masks, kind[None, :, None, None], axis=0)[0]


def _random_masks(
    rng: np.random.Generator,
    kind: np.ndarray,
    *,
    centre: tuple[float, float],
    radius: tuple[float, float],
    grid: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """Masks of shapes ``kind`` at a random centre (x, y), radius and rotation (draws in order)."""
    n = len(kind)
    cx, cy = rng.uniform(*centre, n), rng.uniform(*centre, n)
    r, angle = rng.uniform(*radius, n), rng.uniform(0, np.pi, n)
    return _shape_masks(kind, cx, cy, r, angle, *grid)


def make_standin(n: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` deterministic, class-balanced synthetic 32x32 RGB images and their labels.

    Class ``k`` is a shape family (disc, square, ring, cross, stripes: ``k // 2``) in a colour
    family (warm or cool: ``k % 2``) at a random position, size, rotation and hue, on a noisy
    random background with a random distractor shape of a random kind and colour. Learnable by a
    small CNN, but not trivially (see ``STANDIN_PATTERNS``).
    """
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % 10).astype(np.int64)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)
    # Background: a random dark-to-mid colour with a gentle gradient.
    bg = rng.uniform(0.1, 0.6, size=(n, 1, 1, 3)).astype(np.float32)
    grad = rng.uniform(-0.2, 0.2, size=(n, 1, 1, 3)).astype(np.float32) * (
        xx[None, :, :, None] / 31
    )
    img = bg + grad
    # Distractor: any shape, any hue, smaller, dimmer.
    d_kind = rng.integers(0, 5, n)
    d_mask = _random_masks(rng, d_kind, centre=(4, 28), radius=(3, 6), grid=(yy, xx))
    d_rgb = _hsv_to_rgb(rng.uniform(0, 1, n), rng.uniform(0.3, 1, n), rng.uniform(0.4, 0.9, n))
    alpha_d = rng.uniform(0.4, 0.8, (n, 1, 1, 1)).astype(np.float32)
    img = (
        img * (1 - alpha_d * d_mask[..., None]) + alpha_d * d_mask[..., None] * d_rgb[:, None, None]
    )
    # The object: shape from the class, hue from its colour family (warm 330-60 deg, cool 150-270).
    kind = labels // 2
    warm = labels % 2 == 0
    hue = np.where(warm, rng.uniform(-0.08, 0.17, n) % 1.0, rng.uniform(0.42, 0.75, n))
    rgb = _hsv_to_rgb(hue, rng.uniform(0.45, 1, n), rng.uniform(0.55, 1, n))
    mask = _random_masks(rng, kind, centre=(9, 23), radius=(5, 11), grid=(yy, xx))
    alpha = rng.uniform(0.6, 1.0, (n, 1, 1, 1)).astype(np.float32)
    img = img * (1 - alpha * mask[..., None]) + alpha * mask[..., None] * rgb[:, None, None]
    img += rng.normal(0, 0.08, size=img.shape).astype(np.float32)
    images = np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)
    return images, labels


# --------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------


def _sizes(subset: int | tuple[int, int] | None) -> tuple[int, int]:
    """``subset`` -> (train, test) sizes: None = all, int = train size (test a fifth, >= 1000)."""
    if subset is None:
        return NUM_TRAIN, NUM_TEST
    if isinstance(subset, tuple):
        n_train, n_test = subset
    else:
        n_train, n_test = int(subset), min(NUM_TEST, max(1000, int(subset) // 5))
    if not (0 < n_train <= NUM_TRAIN and 0 < n_test <= NUM_TEST):
        raise ValueError(f"subset={subset!r}: sizes must be in 1..{NUM_TRAIN} and 1..{NUM_TEST}")
    return n_train, n_test


def to_float(images: np.ndarray) -> np.ndarray:
    """uint8 images (0-255) -> float32 in [0, 1], what the course's models take as input.

    float32, not the float64 that ``images / 255.0`` gives: half the bytes, and the dtype a
    TPU computes in.
    """
    return images.astype(np.float32) / np.float32(255.0)


def _finish(arrays: Iterable[np.ndarray], sizes: tuple[int, int], normalize: bool) -> list:
    x_train, y_train, x_test, y_test = arrays
    n_train, n_test = sizes
    out = [x_train[:n_train], y_train[:n_train].astype(np.int64), x_test[:n_test]]
    out.append(y_test[:n_test].astype(np.int64))
    if normalize:
        out[0] = to_float(out[0])
        out[2] = to_float(out[2])
    return out


def _shortfall(arrays: list, sizes: tuple[int, int], found: Path) -> str:
    """'' if the arrays hold the sizes asked for, else a sentence with the counts and remedy."""
    parts = []
    for what, got, asked in (
        ("training", len(arrays[0]), sizes[0]),
        ("test", len(arrays[2]), sizes[1]),
    ):
        if got < asked:
            parts.append(f"{got:,} of the {asked:,} {what} images asked for")
    if not parts:
        return ""
    return (
        f"only {' and '.join(parts)} are in the cache {found} (a complete CIFAR-10 has "
        f"{NUM_TRAIN:,} and {NUM_TEST:,}). {_remedy(found)}"
    )


def load_cifar10(
    *,
    source: str = "auto",
    subset: int | tuple[int, int] | None = None,
    offline: bool | None = None,
    normalize: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = 3.0,
    seed: int = 0,
) -> CifarData:
    """Load CIFAR-10 (or the announced stand-in) as numpy arrays.

    Args:
        source: ``"auto"`` (real data from the cache or a download, else the stand-in; offline,
            always the stand-in), ``"cifar10"`` (real data from the cache or a download, or an
            error), ``"keras"`` (the same as ``"cifar10"``: the files ``keras.datasets.cifar10``
            downloads and reads, in Keras' cache; the seed's loader, without importing Keras),
            ``"standin"`` (always the synthetic set).
        subset: ``None`` for 50,000/10,000 images; an int for that many training images (and a
            fifth as many test images, at least 1,000); or a ``(train, test)`` pair.
        offline: ``True`` means reproducible: ``"auto"`` returns the stand-in without looking
            at the cache, ``"cifar10"`` reads the cache but never downloads. ``False``: cache,
            then download. ``None`` reads ``$COURSE_OFFLINE`` (1/true/yes or 0/false/no) and
            otherwise uses the cache, or probes the CIFAR-10 server for at most ``timeout_s``
            seconds before a download.
        normalize: return float32 images in [0, 1] instead of uint8.
        cache_dir: Keras' cache root (default ``$KERAS_HOME`` or ``~/.keras``).
        seed: seed of the stand-in (train uses ``seed``, test ``seed + 1``).
    """
    sizes = _sizes(subset)
    if source not in {"auto", "cifar10", "keras", "standin"}:
        raise ValueError(f"source={source!r}: use 'auto', 'cifar10', 'keras' or 'standin'")

    if source == "keras":  # the files keras.datasets.cifar10 reads, read here (no Keras import)
        source = "cifar10"

    # Declared offline, "auto" is the stand-in, whatever this machine has cached: reproducible.
    if source == "cifar10" or (source == "auto" and _declared_offline(offline) is not True):
        found = find_cached(cache_dir)
        if found is None and not _is_offline(offline, timeout_s):
            try:
                found = download_cifar10(cache_dir)
            except (OSError, CifarFormatError) as err:
                if source == "cifar10":
                    raise
                print(
                    f"CIFAR-10 download failed ({type(err).__name__}: {err}); "
                    "using the offline stand-in."
                )
        if found is not None:
            return _real(found, sizes, normalize)
        if source == "cifar10":
            raise FileNotFoundError(
                f"CIFAR-10 is not in {keras_datasets_dir(cache_dir)} and the network is off"
            )
    return _standin(sizes, normalize, seed)


def _real(found: Path, sizes: tuple[int, int], normalize: bool) -> CifarData:
    arrays = _finish(read_cached(found), sizes, normalize)
    shortfall = _shortfall(arrays, sizes, found)
    text = f"CIFAR-10 (real data, parsed from {found})"
    if shortfall:
        print(f"WARNING: {shortfall}")
        text += f"; SHORT: {shortfall}"
    return CifarData(*arrays, CLASS_NAMES, text, False, shortfall)


def _standin(sizes: tuple[int, int], normalize: bool, seed: int) -> CifarData:
    n_train, n_test = sizes
    x_train, y_train = make_standin(n_train, seed=seed)
    x_test, y_test = make_standin(n_test, seed=seed + 1)
    arrays = _finish((x_train, y_train, x_test, y_test), sizes, normalize)
    text = (
        "OFFLINE STAND-IN, not CIFAR-10: deterministic synthetic 32x32 images "
        "(class k = shape family k//2 in a warm/cool colour family; "
        "see utils.data.STANDIN_PATTERNS)"
    )
    return CifarData(*arrays, CLASS_NAMES, text, True)


def drop_remainder(*arrays: np.ndarray, batch: int) -> tuple[np.ndarray, ...]:
    """The arrays cut to a whole number of ``batch``-sized steps (static shapes, one program).

    Raises:
        ValueError: fewer samples than one batch, or arrays of different lengths.
    """
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"arrays have different lengths: {sorted(lengths)}")
    (n,) = lengths
    keep = n // batch * batch
    if keep == 0:
        raise ValueError(
            f"{n} samples make no full batch of {batch}: use more data or a smaller batch"
        )
    return tuple(a[:keep] for a in arrays)
