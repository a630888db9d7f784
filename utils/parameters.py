"""Notebook parameters, checked: one rule per parameter, and rules across parameters.

Every notebook's cell after its ``parameters`` cell calls :func:`check_params`, so a wrong
papermill value (``make run PARAMS="-p EPOCHS 0"``) is a clear error naming the parameter, not a
failure ten cells later. Framework-free.

- :class:`Range` / :class:`Choice`: the allowed numbers (both ends inclusive) or values;
- :func:`check_params`: types (an ``int`` passes as a ``float``, a ``bool`` never as a number),
  ``None`` where allowed ("the default for this hardware"), then the rule;
- :func:`check_together`: a rule over several parameters (e.g. a batch that the devices divide).

Parameters that several notebooks share have one spec here, so they mean the same, allow the same
and default the same everywhere (a notebook's check cell passes the spec to ``check_params``):

- ``SIMULATED_DEVICES`` (:func:`simulated_devices_spec`): CPU devices simulated **in this
  process**, only used where the notebook runs on the CPU (a TPU or GPU uses its own chips); a
  whole number in ``1..64`` (:func:`utils.simulated_devices.check_count`, the rule every framework's
  route applies). Default rule: 8 devices in all (a v5e-8's chips; a multi-process rehearsal
  splits them over its processes); a notebook that keeps fewer says why in its parameters cell. A
  notebook whose lesson needs several devices raises the minimum (``at_least=2``), nothing else.
  :func:`simulated_devices_used`: the count this run simulated (None off the CPU).
- ``PER_REPLICA_BATCH`` (:func:`per_replica_batch_spec`): images per device and step, ``1..4096``,
  None allowed where the notebook offers the hardware's default; :func:`per_replica_batch_used`:
  the value, or for None the seed's batch of 128 per chip on a TPU/GPU and the seed's global batch
  of 128 split over the simulated devices on a CPU. One exception, notebook 02, keeps 32 per device
  on a CPU: with 16, Keras-on-JAX's 8-device all-reduce hung twice on the loaded 2-core reference
  machine (7 of 8 devices waiting 300 s for the last), as 32 never did.

Results files record both: the parameter under its own name as requested (None included), and
what the run used under the lowercase name (``"PER_REPLICA_BATCH": None, "per_replica_batch":
16``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from utils import simulated_devices as simulated

__all__ = [
    "SEED_BATCH",
    "Choice",
    "ParamSpec",
    "Range",
    "check_params",
    "check_together",
    "per_replica_batch_spec",
    "per_replica_batch_used",
    "simulated_devices_spec",
    "simulated_devices_used",
]

SEED_BATCH = 128  # the seed notebook's batch size
MAX_PER_REPLICA_BATCH = 4096


@dataclass(frozen=True)
class Range:
    """Allowed numbers for a parameter: ``Range(min=1)``, ``Range(0, 1)``; ends are inclusive."""

    min: float | None = None
    max: float | None = None

    def problem(self, value: float) -> str | None:
        too_low = self.min is not None and value < self.min
        too_high = self.max is not None and value > self.max
        if too_low or too_high:
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


def check_together(holds: bool, rule: str, **values: Any) -> None:
    """A rule across parameters (or values derived from them), checked after :func:`check_params`.

    ``check_together(batch % devices == 0, "the devices must divide the global batch",
    PER_REPLICA_BATCH=PER_REPLICA_BATCH, SIMULATED_DEVICES=SIMULATED_DEVICES)``

    Raises:
        ValueError: ``holds`` is false; the message states the rule and every value involved.
    """
    if not holds:
        shown = ", ".join(f"{name}={value!r}" for name, value in values.items())
        raise ValueError(f"Parameters {shown} break a rule: {rule}.")


def simulated_devices_spec(value: Any, *, at_least: int = 1) -> ParamSpec:
    """The one spec of ``SIMULATED_DEVICES`` for :func:`check_params` (see the module's doc).

    ``at_least``: 2 where the notebook's lesson needs several devices (splitting a batch,
    comparing one device with many); the range is otherwise the same everywhere.
    """
    simulated.check_count(at_least, "at_least")
    return (value, int, False, Range(at_least, simulated.MAX_COUNT))


def simulated_devices_used(value: int, *, on_cpu: bool) -> int | None:
    """The devices this run simulated: ``value`` where it runs on the CPU, else None (the chips)."""
    return value if on_cpu else None


def per_replica_batch_spec(value: Any, *, allow_none: bool = True, at_least: int = 1) -> ParamSpec:
    """The one spec of ``PER_REPLICA_BATCH``: images per device and step, up to 4096.

    ``allow_none``: the notebook offers None, the hardware's default
    (:func:`per_replica_batch_used`);
    ``at_least``: a larger minimum where the notebook's lesson needs it.
    """
    return (value, int, allow_none, Range(at_least, MAX_PER_REPLICA_BATCH))


def per_replica_batch_used(value: int | None, *, on_cpu: bool, devices: int) -> int:
    """``PER_REPLICA_BATCH`` as the run uses it: ``value``, or for None the hardware's default.

    The default: the seed's batch of 128 on every chip of a TPU or GPU; on a CPU the seed's global
    batch of 128 split over the ``devices`` it simulates (8 devices: 16 each), so a CPU run takes
    the seed's steps.
    """
    if value is not None:
        return value
    if not on_cpu:
        return SEED_BATCH
    return max(1, SEED_BATCH // simulated.check_count(devices, "devices"))
