"""Notebook parameters, checked: one rule per parameter, and rules across parameters.

Every notebook's hidden cell after its ``parameters`` cell calls :func:`check_params`, so a wrong
papermill value (``make run PARAMS="-p EPOCHS 0"``) is a clear error naming the parameter, not a
failure ten cells later. Framework-free.

- :class:`Range` / :class:`Choice`: the allowed numbers (both ends inclusive) or values;
- :func:`check_params`: types (an ``int`` passes as a ``float``, a ``bool`` never as a number),
  ``None`` where allowed ("the default for this hardware"), then the rule;
- :func:`check_together`: a rule over several parameters (e.g. a batch that the devices divide).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Choice", "ParamSpec", "Range", "check_params", "check_together"]


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
