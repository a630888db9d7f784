"""Tests for utils.data: CIFAR-10's own format (folder and archive), the stand-in, offline logic.

No network: every test passes ``offline`` explicitly, sets ``COURSE_OFFLINE`` or replaces the probe
or ``urlopen``; the probe itself is only tried against 127.0.0.1.
"""

from __future__ import annotations

import io
import pickle
import socket
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest

from utils import data

PER_BATCH = 6  # a tiny CIFAR-10: 6 images per batch, 30 train + 6 test


def _batch_bytes(images: np.ndarray, labels: np.ndarray, name: str) -> bytes:
    """One batch file as CIFAR-10 writes it: byte-string keys, uint8 (N, 3072) CHW rows."""
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    d = {
        b"batch_label": name.encode(),
        b"labels": [int(v) for v in labels],
        b"data": rows,
        b"filenames": [f"{name}_{i}.png".encode() for i in range(len(images))],
    }
    return pickle.dumps(d, protocol=2)


def _tiny_cifar(seed: int = 0) -> tuple[dict[str, bytes], tuple[np.ndarray, ...]]:
    """Files of a tiny CIFAR-10 (name -> bytes) and the arrays they must parse to."""
    rng = np.random.default_rng(seed)
    n = 6 * PER_BATCH
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n)
    files = {"batches.meta": pickle.dumps({b"label_names": [c.encode() for c in data.CLASS_NAMES]})}
    for i, name in enumerate([*data.TRAIN_BATCHES, data.TEST_BATCH]):
        sl = slice(i * PER_BATCH, (i + 1) * PER_BATCH)
        files[name] = _batch_bytes(images[sl], labels[sl], name)
    cut = 5 * PER_BATCH
    return files, (images[:cut], labels[:cut], images[cut:], labels[cut:])


def _write_dir(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True)
    for name, raw in files.items():
        (folder / name).write_bytes(raw)


@pytest.fixture(autouse=True)
def _restore_expected_sha256(monkeypatch):
    """_write_tar makes its tiny archive the expected one; undone after each test."""
    monkeypatch.setattr(data, "CIFAR10_SHA256", data.CIFAR10_SHA256)


def _write_tar(path: Path, files: dict[str, bytes]) -> None:
    """A tiny CIFAR-10 archive, registered as the archive whose SHA-256 the loader expects."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, raw in files.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    data.CIFAR10_SHA256 = data.sha256_of(path)  # restored by the autouse fixture


def _check(d: data.CifarData, expected: tuple[np.ndarray, ...]) -> None:
    for got, want in zip((d.x_train, d.y_train, d.x_test, d.y_test), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert d.x_train.dtype == np.uint8 and d.y_train.dtype == np.int64
    assert not d.is_standin and "CIFAR-10 (real data" in d.source


@pytest.mark.parametrize(
    "layout", ["cifar-10-batches-py", "cifar-10-batches-py-target/cifar-10-batches-py"]
)
def test_parses_extracted_folder_in_keras_cache(tmp_path, monkeypatch, layout):
    files, expected = _tiny_cifar()
    _write_dir(tmp_path / "datasets" / layout, files)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    d = data.load_cifar10(source="cifar10", subset=(30, 6), offline=True)
    _check(d, expected)


def test_parses_tar_gz_archive(tmp_path):
    files, expected = _tiny_cifar(seed=1)
    _write_tar(tmp_path / "datasets" / "cifar-10-python.tar.gz", files)
    d = data.load_cifar10(source="cifar10", subset=(30, 6), offline=True, cache_dir=tmp_path)
    _check(d, expected)


def test_subset_and_normalize_on_real_format(tmp_path):
    files, expected = _tiny_cifar(seed=2)
    _write_dir(tmp_path / "datasets" / "cifar-10-batches-py", files)
    d = data.load_cifar10(subset=(10, 4), normalize=True, offline=False, cache_dir=tmp_path)
    assert not d.is_standin
    assert d.x_train.shape == (10, 32, 32, 3) and d.x_test.shape == (4, 32, 32, 3)
    assert d.x_train.dtype == np.float32 and 0.0 <= d.x_train.min() <= d.x_train.max() <= 1.0
    np.testing.assert_allclose(d.x_train, expected[0][:10] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(d.x_test, data.to_float(expected[2][:4]))
    ends = data.to_float(np.array([0, 51, 255], np.uint8))
    assert ends.dtype == np.float32 and ends.tolist() == [0.0, np.float32(0.2), 1.0]


def test_offline_auto_is_the_standin_even_with_a_cache(tmp_path, monkeypatch):
    """COURSE_OFFLINE=1 means reproducible: a cached real copy must not change stored outputs."""
    files, expected = _tiny_cifar(seed=4)
    _write_tar(tmp_path / "datasets" / "cifar-10-python.tar.gz", files)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))

    def no_probe(**_: object) -> bool:
        raise AssertionError("the network must not be probed")

    monkeypatch.setattr(data, "network_available", no_probe)
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    cached = data.load_cifar10(subset=(30, 6))  # default source="auto", nothing declared
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    offline = data.load_cifar10(subset=(30, 6))
    assert offline.is_standin and "STAND-IN" in offline.source
    assert data.load_cifar10(subset=(30, 6), offline=True).is_standin
    np.testing.assert_array_equal(offline.x_train, data.make_standin(30, seed=0)[0])
    # source="cifar10" reads the cache offline; without a declaration, "auto" uses the cache too.
    _check(data.load_cifar10(source="cifar10", subset=(30, 6)), expected)
    _check(cached, expected)


class _FakeResponse:
    """What ``urllib.request.urlopen`` returns: ``chunks`` then EOF, or an OSError midway."""

    def __init__(self, chunks: list[bytes], fail_after: int | None = None) -> None:
        self.chunks, self.fail_after, self.reads = list(chunks), fail_after, 0

    def __enter__(self) -> _FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self, _size: int) -> bytes:
        if self.fail_after is not None and self.reads == self.fail_after:
            raise ConnectionResetError("connection reset by peer (fake)")
        self.reads += 1
        return self.chunks.pop(0) if self.chunks else b""


def _fake_urlopen(monkeypatch, response: _FakeResponse) -> list[str]:
    urls: list[str] = []

    def urlopen(url: str, timeout: float) -> _FakeResponse:
        urls.append(url)
        return response

    monkeypatch.setattr(data.urllib.request, "urlopen", urlopen)
    return urls


def test_download_checksum_mismatch_falls_back_and_cleans_up(tmp_path, monkeypatch, capsys):
    urls = _fake_urlopen(monkeypatch, _FakeResponse([b"not CIFAR-10", b" at all"]))
    d = data.load_cifar10(subset=100, offline=False, cache_dir=tmp_path)
    assert d.is_standin and urls == [data.CIFAR10_URL]
    out = capsys.readouterr().out
    assert "download failed (CifarFormatError" in out and "SHA-256 mismatch" in out
    assert "using the offline stand-in" in out
    assert list((tmp_path / "datasets").iterdir()) == []  # no archive, no .part
    with pytest.raises(data.CifarFormatError, match="SHA-256"):
        data.load_cifar10(source="cifar10", offline=False, cache_dir=tmp_path)
    assert list((tmp_path / "datasets").iterdir()) == []


def test_download_error_midway_leaves_no_part_file(tmp_path, monkeypatch, capsys):
    _fake_urlopen(monkeypatch, _FakeResponse([b"x" * 100, b"y" * 100], fail_after=1))
    d = data.load_cifar10(subset=100, offline=False, cache_dir=tmp_path)
    assert d.is_standin
    assert "download failed (ConnectionResetError" in capsys.readouterr().out
    assert list((tmp_path / "datasets").iterdir()) == []
    _fake_urlopen(monkeypatch, _FakeResponse([b"x" * 100, b"y" * 100], fail_after=1))
    with pytest.raises(ConnectionResetError):
        data.download_cifar10(tmp_path)
    assert list((tmp_path / "datasets").iterdir()) == []


def test_truncated_batch_names_the_file(tmp_path):
    files, _ = _tiny_cifar()
    files["data_batch_3"] = files["data_batch_3"][:100]
    _write_dir(tmp_path / "datasets" / "cifar-10-batches-py", files)
    with pytest.raises(data.CifarFormatError, match="data_batch_3"):
        data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(30, 6))


def test_bad_labels_and_missing_file_are_reported(tmp_path):
    files, _ = _tiny_cifar()
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(PER_BATCH, 32, 32, 3), dtype=np.uint8)
    files["test_batch"] = _batch_bytes(imgs, np.full(PER_BATCH, 12), "test_batch")
    _write_dir(tmp_path / "a" / "datasets" / "cifar-10-batches-py", files)
    with pytest.raises(data.CifarFormatError, match="test_batch: labels outside 0-9"):
        data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path / "a")
    del files["data_batch_5"]
    _write_tar(tmp_path / "b" / "datasets" / "cifar-10-python.tar.gz", files)
    with pytest.raises(data.CifarFormatError, match="data_batch_5 missing"):
        data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path / "b")


def test_unpickler_refuses_arbitrary_objects():
    evil = pickle.dumps({b"data": time.sleep, b"labels": []})
    with pytest.raises(data.CifarFormatError, match="evil_batch"):
        data.parse_batch(evil, "evil_batch")


def test_standin_is_deterministic_balanced_and_shaped(tmp_path):
    a = data.load_cifar10(subset=(500, 200), offline=True, cache_dir=tmp_path)
    b = data.load_cifar10(subset=(500, 200), offline=True, cache_dir=tmp_path)
    assert a.is_standin and "STAND-IN" in a.source and "not CIFAR-10" in a.source
    assert a.class_names == data.CLASS_NAMES and len(a.class_names) == 10
    assert a.x_train.shape == (500, 32, 32, 3) and a.x_test.shape == (200, 32, 32, 3)
    assert a.x_train.dtype == np.uint8 and a.y_train.dtype == np.int64
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert np.bincount(a.y_train, minlength=10).tolist() == [50] * 10
    assert np.bincount(a.y_test, minlength=10).tolist() == [20] * 10
    # Train and test are different draws, and the images are not blank.
    assert not np.array_equal(a.x_train[:200], a.x_test)
    assert a.x_train.std() > 20


def test_standin_classes_differ_in_mean_image():
    x, y = data.make_standin(2000, seed=3)
    means = np.stack([x[y == k].mean(axis=0) for k in range(10)])
    # Warm classes are redder than their cool partners on average.
    red_minus_blue = means[..., 0].mean(axis=(1, 2)) - means[..., 2].mean(axis=(1, 2))
    assert all(red_minus_blue[k] > red_minus_blue[k + 1] for k in range(0, 10, 2))


def test_offline_decision(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    assert data._is_offline(None, 0.1) is True
    assert data._is_offline(False, 0.1) is False
    monkeypatch.delenv("COURSE_OFFLINE")
    calls = []

    def fake_probe(*, timeout_s: float) -> bool:
        calls.append(timeout_s)
        return False

    monkeypatch.setattr(data, "network_available", fake_probe)
    d = data.load_cifar10(subset=100, cache_dir=tmp_path, timeout_s=0.5)
    assert d.is_standin and calls == [0.5]
    with pytest.raises(FileNotFoundError, match="network is off"):
        data.load_cifar10(source="cifar10", cache_dir=tmp_path)


def test_probe_is_bounded_and_loopback_only():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert data.network_available("127.0.0.1", port, timeout_s=2.0) is True
    start = time.perf_counter()
    assert data.network_available("127.0.0.1", port, timeout_s=1.0) is False  # closed now
    took = time.perf_counter() - start  # a closed port answers at once; the bound is timeout_s
    assert took < 30, (
        f"probe of a closed port took {took:.1f} s (timeout_s=1; 30 s allows a loaded machine)"
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="source"):
        data.load_cifar10(source="imagenet", offline=True)
    with pytest.raises(ValueError, match="subset"):
        data.load_cifar10(subset=60_000, offline=True)


# --------------------------------------------------------------------------------------------
# Issue 16: the cache is re-verified on load; short caches are announced; remedies given
# --------------------------------------------------------------------------------------------


def test_a_flipped_byte_in_the_cached_archive_is_caught_with_the_remedy(tmp_path):
    """Before: a flipped byte could load as "CIFAR-10 (real data)" with a pixel changed."""
    files, _ = _tiny_cifar(seed=5)
    archive = tmp_path / "datasets" / "cifar-10-python.tar.gz"
    _write_tar(archive, files)
    raw = bytearray(archive.read_bytes())
    for position in (len(raw) // 3, len(raw) // 2, len(raw) - 20):
        flipped = raw.copy()
        flipped[position] ^= 0x01
        archive.write_bytes(bytes(flipped))
        with pytest.raises(data.CifarFormatError) as info:
            data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(30, 6))
        message = str(info.value)
        assert "SHA-256" in message and "is not CIFAR-10's" in message
        assert f"delete the file {archive} and re-download" in message
    archive.write_bytes(bytes(raw))  # the intact copy loads again
    data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(30, 6))


def test_the_real_checksum_is_checked_by_default(tmp_path, monkeypatch):
    monkeypatch.undo()  # the genuine CIFAR-10 SHA-256, not a tiny archive's
    assert data.CIFAR10_SHA256.startswith("6d958be0")
    files, _ = _tiny_cifar()
    archive = tmp_path / "datasets" / "cifar-10-python.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py/batches.meta")
        info.size = len(files["batches.meta"])
        tar.addfile(info, io.BytesIO(files["batches.meta"]))
    with pytest.raises(data.CifarFormatError, match="re-download"):
        data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path)


def test_a_short_cache_says_how_many_images_were_loaded(tmp_path, capsys):
    """Before: 30 images for subset=40 without a word (5,000 for 8,000 in the issue)."""
    files, _ = _tiny_cifar()
    folder = tmp_path / "datasets" / "cifar-10-batches-py"
    _write_dir(folder, files)
    d = data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(40, 6))
    assert d.loaded == (30, 6) and len(d.x_train) == 30
    assert d.shortfall.startswith("only 30 of the 40 training images asked for")
    assert "SHORT: only 30 of the 40 training images" in d.source
    assert f"delete the folder {folder} and re-download" in d.shortfall
    assert "WARNING: only 30 of the 40 training images" in capsys.readouterr().out
    full = data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(30, 6))
    assert full.shortfall == "" and "SHORT" not in full.source


def test_a_damaged_folder_names_the_remedy(tmp_path):
    files, _ = _tiny_cifar()
    files["data_batch_2"] = files["data_batch_2"][:50]
    folder = tmp_path / "datasets" / "cifar-10-batches-py"
    _write_dir(folder, files)
    with pytest.raises(data.CifarFormatError, match="data_batch_2.*delete the folder"):
        data.load_cifar10(source="cifar10", offline=True, cache_dir=tmp_path, subset=(30, 6))


def test_drop_remainder_keeps_whole_batches() -> None:
    x, y = np.arange(10), np.arange(10)
    x2, y2 = data.drop_remainder(x, y, batch=4)
    assert len(x2) == len(y2) == 8
    with pytest.raises(ValueError, match="no full batch"):
        data.drop_remainder(x, y, batch=16)
    with pytest.raises(ValueError, match="different lengths"):
        data.drop_remainder(x, y[:5], batch=2)
