"""The work of every notebook's set-up cell: quiet logs, the right packages, checked parameters.

Framework-free: this module decides *what* is missing by looking at installed package metadata
(``importlib``), never by importing TensorFlow or torch_xla (on a TPU VM that would grab the chip).

* Locally (and in CI) it never installs anything: a missing package is a clear error that points
  to ``make setup``, which builds ``.venv`` and the ``tpu-course`` kernel from requirements.txt.
* On Colab and Kaggle it installs only what the runtime lacks, with versions that fit what is
  preinstalled (for example torch_xla to match Colab's torch), and says what it installed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from utils import runtime

# Environment defaults that keep notebook output readable and comparable under nbval.
QUIET_ENV: Mapping[str, str] = {
    "TF_CPP_MIN_LOG_LEVEL": "2",  # TensorFlow's C++ INFO and WARNING lines
    "GRPC_VERBOSITY": "ERROR",
}

# Versions the course is tested with (requirements.txt pins the same for the CPU machine).
TENSORFLOW_VERSION = "2.21.0"
TENSORFLOW_TPU_VERSION = "2.20.0"  # newest tensorflow-tpu on PyPI; it trails tensorflow
LIBTPU_TF_INDEX = "https://storage.googleapis.com/libtpu-tf-releases/index.html"
TORCH_XLA_VERSION = "2.9.0"  # its binary needs exactly the same torch version

# Import name -> distribution name, for the packages the notebooks ask for.
DISTRIBUTIONS: Mapping[str, str] = {
    "tensorflow": "tensorflow",
    "torch": "torch",
    "torch_xla": "torch_xla",
    "matplotlib": "matplotlib",
    "psutil": "psutil",
    "numpy": "numpy",
}


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution (e.g. ``"torch"``), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _minor(version: str) -> str:
    """``"2.9.0+cu126"`` -> ``"2.9"``."""
    return ".".join(version.split("+")[0].split(".")[:2])


def install_plan(
    rt: runtime.Runtime,
    missing: Iterable[str],
    versions: Mapping[str, str | None] | None = None,
) -> list[list[str]]:
    """The ``pip install`` argument lists that bring in ``missing`` modules on this runtime.

    ``versions`` maps distribution names to installed versions (default: read from this
    environment); it decides, for instance, which torch_xla matches a preinstalled torch.
    """
    if versions is None:
        versions = {name: installed_version(name) for name in ("torch", "tensorflow-tpu")}
    on_tpu = rt.accelerator == "tpu"
    plan: list[list[str]] = []
    for module in missing:
        if module == "tensorflow":
            if on_tpu:
                # Plain tensorflow has no TPU kernels (ConfigureDistributedTPU is missing).
                plan.append([f"tensorflow-tpu=={TENSORFLOW_TPU_VERSION}", "-f", LIBTPU_TF_INDEX])
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
        else:
            plan.append([DISTRIBUTIONS.get(module, module)])
    return plan


def prepare(
    needs: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    allow_install: bool | None = None,
) -> runtime.Runtime:
    """Get this kernel ready for a notebook and return where it runs (``runtime.detect()``).

    Args:
        needs: import names the notebook uses, e.g. ``["tensorflow"]`` or ``["torch_xla"]``.
        env: the environment to adjust (default ``os.environ``).
        allow_install: install missing packages with pip. Default: only on Colab and Kaggle,
            and never when ``COURSE_NO_INSTALL=1``.

    Raises:
        ModuleNotFoundError: a needed package is missing and may not be installed here; the
            message says how to get it.
        RuntimeError: pip failed; the message holds the command and pip's last lines.
    """
    env = os.environ if env is None else env
    for key, value in QUIET_ENV.items():
        env.setdefault(key, value)

    rt = runtime.detect(env=env)
    missing = [m for m in needs if not is_installed(m)]
    if not missing:
        return rt

    if allow_install is None:
        allow_install = rt.platform in ("colab", "kaggle") and env.get("COURSE_NO_INSTALL") != "1"
    if not allow_install:
        raise ModuleNotFoundError(
            f"{', '.join(missing)} not installed for {sys.executable}. "
            "Locally, run `make setup` in the course folder (it builds .venv from "
            "requirements.txt and registers the 'Python (TPU course)' kernel), then pick that "
            "kernel. On Colab or Kaggle this cell installs what is missing by itself."
        )
    for args in install_plan(rt, missing):
        command = [sys.executable, "-m", "pip", "install", "-q", *args]
        print("Installing what this runtime lacks:", " ".join(args))
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise RuntimeError(
                f"pip failed ({' '.join(command)}):\n{tail}\n"
                "Check the runtime has network access and see notebook 01's troubleshooting "
                "table for known version conflicts."
            )
    importlib.invalidate_caches()  # let find_spec see what pip just installed
    still_missing = [m for m in missing if not is_installed(m)]
    if still_missing:
        raise ModuleNotFoundError(
            f"{', '.join(still_missing)} still not importable after installing: restart the "
            "runtime (Runtime > Restart session) and run this cell again."
        )
    return rt


@dataclass(frozen=True)
class Range:
    """Allowed numbers for a parameter: ``Range(min=1)``, ``Range(0, 1)``; ends are inclusive."""

    min: float | None = None
    max: float | None = None

    def problem(self, value: float) -> str | None:
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            lo = "-inf" if self.min is None else f"{self.min:g}"
            hi = "inf" if self.max is None else f"{self.max:g}"
            return f"must be in [{lo}, {hi}]"
        return None


@dataclass(frozen=True)
class Choice:
    """Allowed values for a parameter: ``Choice("none", "sqrt", "linear")``."""

    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)

    def problem(self, value: Any) -> str | None:
        if value in self.values:
            return None
        return "must be one of " + ", ".join(repr(v) for v in self.values)


ParamSpec = (
    tuple[Any, type | tuple[type, ...], bool] | tuple[Any, type | tuple[type, ...], bool, Any]
)


def check_params(**specs: ParamSpec) -> None:
    """Validate papermill parameters: ``check_params(EPOCHS=(EPOCHS, int, True, Range(min=1)))``.

    Each spec is ``(value, expected type(s), None allowed[, rule])``, where the optional rule is a
    :class:`Range` or a :class:`Choice`. An ``int`` is accepted where a ``float`` is expected; a
    ``bool`` is never accepted as a number. ``None`` (when allowed) means "the default for this
    hardware" and is not checked against the rule.

    Raises:
        TypeError: naming the parameter, the value received, its type and what was expected,
            with the papermill spelling that passes the right type.
        ValueError: naming the parameter, the value and the allowed range or choices.
    """
    for name, spec in specs.items():
        value, expected, allow_none = spec[:3]
        rule = spec[3] if len(spec) > 3 else None
        if value is None and allow_none:
            continue
        types = expected if isinstance(expected, tuple) else (expected,)
        if float in types and int not in types:
            types = (*types, int)
        is_bool_as_number = isinstance(value, bool) and bool not in types
        if not isinstance(value, types) or is_bool_as_number:
            wanted = " or ".join(t.__name__ for t in types) + (" or None" if allow_none else "")
            raise TypeError(
                f"Parameter {name} must be {wanted}, but got {value!r} ({type(value).__name__}). "
                f"With papermill pass it typed, e.g. `-p {name} <value>` (not `-r`, which passes a "
                "string), or in a YAML file with `-f`."
            )
        problem = rule.problem(value) if rule is not None else None
        if problem:
            default = " (or None for this hardware's default)" if allow_none else ""
            raise ValueError(f"Parameter {name} {problem}{default}, but got {value!r}.")
