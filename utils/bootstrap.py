"""The work of every notebook's set-up cell: quiet logs and the right packages.

Framework-free: this module decides *what* is missing by looking at installed package metadata
(``importlib``), never by importing TensorFlow or torch_xla (on a TPU VM that would grab the chip).

* Locally (and in CI) it never installs anything: a missing package is a clear error that points
  to ``make setup``, which builds ``.venv`` and the ``tpu-course`` kernel from requirements.txt.
* On Colab and Kaggle it installs only what the runtime lacks, with versions that fit what is
  preinstalled (for example torch_xla to match Colab's torch), and says what it installed.
  "Colab" and "Kaggle" are recognised by what those services set (``utils.runtime``), never by a
  ``COLAB_TPU_ADDR`` left over on a laptop.
* On a TPU it tells the truth about each stack (:func:`stack_status`): "tensorflow importable" is
  not "TensorFlow on the TPU" (Kaggle's image has ``tensorflow-cpu``, Colab's none at all), while
  Keras 3 + JAX runs as shipped on both. It never installs ``tensorflow-tpu`` over a runtime's
  libtpu unless asked (``prepare(..., install_tensorflow_tpu=True)``), because Colab's
  maintainers warn that it may break the other frameworks (googlecolab/colabtools#5174).
* It never stops a notebook whose next sections can run. Where TensorFlow cannot use the TPU it
  says so in one line and returns a :class:`Prepared` runtime; each cell that needs TensorFlow
  gates itself with one line, ``if bootstrap.tf_runs_here(rt, "what this cell shows"):``,
  which prints ``Skipped on this runtime: ...`` (and how to get it) where it cannot run.
  Host-side TensorFlow (``tf.data``) runs wherever TensorFlow imports
  (``tf_runs_here(rt, ..., host_only=True)``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

from utils import results, runtime

# Environment defaults that keep notebook output readable and comparable under nbval.
QUIET_ENV: Mapping[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "2",  # TensorFlow's C++ INFO and WARNING lines
    "GRPC_VERBOSITY": "ERROR",
}

# Versions the course is tested with (requirements.txt pins the same for the CPU machine).
TENSORFLOW_VERSION = "2.21.0"
TENSORFLOW_TPU_VERSION = "2.20.0"  # newest tensorflow-tpu on PyPI; it trails tensorflow
TF_TPU_RISK = (
    "Installing tensorflow-tpu puts TensorFlow's TPU runtime next to this image's libtpu; "
    'Colab\'s maintainers warn it "may break functionality in the other frameworks" '
    "(googlecolab/colabtools#5174). It asks for libtpu~=0.0.14, which Colab's libtpu 0.0.21.1 "
    "satisfies, so pip keeps it: a pairing no one has published as working. Restart the runtime "
    "before using JAX or torch_xla again."
)
TORCH_XLA_VERSION = "2.9.0"  # its binary needs exactly the same torch version
# Host-side TensorFlow (tf.data, TFRecords) for a TPU runtime that ships none (Colab), installed
# by the set-up cell automatically. Why that is safe, checked against Colab's TPU image (its pip
# freeze, googlecolab/backend-info pip-freeze.tpu.txt, 2026-08):
# - tensorflow-cpu has no TPU kernels and no libtpu, so it cannot take the chips from JAX or
#   torch_xla; Kaggle's TPU image ships this very version next to jax[tpu] 0.7.2 and torch_xla.
# - Its wheel (cp313 exists) requires numpy>=1.26.0, protobuf>=5.28.0, keras>=3.10.0,
#   ml_dtypes>=0.5.1,<1, h5py>=3.11.0: Colab's numpy 2.1.3, protobuf 7.35.1, keras 3.13.2,
#   ml_dtypes 0.6.0 and h5py 3.16.0 all satisfy them, so pip replaces none of Colab's packages
#   (a dry run on a venv with Colab's pins changed none of them). Its generated protobuf code is
#   5.28.3, which protobuf 7's runtime check accepts (it refuses only gencode newer than itself).
# tensorflow-tpu stays an opt-in (INSTALL_TENSORFLOW_TPU): it runs on the image's libtpu, a pairing
# no one has published as working (TF_TPU_RISK).
TENSORFLOW_CPU_VERSION = "2.20.0"

# Import name -> distribution name, for the packages the notebooks ask for.
DISTRIBUTIONS: Mapping[str, str] = {
    "tensorflow": "tensorflow",
    "torch": "torch",
    "torch_xla": "torch_xla",
    "matplotlib": "matplotlib",
    "psutil": "psutil",
    "numpy": "numpy",
    "jax": "jax",
    "keras": "keras",
}
# Distributions that all install the import name `tensorflow`; only the first can use a TPU.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow-tpu", "tensorflow-cpu", "tensorflow")


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _minor(version: str) -> str:
    """``"2.9.0+cu126"`` -> ``"2.9"``: the release a pip pin names (``runtime.major_minor``)."""
    return ".".join(map(str, runtime.major_minor(version) or ()))


def install_plan(
    rt: runtime.Runtime, missing: Iterable[str], versions: Mapping[str, str | None]
) -> list[list[str]]:
    """The ``pip install`` argument lists that bring in ``missing`` modules on this runtime.

    ``versions`` maps distribution names to installed versions (``results.versions``); it
    decides, for instance, which torch_xla matches a preinstalled torch.
    """
    on_tpu = rt.accelerator == "tpu"
    plan: list[list[str]] = []
    for module in missing:
        if module == "tensorflow":
            if on_tpu:
                # Host-side TensorFlow only: no TPU kernels, no libtpu (see
                # TENSORFLOW_CPU_VERSION); tensorflow-tpu is the opt-in of prepare().
                plan.append([f"tensorflow-cpu=={TENSORFLOW_CPU_VERSION}"])
            else:
                plan.append([f"tensorflow=={TENSORFLOW_VERSION}"])
        elif module == "torch_xla":
            torch_version = versions.get("torch")
            extra = "[tpu]" if on_tpu else ""
            if torch_version:  # keep the runtime's torch; take the torch_xla built for it
                plan.append([f"torch_xla{extra}=={_minor(torch_version)}.*"])
            else:
                plan.append(
                    [f"torch=={TORCH_XLA_VERSION}", f"torch_xla{extra}=={TORCH_XLA_VERSION}"]
                )
        elif module == "jax":
            plan.append(["jax[tpu]" if on_tpu else "jax"])
        else:
            plan.append([DISTRIBUTIONS.get(module, module)])
    return plan


def tensorflow_distribution(versions: Mapping[str, str | None]) -> str | None:
    """Which distribution provides ``import tensorflow``: tensorflow-tpu, -cpu, plain, or None."""
    return next((d for d in TENSORFLOW_DISTRIBUTIONS if versions.get(d)), None)


@dataclass(frozen=True)
class StackStatus:
    """What one software stack can do on this runtime.

    ``verdict``: ``"works as shipped"``, ``"needs install"``, ``"not supported"``, or
    ``"CPU only"`` (off a TPU: the stack runs, on the CPU/GPU). ``detail`` says why and what to do.
    """

    stack: str
    verdict: str
    detail: str


STACK_DISTRIBUTIONS = (*TENSORFLOW_DISTRIBUTIONS, "jax", "keras", "libtpu", "torch", "torch_xla",
                       "torch-tpu")  # fmt: skip


def stack_status(
    rt: runtime.Runtime, versions: Mapping[str, str | None] | None = None
) -> list[StackStatus]:
    """Keras+JAX, TF TPUStrategy, torch_xla and TorchTPU on this runtime, from package metadata.

    Nothing is imported. ``versions`` maps distribution names to installed versions (default:
    read from this environment; tests pass fakes).
    """
    v = results.versions(STACK_DISTRIBUTIONS) if versions is None else dict(versions)
    on_tpu = rt.accelerator == "tpu"
    return [
        _keras_jax_status(v, on_tpu),
        _tf_tpu_strategy_status(rt, v),
        _torch_xla_status(v, on_tpu),
        _torch_tpu_status(v, on_tpu),
    ]


def _keras_jax_status(v: Mapping[str, str | None], on_tpu: bool) -> StackStatus:
    """Keras 3 + JAX."""
    if v.get("jax") and (v.get("keras") or "").split(".")[0] == "3":
        if not on_tpu:
            return StackStatus("Keras+JAX", "CPU only", "runs here; on a TPU as shipped")
        if v.get("libtpu"):
            return StackStatus("Keras+JAX", "works as shipped",
                               f"jax {v['jax']}, keras {v['keras']}, libtpu {v['libtpu']}: "
                               "notebook 02")  # fmt: skip
        return StackStatus("Keras+JAX", "needs install",
                           "pip install 'jax[tpu]' (libtpu for jax)")  # fmt: skip
    return StackStatus("Keras+JAX", "needs install",
                       "pip install 'jax[tpu]' 'keras>=3'" if on_tpu
                       else "pip install jax 'keras>=3'")  # fmt: skip


def _tf_tpu_strategy_status(rt: runtime.Runtime, v: Mapping[str, str | None]) -> StackStatus:
    """TensorFlow with TPUStrategy."""
    dist = tensorflow_distribution(v)
    if rt.accelerator != "tpu":
        detail = f"{dist} {v[dist]}" if dist else "not installed"
        return StackStatus("TF TPUStrategy", "CPU only", f"{detail}; no TPU here")
    if rt.tpu is not None and rt.tpu.generation == "tpu7x":
        return StackStatus("TF TPUStrategy", "not supported", "TensorFlow does not support TPU7x")
    if dist == "tensorflow-tpu":
        return StackStatus(
            "TF TPUStrategy",
            "works as shipped",
            f"tensorflow-tpu {v[dist]}, libtpu {v.get('libtpu') or 'MISSING'}",
        )
    found = (
        f"{dist} {v[dist]} is importable but has no TPU kernels (TPUStrategy fails with "
        "'No OpKernel was registered to support Op ConfigureDistributedTPU')"
        if dist
        else "TensorFlow is not installed"
    )
    return StackStatus("TF TPUStrategy", "needs install",
                       f"{found}; opt in with prepare(..., install_tensorflow_tpu=True) "
                       f"(tensorflow-tpu=={TENSORFLOW_TPU_VERSION}; risk: "
                       "googlecolab/colabtools#5174)")  # fmt: skip


def _torch_xla_status(v: Mapping[str, str | None], on_tpu: bool) -> StackStatus:
    """PyTorch/XLA: torch and torch_xla of one minor version."""
    torch, xla = v.get("torch"), v.get("torch_xla")
    if torch and xla and runtime.same_release(torch, xla):
        verdict = "works as shipped" if on_tpu else "CPU only"
        return StackStatus("torch_xla", verdict, f"torch {torch}, torch_xla {xla} (PJRT)")
    if torch and xla:
        return StackStatus("torch_xla", "needs install",
                           f"torch {torch} and torch_xla {xla} do not match: "
                           f"pip install 'torch_xla[tpu]=={_minor(torch)}.*'")  # fmt: skip
    return StackStatus("torch_xla", "needs install",
                       f"pip install torch=={TORCH_XLA_VERSION} "
                       f"'torch_xla[tpu]=={TORCH_XLA_VERSION}'")  # fmt: skip


def _torch_tpu_status(v: Mapping[str, str | None], on_tpu: bool) -> StackStatus:
    """TorchTPU (torch-tpu): needs torch 2.11+ and libtpu >= 0.0.50; no CPU mode."""
    if v.get("torch-tpu"):
        return StackStatus(
            "TorchTPU",
            "works as shipped" if on_tpu else "not supported",
            f"torch-tpu {v['torch-tpu']}" + ("" if on_tpu else ": no CPU mode"),
        )
    return StackStatus("TorchTPU", "needs install" if on_tpu else "not supported",
                       "pip install torch-tpu (torch 2.11-2.15, libtpu >= 0.0.50: replaces "
                       "the image's torch and libtpu)" if on_tpu
                       else "no CPU or simulated-device mode")  # fmt: skip


def describe_stacks(statuses: Sequence[StackStatus]) -> str:
    """One aligned line per stack."""
    width = max(len(s.stack) for s in statuses)
    return "\n".join(f"{s.stack:<{width}}  {s.verdict:<16}  {s.detail}" for s in statuses)


@dataclass(frozen=True)
class Prepared(runtime.Runtime):
    """What :func:`prepare` returns: ``runtime.detect()``'s answer plus what TensorFlow can do here.

    Attributes:
        tf_on_device: TensorFlow can run its model on this runtime's device: on a TPU only with
            ``tensorflow-tpu`` (or a legacy TPU Node); on a CPU or GPU whenever it is installed.
        tf_host: TensorFlow imports, so host-side work (``tf.data``, TFRecords) runs, e.g.
            Kaggle's ``tensorflow-cpu`` on a TPU.
        tf_note: on a runtime where ``tf_on_device`` is False, how to get TensorFlow there.
    """

    tf_on_device: bool = False
    tf_host: bool = False
    tf_note: str = ""


def tf_runs_here(rt: runtime.Runtime, what: str, *, host_only: bool = False) -> bool:
    """The one-line gate of a TensorFlow cell: True when it can run on this runtime.

    Otherwise it prints ``Skipped on this runtime: <what> (<how to get it>)`` and returns False,
    so the notebook goes on with its next cell. In a notebook::

        if bootstrap.tf_runs_here(rt, "TPUStrategy training of the seed CNN"):
            ...  # the cell's code, indented once

    Args:
        rt: what :func:`prepare` returned.
        what: what the cell shows, for the skip line.
        host_only: the cell needs TensorFlow on the host only (``tf.data``, TFRecords), not
            TensorFlow on the TPU: it runs wherever TensorFlow imports.
    """
    if not isinstance(rt, Prepared):
        raise TypeError("tf_runs_here needs the runtime that bootstrap.prepare(...) returned")
    if host_only:
        if rt.tf_host:
            return True
        how = (
            f"needs TensorFlow, which is not installed here: pip install "
            f"tensorflow-cpu=={TENSORFLOW_CPU_VERSION}, then restart the runtime"
        )
    else:
        if rt.tf_on_device:
            return True
        how = rt.tf_note or "needs TensorFlow, which is not installed here (make setup)"
    print(f"Skipped on this runtime: {what} ({how}).")
    return False


def tf_on_tpu(rt: runtime.Runtime, versions: Mapping[str, str | None] | None = None) -> bool:
    """Whether TensorFlow can drive this runtime's TPU (False off a TPU); ``Prepared``'s rule."""
    if rt.accelerator != "tpu":
        return False
    if isinstance(rt, Prepared):
        return rt.tf_on_device
    v = results.versions(STACK_DISTRIBUTIONS) if versions is None else dict(versions)
    return _prepared(rt, v, show=False).tf_on_device


def _system() -> str:
    return f"{platform.system() or 'an unknown system'} on {platform.machine() or 'unknown'}"


def torch_xla_wheels_here() -> bool:
    """torch_xla ships wheels for Linux x86_64 only (requirements.txt skips it elsewhere)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _pip(args: Sequence[str]) -> str | None:
    """``pip install -q args`` in this kernel's Python; None on success, else the error text."""
    command = [sys.executable, "-m", "pip", "install", "-q", *args]
    print("Installing what this runtime lacks:", " ".join(args))
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode == 0:
        return None
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    return f"pip failed ({' '.join(command)}):\n{tail}"


def prepare(
    needs: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    allow_install: bool | None = None,
    install_tensorflow_tpu: bool = False,
    versions: Mapping[str, str | None] | None = None,
) -> Prepared:
    """Get this kernel ready for a notebook and return where it runs (``runtime.detect()``).

    Args:
        needs: import names the notebook uses, e.g. ``["tensorflow"]``, ``["jax", "keras"]``.
        env: the environment to adjust (default ``os.environ``).
        allow_install: install missing packages with pip. Default: only on Colab and Kaggle
            (recognised by what they set, see ``utils.runtime``), never when
            ``COURSE_NO_INSTALL=1``.
        install_tensorflow_tpu: on a TPU whose TensorFlow cannot use it (none, plain
            ``tensorflow`` or ``tensorflow-cpu``), install ``tensorflow-tpu`` anyway. Off by
            default: see :data:`TF_TPU_RISK`.
        versions: installed distributions (default: read from package metadata); tests fake it.

    On a TPU it prints what each stack can do here (:func:`stack_status`), so "ready" is never
    silent. Where the notebook needs TensorFlow on a TPU that its TensorFlow cannot use, it does
    not stop: it installs ``tensorflow-cpu`` where there is no TensorFlow at all (host-side
    ``tf.data``; see :data:`TENSORFLOW_CPU_VERSION`), prints one line, and the returned
    ``tf_on_device`` is False, so :func:`tf_runs_here` skips the cells that need the TPU.

    Raises:
        ModuleNotFoundError: a needed package is missing and may not be installed here; the
            message says how to get it.
        RuntimeError: pip failed; the message holds the command and pip's last lines (a failed
            ``tensorflow-cpu`` install on a TPU only prints, since the TPU sections still run).
    """
    env = os.environ if env is None else env
    for key, value in QUIET_ENV.items():
        env.setdefault(key, value)

    read_versions = versions is None
    v = results.versions(STACK_DISTRIBUTIONS) if read_versions else dict(versions)
    rt = runtime.detect(env=env, frameworks={**{n: None for n in runtime.FRAMEWORKS}, **v})
    on_tpu_vm = rt.accelerator == "tpu" and rt.tpu is not None
    if rt.accelerator == "tpu":
        print("What runs on this TPU (utils.bootstrap.stack_status):")
        print(describe_stacks(stack_status(rt, v)))

    hosted = rt.platform in ("colab", "kaggle") and env.get("COURSE_NO_INSTALL") != "1"
    if allow_install is None:
        allow_install = hosted
    # TensorFlow on a TPU VM is decided here, never through `missing` below.
    tf_on_tpu_vm = "tensorflow" in needs and on_tpu_vm
    if tf_on_tpu_vm:
        _tensorflow_for_tpu_vm(v, allow_install, install_tensorflow_tpu)
    missing = [m for m in needs if not is_installed(m) and not (tf_on_tpu_vm and m == "tensorflow")]
    if missing:
        _install_missing(rt, missing, v, allow_install)
        if read_versions:
            v = results.versions(STACK_DISTRIBUTIONS)
    return _prepared(rt, v, show="tensorflow" in needs)


def _tensorflow_for_tpu_vm(
    v: dict[str, str | None], allow_install: bool, install_tensorflow_tpu: bool
) -> None:
    """A TPU VM notebook that needs TensorFlow: ``tensorflow-tpu`` if opted in, else (where
    there is no TensorFlow at all) ``tensorflow-cpu`` for host-side work; ``v`` is updated."""
    tf_dist = tensorflow_distribution(v)
    if tf_dist != "tensorflow-tpu" and install_tensorflow_tpu:
        if allow_install is False:
            raise ModuleNotFoundError(
                "install_tensorflow_tpu=True but installing is off here (allow_install=False or "
                "COURSE_NO_INSTALL=1)."
            )
        print(f"Installing tensorflow-tpu=={TENSORFLOW_TPU_VERSION} (opted in). {TF_TPU_RISK}")
        error = _pip([f"tensorflow-tpu=={TENSORFLOW_TPU_VERSION}"])
        if error:
            raise RuntimeError(error + "\nRestart the runtime and run this cell again.")
        v["tensorflow-tpu"] = TENSORFLOW_TPU_VERSION
    elif tf_dist is None and allow_install:
        if _pip([f"tensorflow-cpu=={TENSORFLOW_CPU_VERSION}"]) is None:
            v["tensorflow-cpu"] = TENSORFLOW_CPU_VERSION
        else:  # the TPU sections still run: say it in one line and go on
            print(
                "Could not install tensorflow-cpu (no network?): the TensorFlow cells are skipped."
            )


def _install_missing(
    rt: runtime.Runtime, missing: Sequence[str], v: Mapping[str, str | None], allow_install: bool
) -> None:
    """pip-install the ``missing`` import names, or raise saying how to get them here."""
    if "torch_xla" in missing and not torch_xla_wheels_here():
        raise ModuleNotFoundError(
            f"torch_xla publishes wheels for Linux on x86_64 only, and this is {_system()}: "
            "this notebook cannot run here. Run it on Colab or Kaggle (TPU), or on a Linux x86_64 "
            "machine; every other notebook runs here."
        )
    if missing and not allow_install:
        raise ModuleNotFoundError(
            f"{', '.join(missing)} not installed for {sys.executable}. "
            "Locally, run `make setup` in the course folder (it builds .venv from "
            "requirements.txt and registers the 'Python (TPU course)' kernel), then pick that "
            "kernel. On Colab or Kaggle this cell installs what is missing by itself."
        )
    for args in install_plan(rt, missing, versions=v):
        error = _pip(args)
        if error:
            raise RuntimeError(
                f"{error}\nCheck the runtime has network access and see the README's "
                "troubleshooting table for known version conflicts."
            )
    importlib.invalidate_caches()  # let find_spec see what pip just installed
    still_missing = [m for m in missing if not is_installed(m)]
    if still_missing:
        raise ModuleNotFoundError(
            f"{', '.join(still_missing)} still not importable after installing: restart the "
            "runtime (Runtime > Restart session) and run this cell again."
        )


def _prepared(rt: runtime.Runtime, v: Mapping[str, str | None], *, show: bool) -> Prepared:
    """``rt`` with what TensorFlow can do on it; on a TPU where it cannot, one printed line."""
    dist = tensorflow_distribution(v)
    tf_host = dist is not None
    tpu = rt.tpu if rt.accelerator == "tpu" else None
    if tpu is None:
        tf_on_device, note = tf_host, ""
    elif tpu.generation == "tpu7x":
        tf_on_device, note = False, "TensorFlow does not support TPU7x: JAX or PyTorch run it"
    elif dist == "tensorflow-tpu":
        tf_on_device, note = tf_host, ""
    else:
        tf_on_device = False
        note = (
            "needs TensorFlow on the TPU: set INSTALL_TENSORFLOW_TPU = True in the set-up cell "
            "and run the notebook again, or use a Cloud TPU VM with tensorflow-tpu"
        )
    if show and tpu is not None and not tf_on_device:
        found = f"{dist} {v[dist]}" if dist else "no TensorFlow"
        host = "runs tf.data on the host but has no TPU kernels" if dist else "is installed"
        print(
            f"TensorFlow here: {found} {host}; the cells that need TensorFlow on the TPU are "
            "skipped, each with a note (INSTALL_TENSORFLOW_TPU = True to install tensorflow-tpu; "
            "risk: googlecolab/colabtools#5174)."
        )
    values = {f.name: getattr(rt, f.name) for f in fields(runtime.Runtime)}
    return Prepared(**values, tf_on_device=tf_on_device, tf_host=tf_host, tf_note=note)
