"""Timelines of an input pipeline: when each element was read, mapped and consumed.

Like the figures of the tf.data performance guide (https://www.tensorflow.org/guide/data_performance),
but recorded from the real pipeline instead of drawn by hand. Two halves:

- Inside the pipeline (TensorFlow: ``utils.tf.stamps.timed``) each stage's function stamps its
  start and end with ``tf.timestamp()`` (a graph op: no Python, no GIL) into the element itself,
  as ``t_<stage>`` (shape ``(2,)`` per element). The stamps travel with the data through
  ``batch``, ``cache`` and ``unbatch``, so a cached element keeps the stamps of the epoch that
  really read it (the next epochs show no new read: that is what caching means).
- Outside (plain Python): :class:`Timeline` collects those stamps plus the consumer's own spans
  (:meth:`Timeline.add`), checks that each element's spans are ordered and do not overlap
  (:meth:`Timeline.check`), and :func:`plot_timeline` draws one row per stage.

``tf.timestamp()`` and :func:`time.time` read the same wall clock, so pipeline and consumer
spans share one axis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.figure

STAMP_PREFIX = "t_"

__all__ = ["STAMP_PREFIX", "Span", "Timeline", "plot_timeline", "stamp_keys"]


@dataclass(frozen=True, order=True)
class Span:
    """Element ``element`` spent ``[start, end]`` (seconds, wall clock) in ``stage``."""

    start: float
    end: float
    element: int
    stage: str


def stamp_keys(features: Mapping[str, Any]) -> list[str]:
    """The ``t_<stage>`` keys of an element, in the order they were added."""
    return [k for k in features if k.startswith(STAMP_PREFIX)]


@dataclass
class Timeline:
    """Spans of many elements through many stages; one per (element, stage, start)."""

    spans: list[Span] = field(default_factory=list)
    _seen: set[tuple[int, str, float]] = field(default_factory=set, repr=False)

    def add(self, stage: str, elements: Iterable[int], start: float, end: float) -> None:
        """Record that ``elements`` were in ``stage`` from ``start`` to ``end`` (seconds)."""
        if end < start:
            raise ValueError(f"{stage}: span ends before it starts ({start} > {end})")
        for element in elements:
            key = (int(element), stage, float(start))
            if key not in self._seen:  # a cached element brings its old stamps again
                self._seen.add(key)
                self.spans.append(Span(float(start), float(end), int(element), stage))

    def add_batch(self, batch: Mapping[str, Any]) -> list[int]:
        """Record the ``t_<stage>`` stamps carried by a batch (numpy or tensors); return indices."""
        index = np.asarray(batch["index"]).reshape(-1)
        for key in stamp_keys(batch):
            stamps = np.asarray(batch[key]).reshape(-1, 2)
            for element, (start, end) in zip(index, stamps, strict=True):
                self.add(key[len(STAMP_PREFIX) :], [element], start, end)
        return index.tolist()

    def record_consumer(
        self,
        dataset: Iterable[Mapping[str, Any]],
        step: Callable[[Mapping[str, Any]], object] | None = None,
        *,
        epochs: int = 1,
        stage: str = "consume",
    ) -> None:
        """Iterate ``dataset`` ``epochs`` times; record its stamps and a span per ``step`` call."""
        for _ in range(epochs):
            for batch in dataset:
                index = self.add_batch(batch)
                start = time.time()
                if step is not None:
                    step(batch)
                self.add(stage, index, start, time.time())

    @property
    def stages(self) -> list[str]:
        """Stage names, ordered by their earliest span."""
        first: dict[str, float] = {}
        for span in self.spans:
            first[span.stage] = min(first.get(span.stage, span.start), span.start)
        return sorted(first, key=first.__getitem__)

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
        for span in self.spans:
            out.setdefault(span.element, []).append(span)
        return {k: sorted(v) for k, v in out.items()}

    def check(
        self,
        order: Sequence[str] | None = None,
        *,
        tolerance_s: float = 1e-6,
        across_epochs: bool = False,
    ) -> None:
        """Raise ValueError unless each element's spans are non-overlapping and in stage order.

        ``order`` (e.g. ``["read", "decode", "transform", "consume"]``): an element's first span
        of each stage must come in this order (stages it skipped are ignored).
        ``across_epochs=True``: the pipeline was iterated with ``repeat``, so the next epoch's
        work on an element may start while the consumer still holds it from the epoch before
        (prefetching across the epoch boundary, the point of ``repeat``); only the order of
        first spans is checked then.
        """
        problems = []
        for element, spans in self.by_element().items():
            for before, after in zip(spans, spans[1:], strict=False):
                if not across_epochs and after.start < before.end - tolerance_s:
                    problems.append(f"element {element}: {before} overlaps {after}")
            if order is not None:
                firsts = {}
                for span in spans:
                    firsts.setdefault(span.stage, span.start)
                seq = [firsts[s] for s in order if s in firsts]
                if seq != sorted(seq):
                    problems.append(f"element {element}: stages out of order {list(firsts)}")
        if problems:
            shown = "\n".join(problems[:5])
            raise ValueError(f"{len(problems)} timeline problems, first ones:\n{shown}")

    def busy_seconds(self, stage: str) -> float:
        """Wall time during which at least one element was in ``stage`` (union of spans)."""
        intervals = sorted({(s.start, s.end) for s in self.spans if s.stage == stage})
        total, cur_start, cur_end = 0.0, None, None
        for start, end in intervals:
            if cur_end is None or start > cur_end:
                if cur_end is not None:
                    total += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        if cur_end is not None:
            total += cur_end - cur_start
        return total


def plot_timeline(
    timeline: Timeline,
    *,
    title: str,
    ax: Any = None,
    stages: Sequence[str] | None = None,
    cmap: str = "plasma",
) -> matplotlib.figure.Figure:
    """One row per stage, one bar per distinct span (a batch-level span is drawn once).

    Colours come from ``matplotlib.colormaps[cmap]`` (``matplotlib.cm.get_cmap``, which the
    guide's code uses, was removed in Matplotlib 3.9). Returns the figure.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    stages = list(stages) if stages is not None else timeline.stages
    if ax is None:
        fig, ax = plt.subplots(figsize=(12, 0.6 * len(stages) + 1.0))
    else:
        fig = ax.figure
    colors = matplotlib.colormaps[cmap]
    t0 = timeline.start
    for row, stage in enumerate(stages):
        intervals = sorted(
            {(s.start - t0, s.end - s.start) for s in timeline.spans if s.stage == stage}
        )
        # Overlapping spans (parallel work) are drawn in a few sub-lanes so they stay visible.
        lanes: list[float] = []
        lane_of = []
        for start, width in intervals:
            lane = next((i for i, busy in enumerate(lanes) if busy <= start), None)
            if lane is None:
                lanes.append(0.0)
                lane = len(lanes) - 1
            lanes[lane] = start + width
            lane_of.append(lane)
        n_lanes = max(1, len(lanes))
        height = 0.8 / n_lanes
        for lane in range(n_lanes):  # one artist per lane, not one per span
            bars = [
                (s, max(w, 1e-4)) for (s, w), k in zip(intervals, lane_of, strict=True) if k == lane
            ]
            ax.broken_barh(
                bars,
                (row - 0.4 + lane * height, height),
                color=colors(row / max(1, len(stages))),
                alpha=0.8,
            )
    ax.set_yticks(range(len(stages)), stages)
    ax.invert_yaxis()
    ax.set_xlim(0, timeline.end - t0)
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    ax.grid(axis="x", linestyle=":")
    return fig
