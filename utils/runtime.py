"""Where am I running? Platform, accelerator, TPU kind, GPUs, CPU and installed frameworks.

``detect()`` answers without importing TensorFlow, PyTorch, torch_xla or JAX (on a TPU VM,
importing a framework grabs the chips, and only one process may own them) and without opening a
network connection. It only reads environment variables and a few files, so it is fast and safe
to call from any notebook cell. Everything it reads can be replaced, which is how the tests fake
a Colab TPU VM, a Kaggle TPU, a GPU box or a legacy TPU Node on a laptop:

- ``env``: the environment (default ``os.environ``);
- ``root``: a path prefix for every file it reads (default ``"/"``);
- ``run``: the function that runs ``nvidia-smi`` (``None`` skips it);
- ``frameworks``: installed versions (default: asked from ``importlib.metadata``).

How a TPU is recognised:

- **TPU VM** (the notebook runs on the TPU host: Colab since 2024, Kaggle, Cloud TPU VMs):
  ``TPU_ACCELERATOR_TYPE`` (``v5e-1``, ``v5litepod-8``, ``v2-8``, ``v6e-8``...),
  ``COLAB_TPU_1VM=1``, ``TPU_NAME=local``, ``/dev/accel<N>`` device files, or PCI devices with
  Google's vendor id ``0x1ae0`` and a TPU device id under ``/sys/bus/pci/devices`` (Google's id
  alone is not enough: Google's virtual NIC and disks carry it too).
- **TPU Node** (legacy: the TPU is a remote machine reached over gRPC): ``COLAB_TPU_ADDR``
  (``host:port``) or ``TPU_NAME`` (a Cloud TPU name or a ``grpc://host:port`` URL).

Counting chips: the devices this host sees are counted when the files are there. Otherwise the
count comes from the accelerator type, whose number means different things per generation:
TensorCores for v2, v3, v4 and v5p (two per chip, so ``v2-8`` is 4 chips), chips for v5e
(``v5e-N``, ``v5litepod-N``) and v6e. Google documents this per generation in the Cloud TPU docs.

Malformed input (an empty ``COLAB_TPU_ADDR``, a port out of range, a garbage accelerator type)
never raises: it becomes a plain-language line in ``Runtime.hints``.

Run ``python -m utils.runtime`` to print the table.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from utils import fresh_process, tpu_address
from utils.tpu_address import show as _show

__all__ = [
    "FRAMEWORKS",
    "CommandRunner",
    "Runtime",
    "TPUInfo",
    "as_dict",
    "describe",
    "detect",
    "parse_cpuinfo",
    "run_command",
]

# Distributions whose versions are reported, in display order.
FRAMEWORKS: tuple[str, ...] = (
    "tensorflow",
    "tensorflow-cpu",  # Kaggle's TPU image: importable as `tensorflow`, no TPU kernels
    "tensorflow-tpu",
    "torch",
    "torch_xla",
    "jax",
    "keras",
    "libtpu",
)

# CPU instruction-set flags worth knowing for ML work (x86 "flags" and ARM "Features" names).
NOTABLE_CPU_FLAGS: frozenset[str] = frozenset(
    {
        # x86: vector width, fused multiply-add, int8/bf16/fp16 dot products, AMX tiles
        "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
        "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
        "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
        # ARM: SIMD, dot product, scalable vectors, bf16 and int8 matrix multiply, SME
        "neon", "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme",
    }
)  # fmt: skip

GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id -> TPU generation (as read by Google's `tpu-info` tool). v2 and v3 share 0x0027.
TPU_PCI_DEVICES: dict[str, str] = {
    "0x0027": "v2/v3",
    "0x005e": "v4",
    "0x0062": "v5p",
    "0x0063": "v5e",
    "0x006f": "v6e",
    "0x0076": "tpu7x",
}
# Accelerator-type families whose "-N" counts TensorCores (2 per chip) rather than chips.
_CORE_COUNTED = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2}
_CHIP_COUNTED = {"v5e", "v5litepod", "v6e"}
_FAMILY_ALIASES = {"v5litepod": "v5e"}
_VFIO_GENERATIONS = {"v5e", "v5p", "v6e", "tpu7x"}

NVIDIA_SMI_TIMEOUT_S = 5.0
_MAX_READ = 4 << 20  # bytes; /proc/cpuinfo of a 200-core machine is about 300 KB
_TYPE_RE = re.compile(r"(?P<family>v\d+[a-z]*|tpu\d+[a-z]*)-(?P<n>\d{1,6})")

CommandRunner = Callable[[Sequence[str], float], str]
"""Runs ``args`` with a timeout in seconds and returns its standard output (may raise)."""


@dataclass(frozen=True)
class TPUInfo:
    """The TPU this runtime can use.

    Attributes:
        mode: ``"vm"`` (the TPU is attached to this host) or ``"node"`` (legacy remote TPU).
        accelerator_type: the type as the runtime names it (``"v5e-1"``, ``"v2-8"``), if known.
        generation: ``"v2"``, ``"v3"``, ``"v4"``, ``"v5e"``, ``"v5p"``, ``"v6e"``... if known.
        chips: TPU chips this host sees (a multi-host slice has more in total), if known.
        address: what to pass to ``TPUClusterResolver(tpu=...)``: ``"local"`` on a TPU VM,
            ``"grpc://host:port"`` for a TPU Node; ``None`` when the TPU is known only by name.
        name: the Cloud TPU name from ``TPU_NAME``, if any.
    """

    mode: str
    accelerator_type: str | None = None
    generation: str | None = None
    chips: int | None = None
    address: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Runtime:
    """What ``detect()`` found. ``as_dict()`` turns it into JSON-able data.

    Attributes:
        platform: ``"colab"``, ``"kaggle"`` or ``"local"`` (anything else, Cloud TPU VMs included).
        accelerator: ``"tpu"``, ``"gpu"`` or ``"cpu"``: what the notebooks size themselves for.
        tpu: details of the TPU, or ``None``.
        gpus: NVIDIA GPU model names, one per GPU.
        cpu_model: the CPU's model name.
        cpu_cores: logical CPUs this process may use.
        cpu_features: notable instruction-set flags (see ``NOTABLE_CPU_FLAGS``), sorted.
        frameworks: distribution name -> installed version, or ``None`` when not installed.
        hints: plain-language advice on what to do next, most important first.
    """

    platform: str
    accelerator: str
    tpu: TPUInfo | None
    gpus: tuple[str, ...]
    cpu_model: str
    cpu_cores: int
    cpu_features: tuple[str, ...]
    frameworks: dict[str, str | None] = field(hash=False)
    hints: tuple[str, ...] = ()


# --------------------------------------------------------------------------- reading the system


def _path(root: str, absolute: str) -> str:
    return os.path.join(root, absolute.lstrip("/"))


def _read(path: str) -> str | None:
    """Text of a regular file, or None. Never blocks on FIFOs or devices, never raises."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(_MAX_READ)
    except (OSError, ValueError):
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except (OSError, ValueError):
        return []


def run_command(args: Sequence[str], timeout_s: float) -> str:
    """Default ``CommandRunner``: run ``args`` with :func:`utils.fresh_process.run_child` (its own
    session, bounded) and return stdout ('' on a non-zero exit or a timeout)."""
    done = fresh_process.run_child(args, env=dict(os.environ), timeout_s=timeout_s)
    return done.stdout if done.returncode == 0 else ""


def _installed_versions() -> dict[str, str | None]:
    """Versions of ``FRAMEWORKS`` from package metadata: nothing is imported."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in FRAMEWORKS:
        try:
            versions[name] = metadata.version(name)
        except Exception:  # PackageNotFoundError, or broken metadata
            versions[name] = None
    return versions


# --------------------------------------------------------------------------- CPU


def parse_cpuinfo(text: str) -> tuple[str, tuple[str, ...]]:
    """Model name and notable ISA features from the text of ``/proc/cpuinfo``.

    Understands x86 (``model name``, ``flags``) and ARM (``Model``/``Hardware`` or
    ``CPU implementer``/``CPU part``, ``Features``). Returns ``("", ())`` for empty input.
    """
    model = ""
    implementer = part = ""
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "model", "hardware", "cpu model") and not model:
            if key != "model" or not value.isdigit():  # x86's "model : 207" is a number
                model = value
        elif key in ("flags", "features"):
            flags.update(value.split())
        elif key == "cpu implementer" and not implementer:
            implementer = value.lower()
        elif key == "cpu part" and not part:
            part = value.lower()
    if not model and implementer:
        model = _ARM_PARTS.get(
            (implementer, part), f"ARM CPU (implementer {implementer}, part {part})"
        )
    return model, tuple(sorted(flags & NOTABLE_CPU_FLAGS))


_ARM_PARTS = {
    ("0x41", "0xd0c"): "Arm Neoverse-N1",
    ("0x41", "0xd40"): "Arm Neoverse-V1",
    ("0x41", "0xd49"): "Arm Neoverse-N2",
    ("0x41", "0xd4f"): "Arm Neoverse-V2",
}


def _parse_cpu_list(text: str) -> int:
    """Number of CPUs in a kernel CPU list such as ``0-3,6,8-9`` (0 if unreadable)."""
    count = 0
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        if not lo.strip().isdigit() or (hi and not hi.strip().isdigit()):
            return 0
        count += (int(hi) - int(lo) + 1) if hi else 1
    return max(count, 0)


def _cpu_quota(root: str) -> int | None:
    """CPUs allowed by a cgroup v2 quota (``cpu.max``), rounded up; None when unlimited."""
    text = _read(_path(root, "/sys/fs/cgroup/cpu.max"))
    parts = text.split() if text else []
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[1]) > 0:
        return max(1, -(-int(parts[0]) // int(parts[1])))
    return None


def _cpu_cores(root: str, cpuinfo: str) -> int:
    if os.path.abspath(root) == "/":
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    else:
        cores = sum(1 for ln in cpuinfo.splitlines() if ln.split(":")[0].strip() == "processor")
        if not cores:
            cores = _parse_cpu_list(_read(_path(root, "/sys/devices/system/cpu/online")) or "")
    quota = _cpu_quota(root)
    return max(1, min(cores, quota) if quota else cores)


# --------------------------------------------------------------------------- GPU


def _gpus(root: str, env: Mapping[str, str], run: CommandRunner | None) -> tuple[str, ...]:
    """NVIDIA GPU names from the driver's /proc files, else from ``nvidia-smi`` if on PATH."""
    base = _path(root, "/proc/driver/nvidia/gpus")
    names = []
    for bus in _listdir(base):
        info = _read(os.path.join(base, bus, "information")) or ""
        model = next(
            (ln.partition(":")[2].strip() for ln in info.splitlines() if ln.startswith("Model:")),
            "",
        )
        names.append(model or "NVIDIA GPU")
    if names or run is None or not env.get("PATH"):
        return tuple(names)
    import shutil  # only when looking for nvidia-smi

    exe = shutil.which("nvidia-smi", path=env["PATH"])
    if exe is None:
        return ()
    try:
        out = run([exe, "--query-gpu=name", "--format=csv,noheader"], NVIDIA_SMI_TIMEOUT_S)
    except Exception:  # timeout, permission, driver trouble: no GPU we can use
        return ()
    return tuple(ln.strip() for ln in str(out).splitlines() if ln.strip())


# --------------------------------------------------------------------------- TPU


def _parse_hostport(value: str) -> tuple[str | None, str | None]:
    """A TPU Node address -> (``grpc://host:port``, None) or (None, problem).

    The grammar is :func:`utils.tpu_address.parse_grpc`, shared with connecting.
    """
    try:
        return tpu_address.parse_grpc(value).tpu, None
    except tpu_address.TPUAddressError as exc:
        return None, exc.problem


def _parse_accelerator_type(value: str) -> tuple[str | None, int | None, str | None]:
    """``v5e-1`` -> (generation, chips in the slice, problem)."""
    text = value.strip().lower()
    match = _TYPE_RE.fullmatch(text)
    if not match or int(match["n"]) == 0:
        return None, None, "not_a_type"
    family, n = match["family"], int(match["n"])
    generation = _FAMILY_ALIASES.get(family, family)
    if family in _CORE_COUNTED:
        per_chip = _CORE_COUNTED[family]
        if n % per_chip:
            return generation, None, "odd_cores"
        return generation, n // per_chip, None
    if family in _CHIP_COUNTED:
        return generation, n, None
    return generation, None, None  # a newer family: trust the type, count chips from devices


def _pci_tpus(root: str) -> tuple[int, str | None]:
    """TPU chips on this host's PCI bus (Google vendor id and a TPU device id) and generation."""
    base = _path(root, "/sys/bus/pci/devices")
    chips: set[str] = set()
    generation = None
    for dev in _listdir(base):
        vendor = (_read(os.path.join(base, dev, "vendor")) or "").strip().lower()
        if vendor != GOOGLE_PCI_VENDOR:
            continue
        device = (_read(os.path.join(base, dev, "device")) or "").strip().lower()
        if device not in TPU_PCI_DEVICES:
            continue  # gVNIC, NVMe and other Google devices
        chips.add(dev.rpartition(".")[0] or dev)  # TPU7x shows one PCI function per TensorCore
        generation = TPU_PCI_DEVICES[device]
        if generation == "v2/v3":
            sub = (_read(os.path.join(base, dev, "subsystem_device")) or "").strip().lower()
            generation = {"0x004e": "v2", "0x004f": "v3"}.get(sub, generation)
    return len(chips), generation


def _dev_count(root: str, subdir: str, pattern: str) -> int:
    rx = re.compile(pattern)
    return sum(1 for name in _listdir(_path(root, subdir)) if rx.fullmatch(name))


def _accelerator_type(
    env: Mapping[str, str], hints: list[str]
) -> tuple[str | None, str | None, int | None]:
    """``(type, generation, chips in the slice)`` from ``TPU_ACCELERATOR_TYPE``; odd values hint."""
    acc_type_raw = env.get("TPU_ACCELERATOR_TYPE")
    acc_type = generation = None
    slice_chips = None
    if acc_type_raw is not None:
        generation, slice_chips, problem = _parse_accelerator_type(acc_type_raw)
        if problem == "not_a_type":
            hints.append(
                f"TPU_ACCELERATOR_TYPE={_show(acc_type_raw)} is not a TPU type such as v5e-1, "
                "v5litepod-8, v2-8 or v6e-8, so it was ignored. The TPU runtime sets it itself: "
                "unset it if you set it by hand."
            )
        else:
            acc_type = acc_type_raw.strip()
            if problem == "odd_cores":
                hints.append(
                    f"TPU_ACCELERATOR_TYPE={_show(acc_type_raw)}: {generation} types count "
                    "TensorCores, two per chip, so the number should be even; chip count unknown."
                )

    return acc_type, generation, slice_chips


def _detect_tpu(env: Mapping[str, str], root: str, hints: list[str]) -> TPUInfo | None:
    """Find a TPU VM or a TPU Node; malformed settings become hints, never exceptions."""
    acc_type, generation, slice_chips = _accelerator_type(env, hints)
    pci_chips, pci_generation = _pci_tpus(root)
    accel_devs = _dev_count(root, "/dev", r"accel\d+")
    vfio_groups = _dev_count(root, "/dev/vfio", r"\d+")
    tpu_name = (env.get("TPU_NAME") or "").strip()
    vm_evidence = (
        acc_type is not None
        or env.get("COLAB_TPU_1VM", "").strip() == "1"
        or tpu_name == "local"
        or pci_chips > 0
        or accel_devs > 0
    )

    colab_addr_raw = env.get("COLAB_TPU_ADDR")
    node_address = None
    if colab_addr_raw is not None:
        node_address, problem = _parse_hostport(colab_addr_raw)
        if problem and not vm_evidence:
            hints.append(
                f"COLAB_TPU_ADDR={_show(colab_addr_raw)} {problem}; a TPU Node address looks like "
                "10.0.0.2:8470. Colab's TPU runtimes are TPU VMs now and do not set "
                "COLAB_TPU_ADDR: unset it (os.environ.pop('COLAB_TPU_ADDR')) or correct it."
            )
        elif vm_evidence:
            if colab_addr_raw.strip():
                hints.append("COLAB_TPU_ADDR is set but this is a TPU VM: it was ignored.")
            node_address = None

    name = None
    if tpu_name and tpu_name != "local":
        if tpu_name.lower().startswith("grpc://"):
            address, problem = _parse_hostport(tpu_name)
            if problem:
                hints.append(
                    f"TPU_NAME={_show(tpu_name)} {problem}; a gRPC address looks like "
                    "grpc://10.0.0.2:8470."
                )
            elif not vm_evidence:
                node_address = node_address or address
        elif tpu_address.NAME_RE.fullmatch(tpu_name):
            name = tpu_name
        else:
            hints.append(
                f"TPU_NAME={_show(tpu_name)} is neither a Cloud TPU name (lower-case letters, "
                "digits and '-') nor grpc://host:port, so it was ignored."
            )

    if vm_evidence:
        hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
        # /dev/vfio/<N> are chips on v5e, v5p, v6e and TPU7x (as Google's tpu-info reads them).
        vfio_chips = vfio_groups if (generation or pci_generation) in _VFIO_GENERATIONS else 0
        chips = pci_chips or accel_devs or vfio_chips or None
        if chips is None and slice_chips is not None:
            per_host, rest = divmod(slice_chips, max(len(hosts), 1))
            chips = per_host if per_host and not rest else None
        if chips and slice_chips and slice_chips > chips:
            hints.append(
                f"This host sees {chips} of the slice's {slice_chips} chips: a multi-host slice "
                "runs the same program on every worker (gcloud ... ssh --worker=all)."
            )
        return TPUInfo(
            mode="vm",
            accelerator_type=acc_type,
            generation=generation or pci_generation,
            chips=chips,
            address="local",
            name=name,
        )
    if node_address or name:
        return TPUInfo(
            mode="node",
            accelerator_type=acc_type,
            generation=generation,
            chips=slice_chips,
            address=node_address,
            name=name,
        )
    return None


# --------------------------------------------------------------------------- hints


def major_minor(version: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a version (``"2.9.0+cu128"`` -> ``(2, 9)``); None if unreadable."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None


def same_release(a: str | None, b: str | None) -> bool:
    """The one rule for a framework pair built together (torch/torch_xla, tensorflow/its TPU
    build): the same major.minor. Unreadable versions are not called a mismatch."""
    ma, mb = major_minor(a), major_minor(b)
    return ma is None or mb is None or ma == mb


_TF_TPU_OPT_IN = (
    "Installing tensorflow-tpu over this runtime's libtpu is an explicit opt-in, "
    "bootstrap.prepare(..., install_tensorflow_tpu=True): Colab's maintainers warn it may break "
    "the other frameworks (googlecolab/colabtools#5174)."
)


def _framework_hints(rt_tpu: TPUInfo | None, fw: Mapping[str, str | None]) -> list[str]:
    hints = []
    tf_tpu, tf_cpu, tf_plain = (
        fw.get("tensorflow-tpu"),
        fw.get("tensorflow-cpu"),
        fw.get("tensorflow"),
    )
    tf = tf_plain or tf_cpu or tf_tpu
    jax_route = (
        f"Keras 3 + JAX runs on this TPU as installed (jax {fw['jax']}): notebook 02."
        if fw.get("jax") and fw.get("libtpu")
        else f"jax {fw['jax']} is installed without libtpu: `pip install 'jax[tpu]'` for the TPU."
        if fw.get("jax")
        else "Keras 3 + JAX needs `pip install 'jax[tpu]'` here."
    )
    if rt_tpu is not None and rt_tpu.mode == "vm":
        if rt_tpu.generation == "tpu7x":
            hints.append("TensorFlow does not support TPU7x (Cloud TPU docs): use JAX or PyTorch.")
        elif tf_tpu:
            if not fw.get("libtpu"):
                hints.append(
                    f"tensorflow-tpu {tf_tpu} is installed but libtpu is not: install "
                    "the libtpu version it requires (see notebook 01)."
                )
        elif tf_cpu or tf_plain:
            dist = "tensorflow-cpu" if tf_cpu else "tensorflow"
            hints.append(
                f"{dist} {tf} is installed without tensorflow-tpu: `import tensorflow` works but "
                'it has no TPU kernels (initialize_tpu_system fails with "No OpKernel was '
                "registered to support Op 'ConfigureDistributedTPU'\"), so TPUStrategy cannot "
                f"use this TPU. {jax_route} {_TF_TPU_OPT_IN}"
            )
        else:
            hints.append(
                f"TensorFlow is not installed on this TPU runtime (Colab's TPU image has none "
                f"since March 2025). {jax_route} {_TF_TPU_OPT_IN}"
            )
        hints.append(
            "One process owns the TPU: restart the runtime between TF and torch_xla (or JAX) "
            "notebooks."
        )
    elif rt_tpu is not None and not tf:
        hints.append("TensorFlow is not installed: a TPU Node is driven from TensorFlow.")
    torch, xla = fw.get("torch"), fw.get("torch_xla")
    if xla and not torch:
        hints.append(f"torch_xla {xla} is installed without torch: install torch {xla}.")
    elif xla and torch and not same_release(torch, xla):
        hints.append(
            f"torch {torch} and torch_xla {xla} do not match: torch_xla needs the same "
            "major.minor torch, or importing it fails with '_XLAC ... undefined symbol'. On Colab "
            "keep the preinstalled pair."
        )
    return hints


def _accelerator_hint(platform: str, tpu: TPUInfo | None, gpus: tuple[str, ...], cores: int) -> str:
    if tpu is not None and tpu.mode == "vm":
        what = ", ".join(
            x
            for x in (
                tpu.accelerator_type or tpu.generation,
                f"{tpu.chips} chip{'s' if tpu.chips != 1 else ''}" if tpu.chips else None,
            )
            if x
        )
        return (
            f"TPU VM{f' ({what})' if what else ''}: connect with TPUClusterResolver(tpu='local') "
            "(utils.tf.strategies.get_strategy does this); a bare TPUClusterResolver() fails here."
        )
    if tpu is not None and tpu.address:
        return (
            f"TPU Node at {tpu.address} (the legacy architecture; Colab moved to TPU VMs in "
            f"2024): connect with TPUClusterResolver(tpu='{tpu.address}') "
            "(utils.tf.strategies.get_strategy does this). Current PyTorch/XLA (PJRT) cannot use a "
            "TPU Node."
        )
    if tpu is not None:
        return (
            f"Cloud TPU {tpu.name!r} by name: TPUClusterResolver(tpu='{tpu.name}', zone=..., "
            "project=...) looks up its address through the Cloud TPU API (needs network access "
            "and credentials); utils.tf.strategies.get_strategy does this."
        )
    if gpus:
        return (
            f"{len(gpus)} NVIDIA GPU{'s' if len(gpus) > 1 else ''}: TensorFlow uses "
            f"{'them' if len(gpus) > 1 else 'it'} directly (utils.tf.strategies.get_strategy "
            "picks the strategy); torch_xla 2.9 has no CUDA support, use plain torch on a GPU."
        )
    where = {
        "colab": " On Colab: Runtime > Change runtime type > TPU.",
        "kaggle": " On Kaggle: Settings > Accelerator > TPU VM v5e-8.",
    }.get(platform, "")
    return (
        f"No accelerator found: running on the CPU ({cores} core{'s' if cores != 1 else ''}); "
        f"notebooks choose small sizes.{where}"
    )


# --------------------------------------------------------------------------- public API


# Variables only the hosted notebook services set. COLAB_TPU_ADDR is not one of them: it names a
# legacy TPU Node, and a stray or empty copy on a laptop must not make it "Colab" (and make
# bootstrap install packages there).
_COLAB_MARKERS = ("COLAB_RELEASE_TAG", "COLAB_BACKEND_VERSION", "COLAB_JUPYTER_IP", "COLAB_GPU",
                  "COLAB_TPU_1VM")  # fmt: skip
_KAGGLE_MARKERS = ("KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE")


def _platform(env: Mapping[str, str]) -> str:
    if any(env.get(key, "").strip() for key in _COLAB_MARKERS):
        return "colab"
    if any(env.get(key, "").strip() for key in _KAGGLE_MARKERS):
        return "kaggle"
    return "local"


def detect(
    env: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] = "/",
    *,
    run: CommandRunner | None = run_command,
    frameworks: Mapping[str, str | None] | None = None,
) -> Runtime:
    """Describe the runtime without importing a framework or opening a connection.

    Args:
        env: environment variables to read (default ``os.environ``).
        root: prefix for every file read (``/proc``, ``/sys``, ``/dev``); tests pass a temporary
            directory laid out like a real machine.
        run: runs ``nvidia-smi`` when the driver's /proc files are absent and ``nvidia-smi`` is
            on ``env['PATH']`` (bounded by ``NVIDIA_SMI_TIMEOUT_S``); ``None`` never runs anything.
        frameworks: installed versions by distribution name (missing names count as not
            installed); default: read from package metadata, without importing anything.
    """
    env = {str(k): str(v) for k, v in (os.environ if env is None else env).items() if v is not None}
    root = os.fspath(root)
    hints: list[str] = []

    platform = _platform(env)
    tpu = _detect_tpu(env, root, hints)
    gpus = _gpus(root, env, run)
    cpuinfo = _read(_path(root, "/proc/cpuinfo")) or ""
    cpu_model, cpu_features = parse_cpuinfo(cpuinfo)
    if not cpu_model:
        cpu_model = os.uname().machine if os.path.abspath(root) == "/" else "unknown"
    cores = _cpu_cores(root, cpuinfo)
    versions = _installed_versions() if frameworks is None else dict(frameworks)
    fw = {name: versions.get(name) or None for name in FRAMEWORKS}

    accelerator = "tpu" if tpu is not None else "gpu" if gpus else "cpu"
    hints.insert(0, _accelerator_hint(platform, tpu, gpus, cores))
    hints.extend(_framework_hints(tpu, fw))
    return Runtime(
        platform=platform,
        accelerator=accelerator,
        tpu=tpu,
        gpus=gpus,
        cpu_model=cpu_model,
        cpu_cores=cores,
        cpu_features=cpu_features,
        frameworks=fw,
        hints=tuple(hints),
    )


def as_dict(rt: Runtime) -> dict:
    """``rt`` as plain JSON-able data (lists for tuples, a dict or None for ``tpu``)."""
    tpu = rt.tpu
    return {
        "platform": rt.platform,
        "accelerator": rt.accelerator,
        "tpu": None
        if tpu is None
        else {
            "mode": tpu.mode,
            "accelerator_type": tpu.accelerator_type,
            "generation": tpu.generation,
            "chips": tpu.chips,
            "address": tpu.address,
            "name": tpu.name,
        },
        "gpus": list(rt.gpus),
        "cpu_model": rt.cpu_model,
        "cpu_cores": rt.cpu_cores,
        "cpu_features": list(rt.cpu_features),
        "frameworks": dict(rt.frameworks),
        "hints": list(rt.hints),
    }


def describe(rt: Runtime | None = None, *, width: int = 100) -> str:
    """A short aligned table of ``rt`` (default: ``detect()``) for a notebook's output."""
    import textwrap  # only for rendering

    rt = detect() if rt is None else rt
    tpu = rt.tpu
    if tpu is None:
        tpu_text = "none"
    else:
        parts = ["TPU VM" if tpu.mode == "vm" else "TPU Node"]
        if tpu.accelerator_type:
            parts.append(tpu.accelerator_type)
        if tpu.generation and tpu.generation != tpu.accelerator_type:
            parts.append(f"generation {tpu.generation}")
        if tpu.chips:
            parts.append(f"{tpu.chips} chip{'s' if tpu.chips != 1 else ''}")
        if tpu.name:
            parts.append(f"name {tpu.name}")
        if tpu.address:
            parts.append(f"address {tpu.address}")
        tpu_text = ", ".join(parts)
    installed = [f"{n} {v}" for n, v in rt.frameworks.items() if v]
    missing = [n for n, v in rt.frameworks.items() if not v]
    cpu = f"{rt.cpu_model}, {rt.cpu_cores} core{'s' if rt.cpu_cores != 1 else ''}"
    rows = [
        ("Platform", rt.platform),
        ("Accelerator", rt.accelerator),
        ("TPU", tpu_text),
        ("GPUs", ", ".join(rt.gpus) or "none"),
        ("CPU", cpu),
        ("CPU features", " ".join(rt.cpu_features) or "none notable"),
        ("Frameworks", ", ".join(installed) or "none"),
        ("Not installed", ", ".join(missing) or "-"),
    ]
    rows += [("Hints" if i == 0 else "", f"- {hint}") for i, hint in enumerate(rt.hints)]
    label_w = max(len(label) for label, _ in rows) + 2
    lines = []
    for label, value in rows:
        indent = " " * (label_w + (2 if value.startswith("- ") else 0))
        lines += textwrap.wrap(
            value,
            width=max(width, label_w + 30),
            initial_indent=f"{label:<{label_w}}",
            subsequent_indent=indent,
            break_on_hyphens=False,
        ) or [label]
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
