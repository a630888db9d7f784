"""Where am I running? Platform, accelerator, TPU, GPUs, CPU and installed frameworks.

``detect()`` imports no framework (on a TPU VM the first framework a process imports takes the
chips, and only one process may own them) and opens no connection: it reads environment variables
and a few files, so any cell may call it. Tests replace what it reads: ``env`` (the environment),
``root`` (a prefix for every file), ``run`` (runs ``nvidia-smi``; ``None`` runs nothing) and
``frameworks`` (installed versions).

A TPU is a TPU VM: the notebook runs on the TPU's host (Colab, Kaggle, Cloud TPU VMs), found by
``TPU_ACCELERATOR_TYPE`` (``v5e-1``, ``v5litepod-8``, ``v2-8``...), ``COLAB_TPU_1VM=1``,
``/dev/accel<N>`` or Google TPU PCI devices. The number in an accelerator type counts TensorCores
(two per chip) for v2, v3, v4 and v5p, and chips for v5e and v6e. Odd settings never raise: they
become lines in ``Runtime.hints``. ``python -m utils.runtime`` prints the table.

:func:`try_resolver` is the bounded trial of TensorFlow's TPU connection (in a fresh process, so
this one imports nothing), and :data:`TPU_TODAY` says what became of ``COLAB_TPU_ADDR``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from utils import fresh_process, results

__all__ = [
    "FRAMEWORKS",
    "TPU_TODAY",
    "Runtime",
    "TPUInfo",
    "as_dict",
    "describe",
    "detect",
    "error_line",
    "parse_cpuinfo",
    "try_resolver",
]

# Distributions whose versions are reported, in display order.
FRAMEWORKS = ("tensorflow", "tensorflow-cpu", "tensorflow-tpu", "torch", "torch_xla", "jax",
              "keras", "libtpu")  # fmt: skip

# CPU instruction-set flags worth knowing for ML work (x86 "flags" and ARM "Features" names).
NOTABLE_CPU_FLAGS = frozenset(
    {
        "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
        "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
        "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
        "neon", "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme",
    }
)  # fmt: skip

GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id -> TPU generation (as Google's `tpu-info` reads them); v2 and v3 share 0x0027.
TPU_PCI_DEVICES = {"0x0027": "v2/v3", "0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e",
                   "0x006f": "v6e", "0x0076": "tpu7x"}  # fmt: skip
# What the "-N" of an accelerator type counts per chip: TensorCores (2) or chips (1).
_N_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5e": 1, "v6e": 1}
_VFIO_GENERATIONS = {"v5e", "v5p", "v6e", "tpu7x"}  # their chips are /dev/vfio/<N>
_TYPE_RE = re.compile(r"(v\d+[a-z]*|tpu\d+[a-z]*)-(\d{1,6})")
NVIDIA_SMI_TIMEOUT_S = 5.0

CommandRunner = Callable[[Sequence[str], float], str]
"""Runs ``args`` with a timeout in seconds and returns its standard output (may raise)."""


@dataclass(frozen=True)
class TPUInfo:
    """The TPU on this host.

    Attributes:
        accelerator_type: the type as the runtime names it (``"v5e-1"``, ``"v2-8"``), if known.
        generation: ``"v2"``, ``"v4"``, ``"v5e"``, ``"v5p"``, ``"v6e"``, ``"tpu7x"``... if known.
        chips: TPU chips this host sees (a multi-host slice has more in total), if known.
    """

    accelerator_type: str | None = None
    generation: str | None = None
    chips: int | None = None


@dataclass(frozen=True)
class Runtime:
    """What ``detect()`` found.

    Attributes:
        platform: ``"colab"``, ``"kaggle"`` or ``"local"`` (anything else, Cloud TPU VMs included).
        accelerator: ``"tpu"``, ``"gpu"`` or ``"cpu"``: what the notebooks size themselves for.
        tpu: the TPU, or ``None``.
        gpus: NVIDIA GPU model names, one per GPU.
        cpu_model, cpu_cores: the CPU's model name and the logical CPUs this process may use.
        cpu_features: notable instruction-set flags (``NOTABLE_CPU_FLAGS``), sorted.
        frameworks: distribution name -> installed version, or ``None``.
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


def _read(root: str, path: str) -> str:
    """Text of a regular file under ``root`` ('' if absent); never blocks on a FIFO or device."""
    full = os.path.join(root, path.lstrip("/"))
    try:
        if not stat.S_ISREG(os.stat(full).st_mode):
            return ""
        with open(full, encoding="utf-8", errors="replace") as fh:
            return fh.read(4 << 20)
    except (OSError, ValueError):
        return ""


def _listdir(root: str, path: str) -> list[str]:
    try:
        return sorted(os.listdir(os.path.join(root, path.lstrip("/"))))
    except (OSError, ValueError):
        return []


def run_command(args: Sequence[str], timeout_s: float) -> str:
    """The default ``CommandRunner``: stdout of ``args`` ('' on a failure or a timeout)."""
    done = fresh_process.run_child(args, env=dict(os.environ), timeout_s=timeout_s)
    return done.stdout if done.returncode == 0 else ""


def parse_cpuinfo(text: str) -> tuple[str, tuple[str, ...]]:
    """Model name and notable instruction-set flags from the text of ``/proc/cpuinfo``."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = (s.strip() for s in line.partition(":"))
        key = key.lower()
        if key in ("model name", "model", "hardware") and not model and not value.isdigit():
            model = value  # x86's "model : 207" is a number, not a name
        elif key in ("flags", "features"):
            flags.update(value.split())
    return model, tuple(sorted(flags & NOTABLE_CPU_FLAGS))


def _cpu_cores(root: str, cpuinfo: str) -> int:
    """Logical CPUs this process may use, capped by a cgroup v2 quota (``cpu.max``)."""
    if os.path.abspath(root) == "/":
        cores = len(os.sched_getaffinity(0))
    else:
        cores = sum(1 for ln in cpuinfo.splitlines() if ln.split(":")[0].strip() == "processor")
    quota = _read(root, "/sys/fs/cgroup/cpu.max").split()
    if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]) > 0:
        cores = min(cores, -(-int(quota[0]) // int(quota[1])))
    return max(1, cores)


def _gpus(root: str, env: Mapping[str, str], run: CommandRunner | None) -> tuple[str, ...]:
    """NVIDIA GPU names from the driver's /proc files, else from ``nvidia-smi`` if on PATH."""
    base = "/proc/driver/nvidia/gpus"
    names = []
    for bus in _listdir(root, base):
        info = _read(root, f"{base}/{bus}/information").splitlines()
        model = [ln.partition(":")[2].strip() for ln in info if ln.startswith("Model:")]
        names.append(model[0] if model and model[0] else "NVIDIA GPU")
    import shutil

    found = run and env.get("PATH") and not names
    exe = shutil.which("nvidia-smi", path=env["PATH"]) if found else None
    if exe is None:
        return tuple(names)
    try:
        out = run([exe, "--query-gpu=name", "--format=csv,noheader"], NVIDIA_SMI_TIMEOUT_S)
    except Exception:  # a timeout, permissions, driver trouble: no GPU we can use
        return ()
    return tuple(ln.strip() for ln in str(out).splitlines() if ln.strip())


def _accelerator_type(
    env: Mapping[str, str], hints: list[str]
) -> tuple[str | None, str | None, int | None]:
    """``(type, generation, chips in the slice)`` from ``TPU_ACCELERATOR_TYPE``."""
    raw = env.get("TPU_ACCELERATOR_TYPE")
    match = _TYPE_RE.fullmatch((raw or "").strip().lower())
    if raw is None or not match or int(match[2]) == 0:
        if raw is not None:
            hints.append(
                f"TPU_ACCELERATOR_TYPE={raw[:60]!r} is not a TPU type such as v5e-1, "
                "so it was ignored (the TPU runtime sets it: unset it if you did)."
            )
        return None, None, None
    generation = {"v5litepod": "v5e"}.get(match[1], match[1])
    per = _N_PER_CHIP.get(generation)  # unknown for a newer family: the devices count the chips
    chips = int(match[2]) // per if per and int(match[2]) % per == 0 else None
    return raw.strip(), generation, chips


def _pci_tpus(root: str) -> tuple[int, str | None]:
    """TPU chips on this host's PCI bus and their generation (Google's NIC and disks are not)."""
    base = "/sys/bus/pci/devices"
    chips, generation = set(), None
    for dev in _listdir(root, base):
        ids = [_read(root, f"{base}/{dev}/{f}").strip().lower() for f in ("vendor", "device")]
        if ids[0] == GOOGLE_PCI_VENDOR and ids[1] in TPU_PCI_DEVICES:
            chips.add(dev.rpartition(".")[0] or dev)  # TPU7x: one PCI function per TensorCore
            generation = TPU_PCI_DEVICES[ids[1]]
    return len(chips), generation


def _detect_tpu(env: Mapping[str, str], root: str, hints: list[str]) -> TPUInfo | None:
    """The TPU VM this host is, or None; the chip count from devices, else from the type."""
    acc_type, generation, slice_chips = _accelerator_type(env, hints)
    pci_chips, pci_generation = _pci_tpus(root)
    accel = sum(1 for n in _listdir(root, "/dev") if re.fullmatch(r"accel\d+", n))
    flagged = env.get("COLAB_TPU_1VM", "").strip() == "1" or env.get("TPU_NAME") == "local"
    if not (acc_type or pci_chips or accel or flagged):
        return None
    generation = generation or pci_generation
    vfio = sum(1 for n in _listdir(root, "/dev/vfio") if n.isdigit())
    hosts = len([h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]) or 1
    chips = pci_chips or accel or (vfio if generation in _VFIO_GENERATIONS else 0)
    if not chips and slice_chips and slice_chips % hosts == 0:
        chips = slice_chips // hosts
    if chips and slice_chips and slice_chips > chips:
        hints.append(
            f"This host sees {chips} of the slice's {slice_chips} chips: a multi-host "
            "slice runs the same program on every worker."
        )
    return TPUInfo(acc_type, generation, chips or None)


def major_minor(version: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a version (``"2.9.0+cu128"`` -> ``(2, 9)``); None if unreadable."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None


def same_release(a: str | None, b: str | None) -> bool:
    """The one rule for a framework pair built together (torch/torch_xla): the same
    major.minor. Unreadable versions are not called a mismatch."""
    ma, mb = major_minor(a), major_minor(b)
    return ma is None or mb is None or ma == mb


def _framework_hints(tpu: TPUInfo | None, fw: Mapping[str, str | None]) -> list[str]:
    hints = []
    if tpu is not None and tpu.generation == "tpu7x":
        hints.append("TensorFlow does not support TPU7x: use JAX or PyTorch.")
    if tpu is not None:
        hints.append(
            "One process owns the TPU: restart the runtime between TensorFlow, "
            "PyTorch/XLA and JAX notebooks."
        )
    torch, xla = fw.get("torch"), fw.get("torch_xla")
    if xla and (not torch or not same_release(torch, xla)):
        hints.append(
            f"torch_xla {xla} needs torch of the same major.minor, found "
            f"{torch or 'none'} (else '_XLAC ... undefined symbol')."
        )
    return hints


def _accelerator_hint(platform: str, tpu: TPUInfo | None, gpus: tuple[str, ...], cores: int) -> str:
    if tpu is not None:
        return (
            f"TPU VM ({_tpu_text(tpu)}): the chips are on this host; TensorFlow connects with "
            "TPUClusterResolver(tpu='local'), and a bare TPUClusterResolver() fails here."
        )
    if gpus:
        return (
            f"{len(gpus)} NVIDIA GPU(s): TensorFlow and JAX use them directly; torch_xla "
            "has no CUDA support, use plain torch on a GPU."
        )
    where = {
        "colab": " On Colab: Runtime > Change runtime type > TPU.",
        "kaggle": " On Kaggle: Settings > Accelerator > TPU VM v5e-8.",
    }.get(platform, "")
    return (
        f"No accelerator: running on the CPU ({cores} cores); notebooks choose small sizes.{where}"
    )


def _remote_tpu_hints(env: Mapping[str, str], tpu: TPUInfo | None) -> list[str]:
    """What ``COLAB_TPU_ADDR`` or ``TPU_NAME`` means today, where one is set and no TPU is here."""
    if tpu is not None:
        return []
    here = "no TPU chips are on this host: notebook 01 shows how to get onto a TPU today."
    hints = []
    if addr := env.get("COLAB_TPU_ADDR", "").strip():
        hints.append(
            f"COLAB_TPU_ADDR={addr[:60]!r} is the address of a TPU Node, a TPU on another machine "
            f"that Google retired (end of life 2025-04-25; no runtime sets it now), and {here}"
        )
    if name := env.get("TPU_NAME", "").strip():
        hints.append(
            f"TPU_NAME={name[:60]!r} names a Cloud TPU on another machine, for TensorFlow's "
            f"TPUClusterResolver, and {here}"
        )
    return hints


# Variables only the hosted notebook services set.
_PLATFORM_MARKERS = {
    "colab": ("COLAB_RELEASE_TAG", "COLAB_BACKEND_VERSION", "COLAB_JUPYTER_IP", "COLAB_GPU",
              "COLAB_TPU_1VM"),
    "kaggle": ("KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE"),
}  # fmt: skip


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
        root: prefix for every file read (``/proc``, ``/sys``, ``/dev``).
        run: runs ``nvidia-smi`` when the driver's /proc files are absent; ``None``: never.
        frameworks: installed versions by distribution name (missing: not installed);
            default: read from package metadata.
    """
    env = dict(os.environ if env is None else env)
    root = os.fspath(root)
    hints: list[str] = []
    platform = next(
        (p for p, keys in _PLATFORM_MARKERS.items() if any(env.get(k, "").strip() for k in keys)),
        "local",
    )
    tpu = _detect_tpu(env, root, hints)
    gpus = _gpus(root, env, run)
    cpuinfo = _read(root, "/proc/cpuinfo")
    cpu_model, cpu_features = parse_cpuinfo(cpuinfo)
    cpu_model = cpu_model or (os.uname().machine if os.path.abspath(root) == "/" else "unknown")
    cores = _cpu_cores(root, cpuinfo)
    versions = results.versions(FRAMEWORKS) if frameworks is None else frameworks
    fw = {name: versions.get(name) or None for name in FRAMEWORKS}
    hints = [
        _accelerator_hint(platform, tpu, gpus, cores),
        *_remote_tpu_hints(env, tpu),
        *hints,
        *_framework_hints(tpu, fw),
    ]
    accelerator = "tpu" if tpu is not None else "gpu" if gpus else "cpu"
    return Runtime(
        platform, accelerator, tpu, gpus, cpu_model, cores, cpu_features, fw, tuple(hints)
    )


def as_dict(rt: Runtime) -> dict:
    """``rt`` as plain JSON-able data (lists for tuples, a dict or None for ``tpu``)."""
    return json.loads(json.dumps(asdict(rt)))


# --------------------------------------------------------------------------- TensorFlow's trial

IMPORT_ALLOWANCE_S = 120.0
"""Seconds the trial process gets to import TensorFlow (slow on a busy small machine), on top of
the limit for the TPU steps."""

TPU_TODAY = (
    "COLAB_TPU_ADDR held the gRPC address of a TPU Node, a TPU on another machine; Google retired "
    "TPU Nodes (end of life 2025-04-25) and no runtime sets it now. Today's TPUs are TPU VMs: the "
    "chips are on the notebook's own host, and TensorFlow connects with "
    "TPUClusterResolver(tpu='local'). The free TPUs (Colab, Kaggle) ship JAX and PyTorch/XLA, not "
    "TensorFlow's TPU build (tensorflow-tpu): use Keras 3 on JAX there (notebook 02)."
)

# The trial: the TPU steps in a thread, so the process answers within the limit even when they
# hang; os._exit ends it with that thread still waiting.
_TRIAL = """
import json, os, sys, threading
import tensorflow as tf

result = {"error": f"no answer within {sys.argv[2]} s"}

def attempt():
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=sys.argv[1] or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        result["error"] = None
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"

thread = threading.Thread(target=attempt, daemon=True)
thread.start()
thread.join(float(sys.argv[2]))
print("RESULT " + json.dumps(result), flush=True)
os._exit(0)
"""


def error_line(error: BaseException | str, width: int = 160) -> str:
    """An error's first line (``Type: message`` for an exception), cut at a word to at most
    ``width`` characters, ending in " ..." when cut (TensorFlow appends attributes in no fixed
    order, so a stored output keeps only the start)."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    first = (text.strip().splitlines() or [""])[0].rstrip()
    if len(first) <= width:
        return first
    space = first.rfind(" ", 0, width - 3)  # the last word that leaves room for " ..."
    return first[: space if space > 0 else width - 4].rstrip() + " ..."


def try_resolver(tpu: str | None = "local", *, timeout_s: float = 60.0) -> str | None:
    """Resolve, connect to and initialise ``tpu`` with TensorFlow in a fresh process; ``None``
    tries a bare ``TPUClusterResolver()``, which looks for a TPU name in the environment.

    Returns None if that worked, else the error's first line (:func:`error_line`):
    ``"NotFoundError: ..."``, ``"no answer within 5.0 s"``. The TPU steps get ``timeout_s``,
    importing TensorFlow :data:`IMPORT_ALLOWANCE_S` more. Call it before this process imports
    TensorFlow: on a TPU VM the first process to start a framework on the chips owns them.
    """
    try:
        done = fresh_process.run_python(
            ["-c", _TRIAL, tpu or "", str(timeout_s)],
            env={"TF_CPP_MIN_LOG_LEVEL": "3"},
            timeout_s=timeout_s + IMPORT_ALLOWANCE_S,
        )
        error = fresh_process.result_of(done.stdout)["error"]
        return None if error is None else error_line(error)
    except fresh_process.FreshProcessError as exc:
        return f"the trial process failed: {str(exc).strip().splitlines()[-1]}"


def _tpu_text(tpu: TPUInfo) -> str:
    chips = f", {tpu.chips} chip(s)" if tpu.chips else ""
    return f"{tpu.accelerator_type or tpu.generation or 'type unknown'}{chips}"


def describe(rt: Runtime | None = None, *, width: int = 100) -> str:
    """A short aligned table of ``rt`` (default: ``detect()``) for a notebook's output."""
    import textwrap

    rt = detect() if rt is None else rt
    rows = [
        ("Platform", rt.platform),
        ("Accelerator", rt.accelerator),
        ("TPU", f"TPU VM, {_tpu_text(rt.tpu)}" if rt.tpu else "none"),
        ("GPUs", ", ".join(rt.gpus) or "none"),
        ("CPU", f"{rt.cpu_model}, {rt.cpu_cores} core(s)"),
        ("CPU features", " ".join(rt.cpu_features) or "none notable"),
        ("Frameworks", ", ".join(f"{n} {v}" for n, v in rt.frameworks.items() if v) or "none"),
        ("Not installed", ", ".join(n for n, v in rt.frameworks.items() if not v) or "-"),
        *[("Hints" if i == 0 else "", f"- {hint}") for i, hint in enumerate(rt.hints)],
    ]
    lines = []
    for label, value in rows:
        indent = " " * (16 if value.startswith("- ") else 14)
        lines += textwrap.wrap(
            value,
            width,
            initial_indent=f"{label:<14}",
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
