"""Summarise a profiler trace without a viewer: top ops by total time. Framework-free.

``jax.profiler.trace(dir, create_perfetto_trace=True)`` writes
``dir/plugins/profile/<run>/perfetto_trace.json.gz`` (torch_xla's profiler on the CPU writes
``<host>.trace.json.gz``): Chrome trace-event JSON, ``{"traceEvents": [...]}``. On a CPU the ops
XLA ran are complete events (``"ph": "X"``, ``ts``/``dur`` in microseconds) whose ``args`` name the
HLO op (``hlo_op``) and the compiled program (``hlo_module``); a TPU trace puts them on XProf's
"XLA Ops" lines instead (:func:`device_op_events` reads both). Here we add them up.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACE_PATTERNS = ("perfetto_trace.json.gz", "*.trace.json.gz", "*.trace.json")

PROFILER_NOISE = (re.compile(r"Can't import tensorflow\.python\.profiler\.trace"),)
"""jax 0.7.x's profiler logs this (twice) on an image without TensorFlow; nothing is missing."""


@dataclass(frozen=True)
class OpStat:
    """One op (or op kind): calls, total time, and share of the summed time of the ops counted."""

    name: str
    calls: int
    total_us: float
    share: float


@dataclass(frozen=True)
class HloOp:
    """An HLO instruction: its output shape and the JAX operation it came from (may be '')."""

    name: str
    shape: str
    source: str


def find_trace_file(log_dir: str | Path) -> Path:
    """The newest trace-event file under ``log_dir`` (Perfetto's first, then the host trace)."""
    for pattern in TRACE_PATTERNS:
        found = sorted(Path(log_dir).rglob(pattern), key=lambda p: (p.stat().st_mtime, str(p)))
        if found:
            return found[-1]
    raise FileNotFoundError(
        f"no trace file ({', '.join(TRACE_PATTERNS)}) under {log_dir}: was the profiler stopped?"
    )


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """Trace events from Chrome trace-event JSON (object with ``traceEvents``, or a bare list)."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def op_kind(name: str) -> str:
    """An HLO op name without its instance number: ``ynn_fusion.15`` -> ``ynn_fusion``."""
    return re.sub(r"\.\d+$", "", name)


def top_ops(
    events: Iterable[Mapping[str, Any]],
    *,
    top: int | None = 10,
    module: str | None = None,
    by_kind: bool = False,
) -> list[OpStat]:
    """Total time per op over complete events naming one in ``args["hlo_op"]``, largest first.

    ``module``: only ops of programs whose ``hlo_module`` contains it. ``by_kind``: ``fusion.1``,
    ``fusion.2`` count as ``fusion``. ``top``: how many rows (None: all).
    """
    totals: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for event in events:
        args = event.get("args") or {}
        raw = args.get("hlo_op")
        in_module = module is None or module in str(args.get("hlo_module", ""))
        if event.get("ph") != "X" or raw is None or not in_module:
            continue
        name = op_kind(str(raw)) if by_kind else str(raw)
        totals[name] += float(event.get("dur", 0.0))
        calls[name] += 1
    grand = sum(totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return [OpStat(n, calls[n], t, t / grand) for n, t in ranked][:top]


_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\([^=]*?\)|[a-z0-9]+\[[^\]]*\])"
)
_SOURCE = re.compile(r'op_name="(?P<op>[^"]*)"')


def hlo_op_info(hlo_text: str) -> dict[str, HloOp]:
    """Output shape and JAX source op (its ``op_name`` metadata, e.g.
    ``jit(train_step)/transpose(jvp())/conv_general_dilated``) of every instruction in an HLO
    module's text; ops XLA created itself have no source."""
    ops: dict[str, HloOp] = {}
    for line in hlo_text.splitlines():
        if match := _INSTRUCTION.match(line):
            shape = re.sub(r"\{[0-9,]*\}", "", match["shape"])  # drop layouts {3,2,1,0}
            source = _SOURCE.search(line)
            ops[match["name"]] = HloOp(match["name"], shape, source["op"] if source else "")
    return ops


def short_shape(shape: str) -> str:
    """A tuple shape ``(f32[8], s32[8], s32[8])`` as ``(f32[8], +2 more)``; others unchanged."""
    parts = re.findall(r"[a-z0-9]+\[[^\]]*\]", shape)
    return f"({parts[0]}, +{len(parts) - 1} more)" if shape[:1] == "(" and len(parts) > 1 else shape


def format_table(
    stats: Sequence[OpStat], ops: Mapping[str, HloOp] | None = None, *, width: int = 80
) -> str:
    """A plain-text table: op, calls, total ms, share (and shape/source when ``ops`` given)."""
    lines = [f"{'op':<28} {'calls':>5} {'total ms':>9} {'share':>6}"]
    if ops is not None:
        lines[0] += "  output shape / JAX source op"
    for s in stats:
        line = f"{s.name:<28} {s.calls:>5} {s.total_us / 1e3:>9.2f} {s.share:>6.1%}"
        if info := (ops or {}).get(s.name):
            source = info.source.split("/", 1)[-1] if info.source else "(made by XLA)"
            line += f"  {short_shape(info.shape)} {source}"[: width + 2]
        lines.append(line)
    return "\n".join(lines)


def device_op_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The per-op events with ``args["hlo_op"]`` and ``args["hlo_module"]`` set.

    A CPU trace already has them. A TPU trace has one event per op on each TPU process's
    "XLA Ops" line (XProf's ``kXlaOpLineName``): each gets its own name as ``hlo_op`` and the name
    of the event on that process's "XLA Modules" line that contains it as ``hlo_module``. An
    empty list means neither form is there: nothing to summarise.
    """
    events = list(events)
    cpu = [e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]
    if cpu:
        return cpu
    label = {}  # pid -> process name, (pid, tid) -> thread (line) name
    for e in events:
        if e.get("ph") == "M":
            pid = e.get("pid")
            where = pid if e.get("name") == "process_name" else (pid, e.get("tid"))
            label[where] = str(e.get("args", {}).get("name", ""))
    lines: dict[str, list] = {}
    for e in events:
        if e.get("ph") == "X" and label.get(e.get("pid"), "").startswith("/device:TPU:"):
            lines.setdefault(label.get((e.get("pid"), e.get("tid")), ""), []).append(e)

    def module_of(op: Mapping[str, Any]) -> str:
        for m in lines.get("XLA Modules", []):
            start = float(m.get("ts", 0.0))
            if m.get("pid") == op.get("pid") and start <= op["ts"] <= start + m.get("dur", 0.0):
                return str(m.get("name", ""))
        return ""

    ops = lines.get("XLA Ops", [])
    extra = [{"hlo_op": e.get("name", ""), "hlo_module": module_of(e)} for e in ops]
    return [{**e, "args": {**e.get("args", {}), **x}} for e, x in zip(ops, extra, strict=True)]
