"""Which PyTorch-on-TPU stack this environment has, and whether it can work. Framework-free.

Reads installed package metadata and :mod:`utils.runtime` only: it never imports torch,
torch_xla or torch_tpu, so it can explain a broken install *before* an import crashes.

- :func:`torch_xla_problem`: torch_xla 2.9's binary needs torch 2.9 exactly (its package metadata
  does not say so; a mismatch fails at import with ``_XLAC ... undefined symbol``,
  pytorch/xla#8292). Returns what is wrong and the fix, or None.
- :func:`check_torch_xla`: the same, raised as :class:`StackMismatchError`.
- :func:`torch_tpu_line`: one line on TorchTPU (``torch-tpu`` on PyPI): not installed, installed
  without a TPU (it has no CPU or simulated-device mode), or ready.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping

from utils.runtime import major_minor, same_release

__all__ = [
    "StackMismatchError",
    "check_torch_xla",
    "installed",
    "torch_tpu_line",
    "torch_xla_problem",
]

TORCH_TPU_TORCH = ((2, 11), (2, 15))
"""torch versions torch-tpu 0.2.0 supports (inclusive; its PyPI metadata, checked 2026-11-30)."""


class StackMismatchError(RuntimeError):
    """The installed torch and torch_xla (or torch_tpu) cannot work together."""


def installed(names: tuple[str, ...] = ("torch", "torch_xla", "torch_tpu", "libtpu")) -> dict:
    """``{name: version or None}`` from package metadata (``torch-xla`` spelling too)."""
    out: dict[str, str | None] = {}
    for name in names:
        version = None
        for dist in (name, name.replace("_", "-")):
            try:
                version = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        out[name] = version
    return out


def torch_xla_problem(versions: Mapping[str, str | None] | None = None) -> str | None:
    """What is wrong with the torch/torch_xla pair, with the fix; None when they match.

    torch_xla X.Y is built against torch X.Y (2.9.0 <-> 2.9.0, 2.8.0 <-> 2.8.0). ``versions``
    defaults to :func:`installed`; pass a dict in tests.
    """
    v = dict(installed()) if versions is None else dict(versions)
    torch_v, xla_v = v.get("torch"), v.get("torch_xla")
    if not xla_v:
        return None  # nothing to mismatch
    if not torch_v:
        pair = xla_v.split("+")[0]
        return (
            f"torch_xla {xla_v} is installed but torch is not. Fix: pip install "
            f"torch=={pair} torch_xla=={pair}, then restart the runtime."
        )
    if same_release(torch_v, xla_v):
        return None
    t, x = major_minor(torch_v), major_minor(xla_v)
    assert t is not None and x is not None  # same_release() calls unreadable versions a match
    pair = xla_v.split("+")[0]
    why = ""
    if t >= TORCH_TPU_TORCH[0] and v.get("torch_tpu"):
        why = f" (torch_tpu {v['torch_tpu']} pulled in torch {torch_v}: it needs torch 2.11-2.15)"
    return (
        f"torch {torch_v} does not match torch_xla {xla_v}{why}: torch_xla {pair} only works with "
        f"torch {x[0]}.{x[1]}, and importing it would fail with '_XLAC ... undefined symbol' "
        f"(pytorch/xla#8292). Fix: pip install torch=={pair} torch_xla=={pair} (on Colab's TPU "
        "runtime, undo your torch upgrade or start a fresh runtime), then restart the runtime. "
        "TorchTPU needs its own environment."
    )


def check_torch_xla(versions: Mapping[str, str | None] | None = None) -> None:
    """Raise :class:`StackMismatchError` with :func:`torch_xla_problem`'s text if there is one."""
    problem = torch_xla_problem(versions)
    if problem:
        raise StackMismatchError(problem)


def torch_tpu_line(
    versions: Mapping[str, str | None] | None = None,
    *,
    on_tpu: bool | None = None,
    tpu_held: bool = False,
) -> str:
    """One line: can TorchTPU run here? ``on_tpu`` defaults to :func:`utils.runtime.detect`.

    ``tpu_held``: this process already opened the TPU (through torch_xla); a TorchTPU process
    cannot get the chips until it ends. The line starts with "ready:" only when it can run.
    """
    v = dict(installed()) if versions is None else dict(versions)
    if on_tpu is None:
        from utils import runtime  # framework-free

        on_tpu = runtime.detect().accelerator == "tpu"
    tpu_v = v.get("torch_tpu")
    if not tpu_v:
        where = "this TPU runtime" if on_tpu else "this machine"
        return (
            f"torch_tpu is not installed on {where}, so the TorchTPU cell is shown, not run "
            "(it needs its own environment with torch 2.11-2.15 and a TPU)."
        )
    if not on_tpu:
        return (
            f"torch_tpu {tpu_v} is installed but this machine has no TPU: TorchTPU has no CPU or "
            "simulated-device mode, so the TorchTPU cell is skipped."
        )
    t = major_minor(v.get("torch"))
    if t is None or not (TORCH_TPU_TORCH[0] <= t <= TORCH_TPU_TORCH[1]):
        return (
            f"torch_tpu {tpu_v} is installed with torch {v.get('torch')}, but it needs torch "
            "2.11-2.15: the TorchTPU cell is skipped (install it in a fresh environment)."
        )
    if tpu_held:
        return (
            f"torch_tpu {tpu_v} is installed, but this kernel holds the TPU through torch_xla: "
            "run the TorchTPU script from a fresh runtime (the TorchTPU cell is skipped)."
        )
    return f"ready: torch_tpu {tpu_v} with torch {v.get('torch')} on a TPU, the TorchTPU cell runs."
