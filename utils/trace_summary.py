"""Summarise a profiler trace without a viewer: top ops by total time.

Framework-free (gzip + json). ``jax.profiler.trace(dir, create_perfetto_trace=True)`` writes
``dir/plugins/profile/<run>/perfetto_trace.json.gz`` (and ``<host>.trace.json.gz``): Chrome
trace-event JSON, ``{"traceEvents": [...]}``. The ops XLA ran are complete events (``"ph": "X"``,
``ts``/``dur`` in microseconds) whose ``args`` name the HLO op (``hlo_op``) and the compiled
program (``hlo_module``). XProf/Perfetto would draw them; here we add them up.

- :func:`find_trace_file`: the newest trace file under a log directory.
- :func:`load_events`: the event list from a ``.json`` or ``.json.gz`` file.
- :func:`top_ops`: total time, call count and share per op (or per op kind), largest first.
- :func:`hlo_op_info`: output shape and JAX source op of each HLO op, from a compiled program's
  text (``jax.jit(f).lower(...).compile().as_text()``), to say what a fusion name stands for.
- :func:`format_table`: a plain-text table.
- :func:`summarize`: the newest trace in brief (file, event count, top event names); notebook 06
  reads torch_xla's traces with it.
- :func:`device_op_events`: a TPU trace's per-op events (named by XProf's line names, see
  :data:`TPU_LINES`) in the CPU form above, so :func:`top_ops` reads both; nothing when neither
  form is there (then print no finding).
- :data:`PROFILER_NOISE`: stderr lines of the profiler that say nothing about the program.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "HloOp",
    "OpStat",
    "find_trace_file",
    "format_table",
    "hlo_op_info",
    "load_events",
    "op_kind",
    "short_shape",
    "summarize",
    "top_ops",
    "device_op_events",
    "TPU_LINES",
    "PROFILER_NOISE",
]

TRACE_PATTERNS = ("perfetto_trace.json.gz", "*.trace.json.gz", "*.trace.json")

TPU_LINES = {
    "device": "/device:TPU:",  # process name prefix of each TPU core's plane
    "ops": "XLA Ops",  # thread name: one event per HLO op run, named by the op ("fusion.12")
    "modules": "XLA Modules",  # thread name: one event per program run ("jit_train_step(7)")
}
"""Where a TPU trace puts its ops: XProf's plane and line names (``xplane_schema.cc``:
``kXlaOpLineName``, ``kXlaModuleLineName``). A CPU trace instead names the op in ``args``."""

PROFILER_NOISE = (re.compile(r"Can't import tensorflow\.python\.profiler\.trace"),)
"""jax 0.7.x's profiler logs this (twice) on an image without TensorFlow; nothing is missing."""


@dataclass(frozen=True)
class OpStat:
    """One op (or op kind): how often it ran and for how long in total."""

    name: str
    calls: int
    total_us: float
    share: float  # of the summed op time of the events considered

    @property
    def mean_us(self) -> float:
        return self.total_us / self.calls


@dataclass(frozen=True)
class HloOp:
    """An HLO instruction: its output shape and the JAX operation it came from (may be '')."""

    name: str
    shape: str
    source: str


def find_trace_file(log_dir: str | Path) -> Path:
    """The newest trace-event file under ``log_dir`` (Perfetto's first, then the host trace).

    Raises:
        FileNotFoundError: no trace file; the message lists what the directory holds.
    """
    root = Path(log_dir)
    for pattern in TRACE_PATTERNS:
        found = sorted(root.rglob(pattern), key=lambda p: (p.stat().st_mtime, str(p)))
        if found:
            return found[-1]
    held = sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []
    raise FileNotFoundError(
        f"no trace file ({', '.join(TRACE_PATTERNS)}) under {root}; it holds: "
        f"{held[:10] or 'nothing'}. Was the profiler stopped (the `with` block ended)?"
    )


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """Trace events from Chrome trace-event JSON (object with ``traceEvents``, or a bare list)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: traceEvents is {type(events).__name__}, expected a list")
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
    key: str | None = "hlo_op",
) -> list[OpStat]:
    """Total time per op over complete events that name one in ``args[key]``, largest first.

    Args:
        key: the ``args`` field naming the op; ``None``: the event's own ``name`` (any
            profiler's events, e.g. torch_xla's ``StepTrace`` spans).
        module: keep only ops of compiled programs whose ``hlo_module`` contains this text
            (e.g. ``"train_step"``).
        by_kind: group ``fusion.1``, ``fusion.2``, ... together (see :func:`op_kind`).
        top: how many rows (``None``: all).
    """
    totals: dict[str, float] = {}
    calls: dict[str, int] = {}
    for event in events:
        args = event.get("args") or {}
        raw = event.get("name") if key is None else args.get(key)
        if event.get("ph") != "X" or raw is None:
            continue
        if module is not None and module not in str(args.get("hlo_module", "")):
            continue
        name = str(raw)
        name = op_kind(name) if by_kind else name
        totals[name] = totals.get(name, 0.0) + float(event.get("dur", 0.0))
        calls[name] = calls.get(name, 0) + 1
    grand = sum(totals.values())
    stats = [
        OpStat(n, calls[n], t, t / grand if grand else 0.0)
        for n, t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return stats if top is None else stats[:top]


def summarize(log_dir: str | Path, *, top: int = 8) -> dict[str, Any]:
    """The newest trace under ``log_dir`` in brief (any profiler: JAX's, torch_xla's).

    Returns ``file`` (its name), ``events`` (complete events in it) and ``top``: a list of
    ``(name, calls, total milliseconds)`` for the ``top`` event names with the most time.

    Raises:
        FileNotFoundError: the profiler wrote no trace there (see :func:`find_trace_file`).
    """
    path = find_trace_file(log_dir)
    events = [e for e in load_events(path) if e.get("ph") == "X"]
    rows = [(s.name, s.calls, s.total_us / 1000.0) for s in top_ops(events, top=top, key=None)]
    return {"file": path.name, "events": len(events), "top": rows}


_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\([^=]*?\)|[a-z0-9]+\[[^\]]*\])"
)
_SOURCE = re.compile(r'op_name="(?P<op>[^"]*)"')


def hlo_op_info(hlo_text: str) -> dict[str, HloOp]:
    """Output shape and JAX source op of every instruction in an HLO module's text.

    The source is the ``op_name`` metadata JAX attaches, e.g.
    ``jit(train_step)/transpose(jvp())/conv_general_dilated`` (``transpose(jvp())`` marks the
    backward pass); ops XLA created itself have none.
    """
    ops: dict[str, HloOp] = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        shape = re.sub(r"\{[0-9,]*\}", "", match.group("shape"))  # drop layouts {3,2,1,0}
        source = _SOURCE.search(line)
        name = match.group("name")
        ops[name] = HloOp(name, shape, source.group("op") if source else "")
    return ops


def short_shape(shape: str) -> str:
    """A tuple shape ``(f32[8], s32[8], s32[8])`` as ``(f32[8], +2 more)``; others unchanged."""
    if not shape.startswith("("):
        return shape
    parts = re.findall(r"[a-z0-9]+\[[^\]]*\]", shape)
    if len(parts) <= 1:
        return shape
    return f"({parts[0]}, +{len(parts) - 1} more)"


def format_table(
    stats: Sequence[OpStat], ops: Mapping[str, HloOp] | None = None, *, width: int = 80
) -> str:
    """A plain-text table: op, calls, total ms, share (and shape/source when ``ops`` given)."""
    header = f"{'op':<28} {'calls':>5} {'total ms':>9} {'share':>6}"
    if ops is not None:
        header += "  output shape / JAX source op"
    lines = [header]
    for s in stats:
        line = f"{s.name:<28} {s.calls:>5} {s.total_us / 1e3:>9.2f} {s.share:>6.1%}"
        info = ops.get(s.name) if ops is not None else None
        if info is not None:
            source = info.source.split("/", 1)[-1] if info.source else "(made by XLA)"
            line += f"  {short_shape(info.shape)} {source}"[: width + 2]
        lines.append(line)
    return "\n".join(lines)


def device_op_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The per-op events of ``events`` with ``args["hlo_op"]`` and ``args["hlo_module"]`` set.

    A CPU trace already has them (returned as they are). A TPU trace has them on the
    :data:`TPU_LINES` lines instead: each op event on an "XLA Ops" thread of a TPU process gets
    its own name as ``hlo_op`` and the name of the "XLA Modules" event that contains it, on the
    same process, as ``hlo_module``. An empty list means nothing matched either form: a summary
    of it is no finding.
    """
    events = list(events)
    cpu = [e for e in events if e.get("ph") == "X" and "hlo_op" in (e.get("args") or {})]
    if cpu:
        return cpu
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e.get("pid")] = str((e.get("args") or {}).get("name", ""))
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name", ""))
    tpu = {pid for pid, name in processes.items() if name.startswith(TPU_LINES["device"])}
    ops, modules = [], {}
    for e in events:
        if e.get("ph") != "X" or e.get("pid") not in tpu:
            continue
        line = threads.get((e.get("pid"), e.get("tid")), "")
        if line == TPU_LINES["ops"]:
            ops.append(e)
        elif line == TPU_LINES["modules"]:
            modules.setdefault(e.get("pid"), []).append(e)
    out = []
    for e in ops:
        start = float(e.get("ts", 0.0))
        module = next(
            (
                str(m.get("name", ""))
                for m in modules.get(e.get("pid"), [])
                if float(m.get("ts", 0.0))
                <= start
                <= float(m.get("ts", 0.0)) + float(m.get("dur", 0.0))
            ),
            "",
        )
        args = {**(e.get("args") or {}), "hlo_op": str(e.get("name", "")), "hlo_module": module}
        out.append({**e, "args": args})
    return out
