"""Count what JAX compiles, with JAX's own signals (imports JAX).

Two signals, both JAX's:

- ``jax.config.update("jax_log_compiles", True)`` makes JAX log every compilation at WARNING
  level: ``"Compiling jit(train_step) with global shapes and types (ShapedArray(float32[3,3,3,32]),
  ...)"`` from ``jax._src.interpreters.pxla``. :class:`CompileLog` switches it on, captures those
  records (instead of letting them reach stderr) and switches it back off.
- A jitted function's ``_cache_size()``: how many compiled versions it holds (one per distinct
  input shapes/dtypes/shardings). Private but long-standing API; :func:`cache_size` returns
  ``None`` where a JAX version lacks it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import jax

__all__ = ["CompileEvent", "CompileLog", "cache_size"]

_COMPILING = re.compile(r"Compiling (?:jit\()?(?P<name>[^)\s]+)\)? with global shapes and types")
_SHAPE = re.compile(r"ShapedArray\((?P<shape>[a-z0-9]+\[[0-9,\s]*\])")


@dataclass(frozen=True)
class CompileEvent:
    """One compilation: the function's name and its argument shapes, e.g. ``float32[64,10]``."""

    name: str
    shapes: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"compiled {self.name}({', '.join(self.shapes)})"


@dataclass
class CompileLog:
    """``with CompileLog() as log: ...`` then ``log.count("train_step")``, ``log.events``."""

    events: list[CompileEvent] = field(default_factory=list)

    def __enter__(self) -> CompileLog:
        self._previous = jax.config.jax_log_compiles
        self._logger = logging.getLogger("jax")
        self._handler = _Collector(self)
        self._propagate = self._logger.propagate
        # Keep the records out of stderr while we hold them (they are printed from here instead).
        self._muted = [h for h in self._logger.handlers if not isinstance(h, _Collector)]
        for handler in self._muted:
            self._logger.removeHandler(handler)
        self._logger.propagate = False
        self._logger.addHandler(self._handler)
        jax.config.update("jax_log_compiles", True)
        return self

    def __exit__(self, *exc: Any) -> None:
        jax.config.update("jax_log_compiles", self._previous)
        self._logger.removeHandler(self._handler)
        for handler in self._muted:
            self._logger.addHandler(handler)
        self._logger.propagate = self._propagate

    def of(self, name: str) -> list[CompileEvent]:
        """The compilations of functions whose name contains ``name``."""
        return [e for e in self.events if name in e.name]

    def count(self, name: str) -> int:
        return len(self.of(name))


class _Collector(logging.Handler):
    def __init__(self, log: CompileLog) -> None:
        super().__init__(level=logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match = _COMPILING.search(message)
        if match:
            shapes = tuple(m.group("shape").replace(" ", "") for m in _SHAPE.finditer(message))
            self._log.events.append(CompileEvent(match.group("name"), shapes, message))


def cache_size(jitted: Any) -> int | None:
    """How many compiled versions a ``jax.jit`` function holds (``None``: not offered here)."""
    size = getattr(jitted, "_cache_size", None)
    return int(size()) if callable(size) else None
