"""Timelines of an input pipeline: when each element was read, mapped and consumed.

Like the figures of the tf.data performance guide (https://www.tensorflow.org/guide/data_performance),
but recorded from the real pipeline. Inside the pipeline (``utils.tf.input_bench.timed``) each
stage stamps its start and end with ``tf.timestamp()`` into the element itself, as ``t_<stage>``;
the stamps travel through ``batch``, ``cache`` and ``unbatch``, so a cached element keeps the
stamps of the epoch that really read it. Outside, :class:`Timeline` collects those stamps plus
the consumer's own spans, :meth:`Timeline.check` checks each element's order, and
:func:`plot_timeline` draws one row per stage. ``tf.timestamp()`` and :func:`time.time` read the
same wall clock, so all spans share one axis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

STAMP_PREFIX = "t_"

__all__ = ["STAMP_PREFIX", "Span", "Timeline", "plot_timeline"]


@dataclass(frozen=True, order=True)
class Span:
    """Element ``element`` spent ``[start, end]`` (seconds, wall clock) in ``stage``."""

    start: float
    end: float
    element: int
    stage: str


@dataclass
class Timeline:
    """Spans of many elements through many stages (a span seen twice is kept once)."""

    spans: set[Span] = field(default_factory=set)

    def add(self, stage: str, elements: Iterable[int], start: float, end: float) -> None:
        """Record that ``elements`` were in ``stage`` from ``start`` to ``end`` (seconds)."""
        self.spans.update(Span(float(start), float(end), int(e), stage) for e in elements)

    def add_batch(self, batch: Mapping[str, Any]) -> list[int]:
        """Record the ``t_<stage>`` stamps a batch carries; return its element indices."""
        index = np.asarray(batch["index"]).reshape(-1)
        for key in (k for k in batch if k.startswith(STAMP_PREFIX)):
            stamps = np.asarray(batch[key]).reshape(-1, 2)
            for element, (start, end) in zip(index, stamps, strict=True):
                self.add(key[len(STAMP_PREFIX) :], [element], start, end)
        return index.tolist()

    def record_consumer(
        self, batches: Iterable[Mapping[str, Any]], step: Callable[[Any], object]
    ) -> None:
        """Iterate ``batches``; record their stamps and a ``consume`` span per ``step`` call."""
        for batch in batches:
            index = self.add_batch(batch)
            start = time.time()
            step(batch)
            self.add("consume", index, start, time.time())

    @property
    def start(self) -> float:
        """Earliest start of any span (the plot's time zero)."""
        return min(s.start for s in self.spans)

    @property
    def end(self) -> float:
        """Latest end of any span."""
        return max(s.end for s in self.spans)

    def by_element(self) -> dict[int, list[Span]]:
        """Each element's spans, sorted by start time."""
        out: dict[int, list[Span]] = {}
        for span in sorted(self.spans):
            out.setdefault(span.element, []).append(span)
        return out

    def check(self, order: Sequence[str], *, across_epochs: bool = False) -> None:
        """Raise ValueError unless each element's first spans follow ``order`` and its spans do
        not overlap (``across_epochs=True``, for ``repeat``: the next epoch may start on an
        element while the consumer still holds it, so only the order is checked)."""
        problems = []
        for element, spans in self.by_element().items():
            for before, after in zip(spans, spans[1:], strict=False):
                if not across_epochs and after.start < before.end - 1e-6:
                    problems.append(f"element {element}: {before} overlaps {after}")
            firsts: dict[str, float] = {}
            for span in spans:
                firsts.setdefault(span.stage, span.start)
            seq = [firsts[s] for s in order if s in firsts]
            if seq != sorted(seq):
                problems.append(f"element {element}: stages out of order {list(firsts)}")
        if problems:
            raise ValueError(
                f"{len(problems)} timeline problems, first ones:\n" + "\n".join(problems[:5])
            )


def plot_timeline(timeline: Timeline, *, title: str, ax: Any, stages: Sequence[str]) -> None:
    """One row per stage, one bar per distinct span; overlapping (parallel) spans are drawn in
    sub-lanes so they stay visible."""
    import matplotlib

    colors = matplotlib.colormaps["plasma"]
    t0 = timeline.start
    for row, stage in enumerate(stages):
        bars = sorted({(s.start - t0, s.end - s.start) for s in timeline.spans if s.stage == stage})
        lanes: list[list[tuple[float, float]]] = []  # each lane: bars that do not overlap
        for start, width in bars:
            lane = next((lane for lane in lanes if sum(lane[-1]) <= start), None)
            if lane is None:
                lanes.append(lane := [])
            lane.append((start, max(width, 1e-4)))
        height = 0.8 / max(1, len(lanes))
        for k, lane in enumerate(lanes):
            y = (row - 0.4 + k * height, height)
            ax.broken_barh(lane, y, color=colors(row / len(stages)), alpha=0.8)
    ax.set_yticks(range(len(stages)), stages)
    ax.invert_yaxis()
    ax.set_xlim(0, timeline.end - t0)
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    ax.grid(axis="x", linestyle=":")
