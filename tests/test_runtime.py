"""Tests for utils.runtime: fake environments and fake /proc, /sys, /dev trees under tmp_path."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utils import runtime
from utils.runtime import Runtime, TPUInfo, as_dict, describe, detect, parse_cpuinfo

REPO = Path(__file__).resolve().parent.parent

X86_CPUINFO = "".join(
    f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel\t\t: 207\n"
    "model name\t: Intel(R) Xeon(R) Processor\n"
    "flags\t\t: fpu sse sse2 ssse3 fma sse4_2 avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile "
    "amx_int8 hypervisor\n\n"
    for i in range(2)
)
ARM_CPUINFO = "".join(
    f"processor\t: {i}\nBogoMIPS\t: 2000.00\n"
    "Features\t: fp asimd evtstrm aes sha2 crc32 atomics asimddp sve sve2 bf16 i8mm\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n\n"
    for i in range(4)
)
NO_TF = {"torch": "2.9.0", "torch_xla": "2.9.0", "jax": "0.7.2", "libtpu": "0.0.21"}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"utils.runtime tried to open a connection: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def fake_root(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """A directory laid out like a machine's / with the given files (path -> content)."""
    root = tmp_path / "root"
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in (files or {}).items():
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def pci(slot: str, vendor: str, device: str) -> dict[str, str]:
    base = f"/sys/bus/pci/devices/{slot}"
    return {f"{base}/vendor": vendor + "\n", f"{base}/device": device + "\n"}


def tpu_pci(chips: int, device: str = "0x0063") -> dict[str, str]:
    files = pci("0000:00:05.0", "0x1ae0", "0x0042")  # Google's virtual NIC: not a TPU
    files.update(pci("0000:00:06.0", "0x1ae0", "0x001f"))  # Google NVMe disk: not a TPU
    files.update(pci("0000:00:03.0", "0x8086", "0x1237"))  # Intel host bridge
    for i in range(chips):
        files.update(pci(f"0000:00:{0x10 + i:02x}.0", "0x1ae0", device))
    return files


def hint_with(rt: Runtime, text: str) -> str:
    found = [h for h in rt.hints if text in h]
    assert found, f"no hint contains {text!r}: {rt.hints}"
    return found[0]


def test_plain_cpu_box(tmp_path: Path) -> None:
    root = fake_root(tmp_path, {"/proc/cpuinfo": X86_CPUINFO})
    rt = detect(env={}, root=root, run=None, frameworks={"tensorflow": "2.21.0"})
    assert (rt.platform, rt.accelerator, rt.tpu, rt.gpus) == ("local", "cpu", None, ())
    assert rt.cpu_model == "Intel(R) Xeon(R) Processor"
    assert rt.cpu_cores == 2
    assert rt.cpu_features == (
        "amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512f", "fma",
        "sse4_2",
    )  # fmt: skip
    assert rt.frameworks == {
        "tensorflow": "2.21.0", "tensorflow-cpu": None, "tensorflow-tpu": None, "torch": None,
        "torch_xla": None, "jax": None, "keras": None, "libtpu": None,
    }  # fmt: skip
    assert rt.hints[0].startswith("No accelerator: running on the CPU (2 cores)")
    assert not any("TPU" in h for h in rt.hints)


def test_colab_cpu_runtime_says_how_to_get_a_tpu(tmp_path: Path) -> None:
    root = fake_root(tmp_path, {"/proc/cpuinfo": X86_CPUINFO})
    rt = detect(env={"COLAB_RELEASE_TAG": "release-colab_20251101"}, root=root, run=None)
    assert (rt.platform, rt.accelerator) == ("colab", "cpu")
    assert "Change runtime type > TPU" in rt.hints[0]


COLAB_V5E_ENV = {
    "COLAB_RELEASE_TAG": "release-colab-external_20251110-060051_RC00",
    "COLAB_TPU_1VM": "1",
    "TPU_ACCELERATOR_TYPE": "v5e-1",
    "TPU_WORKER_ID": "0",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_HOST_BOUNDS": "1,1,1",
    "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1",
}


def test_colab_tpu_vm_v5e_1(tmp_path: Path) -> None:
    files = {"/proc/cpuinfo": X86_CPUINFO, "/dev/accel0": "", **tpu_pci(1)}
    rt = detect(env=COLAB_V5E_ENV, root=fake_root(tmp_path, files), run=None, frameworks=NO_TF)
    assert (rt.platform, rt.accelerator) == ("colab", "tpu")
    assert rt.tpu == TPUInfo(accelerator_type="v5e-1", generation="v5e", chips=1)
    assert "TPUClusterResolver(tpu='local')" in rt.hints[0]
    assert "v5e-1, 1 chip(s)" in rt.hints[0]
    hint_with(rt, "One process owns the TPU: restart the runtime")
    assert not any("same major.minor" in h for h in rt.hints)


def test_colab_tpu_vm_from_env_only(tmp_path: Path) -> None:
    """No device files readable (e.g. in a container): the variables are enough."""
    rt = detect(env=COLAB_V5E_ENV, root=fake_root(tmp_path), run=None, frameworks={})
    assert rt.tpu == TPUInfo("v5e-1", "v5e", 1)


def test_tpu_vm_from_devices_only(tmp_path: Path) -> None:
    """No TPU variables at all: Google's TPU PCI ids are enough, and give the generation."""
    root = fake_root(tmp_path, tpu_pci(4, device="0x006f"))
    rt = detect(env={}, root=root, run=None, frameworks={})
    assert rt.accelerator == "tpu"
    assert rt.tpu == TPUInfo(None, "v6e", 4)


def test_google_nic_alone_is_not_a_tpu(tmp_path: Path) -> None:
    files = {**pci("0000:00:05.0", "0x1ae0", "0x0042"), **pci("0000:00:06.0", "0x1ae0", "0x001f")}
    rt = detect(env={}, root=fake_root(tmp_path, files), run=None, frameworks={})
    assert (rt.accelerator, rt.tpu) == ("cpu", None)


def test_kaggle_tpu_vm_v5e_8(tmp_path: Path) -> None:
    files = {"/proc/cpuinfo": X86_CPUINFO, "/dev/vfio/vfio": "", **tpu_pci(8)}
    files.update({f"/dev/vfio/{i}": "" for i in range(8)})
    env = {
        "KAGGLE_KERNEL_RUN_TYPE": "Interactive",
        "KAGGLE_URL_BASE": "https://www.kaggle.com",
        "TPU_ACCELERATOR_TYPE": "v5litepod-8",
        "TPU_WORKER_HOSTNAMES": "localhost",
    }
    fw = {"tensorflow": "2.18.0", "jax": "0.7.2"}
    rt = detect(env=env, root=fake_root(tmp_path, files), run=None, frameworks=fw)
    assert (rt.platform, rt.accelerator) == ("kaggle", "tpu")
    assert rt.tpu == TPUInfo("v5litepod-8", "v5e", 8)
    assert not any("multi-host" in h for h in rt.hints)


@pytest.mark.parametrize("acc_type", ["v5litepod-4", "tpu7x-8"])
def test_vfio_groups_count_chips_when_pci_is_hidden(tmp_path: Path, acc_type: str) -> None:
    files = {"/dev/vfio/vfio": "", **{f"/dev/vfio/{i}": "" for i in range(4)}}
    env = {"TPU_ACCELERATOR_TYPE": acc_type}
    rt = detect(env=env, root=fake_root(tmp_path, files), run=None, frameworks={})
    assert rt.tpu is not None and rt.tpu.chips == 4


@pytest.mark.parametrize(
    ("acc_type", "generation", "chips"),
    [
        ("v5e-1", "v5e", 1),
        ("v5litepod-8", "v5e", 8),
        ("v6e-8", "v6e", 8),
        ("v2-8", "v2", 4),  # v2/v3/v4/v5p count TensorCores: 2 per chip
        ("v3-8", "v3", 4),
        ("v4-8", "v4", 4),
        ("v5p-8", "v5p", 4),
        ("tpu7x-8", "tpu7x", None),  # counting unknown from the name: devices decide
        (" V5E-1 ", "v5e", 1),
    ],
)
def test_chips_from_accelerator_type(
    tmp_path: Path, acc_type: str, generation: str, chips: int | None
) -> None:
    rt = detect(env={"TPU_ACCELERATOR_TYPE": acc_type}, root=fake_root(tmp_path), run=None)
    assert rt.tpu is not None
    assert (rt.tpu.generation, rt.tpu.chips) == (generation, chips)
    assert rt.tpu.accelerator_type == acc_type.strip()


def test_multi_host_slice_counts_this_hosts_chips(tmp_path: Path) -> None:
    env = {"TPU_ACCELERATOR_TYPE": "v5litepod-16", "TPU_WORKER_HOSTNAMES": "w0,w1,w2,w3"}
    rt = detect(env=env, root=fake_root(tmp_path, tpu_pci(4)), run=None, frameworks={})
    assert rt.tpu is not None and rt.tpu.chips == 4
    hint_with(rt, "This host sees 4 of the slice's 16 chips")
    # Without device files, the slice is split evenly over the hosts.
    rt = detect(env=env, root=fake_root(tmp_path / "bare"), run=None, frameworks={})
    assert rt.tpu is not None and rt.tpu.chips == 4


def test_tpu7x_says_tensorflow_is_unsupported(tmp_path: Path) -> None:
    files = {}
    for chip in range(2):  # one PCI function per TensorCore, two per chip
        for fn in range(2):
            files.update(pci(f"0000:{0x10 + chip:02x}:00.{fn}", "0x1ae0", "0x0076"))
    rt = detect(env={}, root=fake_root(tmp_path, files), run=None, frameworks={})
    assert rt.tpu == TPUInfo(None, "tpu7x", 2)
    hint_with(rt, "TensorFlow does not support TPU7x")


GPU_INFO = "Model: \t\t {name}\nIRQ:   \t\t 35\nGPU UUID: \t GPU-0000\nBus Location: \t {bus}\n"


def test_gpu_box_from_proc(tmp_path: Path) -> None:
    files = {"/proc/cpuinfo": X86_CPUINFO}
    for bus in ("0000:00:04.0", "0000:00:05.0"):
        files[f"/proc/driver/nvidia/gpus/{bus}/information"] = GPU_INFO.format(
            name="Tesla T4", bus=bus
        )

    def runner(args: object, timeout_s: float) -> str:
        raise AssertionError("nvidia-smi must not run when /proc has the answer")

    env = {"PATH": "/usr/bin"}
    rt = detect(env=env, root=fake_root(tmp_path, files), run=runner, frameworks={})
    assert (rt.accelerator, rt.gpus, rt.tpu) == ("gpu", ("Tesla T4", "Tesla T4"), None)
    assert rt.hints[0].startswith("2 NVIDIA GPU(s)")


def test_gpu_box_from_nvidia_smi(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    calls = []

    def runner(args: list[str], timeout_s: float) -> str:
        calls.append((list(args), timeout_s))
        return "NVIDIA A100-SXM4-40GB\n\n"

    rt = detect(env={"PATH": str(bindir)}, root=fake_root(tmp_path), run=runner, frameworks={})
    assert (rt.accelerator, rt.gpus) == ("gpu", ("NVIDIA A100-SXM4-40GB",))
    [(args, timeout_s)] = calls
    assert args == [str(exe), "--query-gpu=name", "--format=csv,noheader"]
    assert 0 < timeout_s <= 30
    assert rt.hints[0].startswith("1 NVIDIA GPU(s)")

    def hanging(args: list[str], timeout_s: float) -> str:
        raise subprocess.TimeoutExpired(args, timeout_s)

    rt = detect(env={"PATH": str(bindir)}, root=fake_root(tmp_path), run=hanging, frameworks={})
    assert (rt.accelerator, rt.gpus) == ("cpu", ())
    # Not on PATH, or no runner: nothing runs.
    rt = detect(env={"PATH": str(tmp_path)}, root=fake_root(tmp_path), run=runner, frameworks={})
    rt = detect(env={"PATH": str(bindir)}, root=fake_root(tmp_path), run=None, frameworks={})
    assert len(calls) == 1 and rt.gpus == ()


@pytest.mark.parametrize("value", ["banana", "", "v5e-", "v5e-0", "-8", "v5e_8", "v5e-1x", "🙂"])
def test_garbage_accelerator_type_gives_a_hint(tmp_path: Path, value: str) -> None:
    rt = detect(env={"TPU_ACCELERATOR_TYPE": value}, root=fake_root(tmp_path), run=None)
    assert (rt.accelerator, rt.tpu) == ("cpu", None)
    hint = hint_with(rt, "TPU_ACCELERATOR_TYPE=")
    assert "is not a TPU type such as v5e-1" in hint


def test_garbage_accelerator_type_on_a_real_tpu_vm(tmp_path: Path) -> None:
    env = {**COLAB_V5E_ENV, "TPU_ACCELERATOR_TYPE": "???"}
    rt = detect(env=env, root=fake_root(tmp_path, tpu_pci(1)), run=None, frameworks={})
    assert rt.tpu == TPUInfo(None, "v5e", 1)
    hint_with(rt, "TPU_ACCELERATOR_TYPE='???' is not a TPU type")
    rt = detect(env={"TPU_ACCELERATOR_TYPE": "v2-7"}, root=fake_root(tmp_path / "b"), run=None)
    assert rt.tpu is not None and rt.tpu.chips is None  # v2 counts TensorCores, two per chip


def test_garbage_files_never_raise_or_hang(tmp_path: Path) -> None:
    root = fake_root(tmp_path, tpu_pci(0))
    (root / "proc").mkdir()
    os.mkfifo(root / "proc" / "cpuinfo")  # reading a FIFO would block forever
    bad = root / "sys" / "bus" / "pci" / "devices" / "0000:00:09.0"
    bad.mkdir(parents=True)
    (bad / "vendor").write_bytes(b"\xff\xfe\x00garbage")
    (bad / "device").mkdir()  # a directory where a file should be
    gpu = root / "proc" / "driver" / "nvidia" / "gpus" / "0000:00:04.0"
    gpu.mkdir(parents=True)
    (gpu / "information").write_bytes(b"\x00\x01 no model line")
    rt = detect(env={}, root=root, run=None, frameworks={})
    assert rt.cpu_model == "unknown" and rt.cpu_cores == 1
    assert (rt.accelerator, rt.gpus) == ("gpu", ("NVIDIA GPU",))


def test_cpu_cores_from_cpuinfo_and_cgroup_quota(tmp_path: Path) -> None:
    cpuinfo = "".join(f"processor\t: {i}\n\n" for i in range(9))
    root = fake_root(tmp_path, {"/proc/cpuinfo": cpuinfo})
    assert detect(env={}, root=root, run=None, frameworks={}).cpu_cores == 9
    (root / "sys" / "fs" / "cgroup").mkdir(parents=True)
    (root / "sys" / "fs" / "cgroup" / "cpu.max").write_text("250000 100000\n")
    assert detect(env={}, root=root, run=None, frameworks={}).cpu_cores == 3
    (root / "sys" / "fs" / "cgroup" / "cpu.max").write_text("max 100000\n")
    assert detect(env={}, root=root, run=None, frameworks={}).cpu_cores == 9


def test_parse_cpuinfo_x86_and_arm() -> None:
    model, features = parse_cpuinfo(X86_CPUINFO)
    assert model == "Intel(R) Xeon(R) Processor"
    assert "avx512_bf16" in features and "hypervisor" not in features
    assert list(features) == sorted(features)
    model, features = parse_cpuinfo(ARM_CPUINFO)
    assert model == ""  # ARM's cpuinfo names no model: detect() then names the architecture
    assert features == ("asimd", "asimddp", "bf16", "i8mm", "sve", "sve2")
    assert parse_cpuinfo("") == ("", ())
    assert parse_cpuinfo("garbage\n:::\nflags") == ("", ())


def test_arm_box(tmp_path: Path) -> None:
    rt = detect(env={}, root=fake_root(tmp_path, {"/proc/cpuinfo": ARM_CPUINFO}), run=None)
    assert (rt.cpu_model, rt.cpu_cores, rt.accelerator) == ("unknown", 4, "cpu")


@pytest.mark.parametrize(
    ("torch", "xla", "mismatch"),
    [("2.8.0", "2.9.0", True), ("2.9.0+cpu", "2.9.0", False), ("2.9.1", "2.9.0", False)],
)
def test_torch_xla_version_mismatch(tmp_path: Path, torch: str, xla: str, mismatch: bool) -> None:
    fw = {"torch": torch, "torch_xla": xla}
    rt = detect(env={}, root=fake_root(tmp_path), run=None, frameworks=fw)
    assert any("same major.minor" in h for h in rt.hints) is mismatch
    rt = detect(env={}, root=fake_root(tmp_path), run=None, frameworks={"torch_xla": xla})
    hint_with(rt, "found none")


def test_describe_mentions_the_key_facts(tmp_path: Path) -> None:
    files = {"/proc/cpuinfo": X86_CPUINFO, **tpu_pci(1)}
    rt = detect(env=COLAB_V5E_ENV, root=fake_root(tmp_path, files), run=None, frameworks=NO_TF)
    text = describe(rt)
    facts = [
        "colab", "TPU VM, v5e-1, 1 chip(s)",
        "Intel(R) Xeon(R) Processor, 2 core(s)", "avx512_bf16", "torch_xla 2.9.0",
        "tensorflow, tensorflow-cpu, tensorflow-tpu", "tpu='local'", "One process owns the TPU",
    ]  # fmt: skip
    for fact in facts:
        assert fact in text, fact
    lines = text.splitlines()
    assert lines[0].split() == ["Platform", "colab"]
    assert all(len(line) <= 100 for line in lines)
    # Values start in one column.
    column = lines[0].index("colab")
    assert all(line[column - 1] == " " and line[column] != " " for line in lines[:8])
    assert describe(rt) == text


def test_describe_without_argument_detects() -> None:
    text = describe()
    assert text.startswith("Platform") and "Accelerator" in text


def test_as_dict_is_json_and_complete(tmp_path: Path) -> None:
    rt = detect(env=COLAB_V5E_ENV, root=fake_root(tmp_path, tpu_pci(1)), run=None, frameworks={})
    data = as_dict(rt)
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {f.name for f in dataclasses.fields(Runtime)}
    assert data["tpu"]["accelerator_type"] == "v5e-1" and data["tpu"]["chips"] == 1
    assert as_dict(detect(env={}, root=fake_root(tmp_path / "b"), run=None))["tpu"] is None


def test_runtime_is_frozen(tmp_path: Path) -> None:
    rt = detect(env={}, root=fake_root(tmp_path), run=None, frameworks={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        rt.accelerator = "tpu"  # type: ignore[misc]
    assert hash(rt) == hash(dataclasses.replace(rt))


def test_this_machine() -> None:
    rt = detect(run=None)
    assert rt.accelerator in {"tpu", "gpu", "cpu"}
    assert rt.cpu_cores >= 1 and rt.hints
    assert set(rt.frameworks) == set(runtime.FRAMEWORKS)


def test_import_and_detect_import_no_framework() -> None:
    code = (
        "import sys, json\n"
        "import utils.runtime as r\n"
        "rt = r.detect(); r.describe(rt); r.as_dict(rt)\n"
        "heavy = {'tensorflow', 'torch', 'torch_xla', 'jax', 'keras', 'numpy'}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_colab_tpu_addr_alone_is_not_a_tpu(tmp_path: Path) -> None:
    """COLAB_TPU_ADDR named a TPU Node, which no runtime has now: it is not read."""
    env = {"COLAB_TPU_ADDR": "10.1.2.3:8470", "TPU_NAME": "my-tpu"}
    rt = detect(env=env, root=fake_root(tmp_path), run=None, frameworks={})
    assert (rt.platform, rt.accelerator, rt.tpu) == ("local", "cpu", None)
    rt = detect(env={"TPU_NAME": "local"}, root=fake_root(tmp_path), run=None, frameworks={})
    assert rt.tpu == TPUInfo()


@pytest.mark.parametrize(
    ("env", "meaning"),
    [
        ({"COLAB_TPU_ADDR": "10.1.2.3:8470"}, "the address of a TPU Node"),
        ({"COLAB_TPU_ADDR": "10.1.2.3:8470", "COLAB_GPU": "0"}, "retired"),  # on Colab
        ({"TPU_NAME": "my-tpu"}, "names a Cloud TPU on another machine, for TensorFlow's"),
    ],
)
def test_a_remote_tpu_variable_without_chips_says_what_it_means(
    tmp_path: Path, env: dict[str, str], meaning: str
) -> None:
    """Set, with no chip on this host: a hint says what the variable means today (a retired TPU
    Node's address, or a Cloud TPU named for TensorFlow's resolver) and points to notebook 01."""
    rt = detect(env=env, root=fake_root(tmp_path), run=None, frameworks={})
    assert rt.accelerator == "cpu" and rt.hints[0].startswith("No accelerator")
    variable = next(iter(env))
    hint = hint_with(rt, f"{variable}={env[variable]!r}")
    assert meaning in hint and "notebook 01" in hint and "no TPU chips are on this host" in hint
    assert rt.hints.index(hint) == 1  # right after the accelerator line
    assert hint in describe(rt).replace("\n" + " " * 16, " ")


def test_a_remote_tpu_variable_beside_local_chips_adds_nothing(tmp_path: Path) -> None:
    env = {"COLAB_TPU_ADDR": "10.1.2.3:8470", "TPU_NAME": "local", "TPU_ACCELERATOR_TYPE": "v5e-8"}
    rt = detect(env=env, root=fake_root(tmp_path, tpu_pci(8)), run=None, frameworks={})
    assert rt.accelerator == "tpu"
    assert not any("COLAB_TPU_ADDR" in h or "TPU_NAME" in h for h in rt.hints)


words = st.lists(st.text("ab{}'", min_size=1, max_size=12), min_size=1, max_size=40)
lines = st.lists(words.map(" ".join), min_size=1, max_size=3).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(lines, st.integers(8, 200))
def test_error_line_is_the_first_line_cut_at_a_word(message: str, width: int) -> None:
    first = message.split("\n")[0]
    line = runtime.error_line(message, width)
    assert len(line) <= width
    if len(first) <= width:
        assert line == first
    else:
        kept = line.removesuffix(" ...")
        assert line.endswith(" ...") and first.startswith(kept)
        cut_at_a_word = first[len(kept) :].startswith(" ") or " " not in first[: width - 3]
        assert cut_at_a_word, (first, line)
    assert runtime.error_line(ValueError("no\nmore")) == "ValueError: no"


def test_versions_come_from_the_one_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """detect() reads installed versions through utils.results.versions, the one reader."""
    from utils import results

    asked = []

    def fake(names):
        asked.append(tuple(names))
        return {name: "9.9" for name in asked[-1]}

    monkeypatch.setattr(results, "versions", fake)
    rt = detect(env={}, root=fake_root(tmp_path), run=None)
    assert asked == [runtime.FRAMEWORKS] and set(rt.frameworks.values()) == {"9.9"}
