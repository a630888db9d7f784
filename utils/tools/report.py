"""Put the results of one or several machines side by side: a Markdown report with PNG charts.

``make report`` runs ``python -m utils.tools.report build/results results --out build/report.md``:
it reads every ``*.json`` results file (:mod:`utils.results`) under the given folders (the local
run's ``build/results`` and copies brought back from other machines under ``results/``), groups
them by machine label (``"cpu: ..."``, ``"gpu: ..."``, ``"tpu: v5e-1"``) and writes, per notebook,
a table with one column per machine plus a bar chart per metric.

Speed-ups are computed against the CPU run (``--baseline`` picks another machine): for a rate
(unit ending in ``/s``: ``img/s``, ``GFLOP/s``, ``GB/s``) it is ``value / baseline``; for a time
(``s``, ``ms``) it is ``baseline / value``; ratios (``ratio``, ``x``, ``%``) and other units get
none. So "x12" always means "12 times better than the CPU".

Input files are only read. A malformed or foreign file is rejected with a message naming it and
the problem, and the report says so (also: negative times or rates, ``created`` times more than a
day in the future); when two files claim the same machine and notebook, the newer one (by its
``created`` time) is used and the report names the one left out.

Runs of a notebook that differ in their recorded ``parameters`` or ``data_source`` (real CIFAR-10
vs the offline stand-in) are not like for like: their values are marked ``†`` and a line under
the table says how they differ. Text from the files (machine labels, platform, versions) is
escaped, so a ``|`` or a line break cannot break a table or start a heading. The report is
written 0644.
Needs matplotlib (no pyplot: figures are drawn with the Agg canvas, whatever the backend).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from utils.results import ResultsError, ResultsFile, load, write_text_atomic

Direction = Literal["higher", "lower"]

# Units that convert into each other: unit -> (family, factor to the family's base unit).
UNIT_SCALES: Mapping[str, tuple[str, float]] = {
    "ns": ("time", 1e-9),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "img/s": ("images", 1.0),
    "images/s": ("images", 1.0),
    "GOP/s": ("ops", 1e9),
    "TOP/s": ("ops", 1e12),
    "FLOP/s": ("flops", 1.0),
    "GFLOP/s": ("flops", 1e9),
    "TFLOP/s": ("flops", 1e12),
    "B/s": ("bandwidth", 1.0),
    "MB/s": ("bandwidth", 1e6),
    "GB/s": ("bandwidth", 1e9),
    "TB/s": ("bandwidth", 1e12),
    "MiB/s": ("bandwidth", 2.0**20),
    "GiB/s": ("bandwidth", 2.0**30),
}
NEUTRAL_UNITS = frozenset({"ratio", "x", "%", "count", "1"})


def direction(unit: str) -> Direction | None:
    """Whether a bigger number is better ("higher"), worse ("lower"), or neither (None)."""
    unit = unit.strip()
    if unit in NEUTRAL_UNITS:
        return None
    if UNIT_SCALES.get(unit, ("",))[0] == "time":
        return "lower"
    if unit.endswith("/s"):
        return "higher"
    return None


def speedup(baseline: float, value: float, unit: str) -> float | None:
    """How many times better ``value`` is than ``baseline`` (same unit), or None if not a speed."""
    better = direction(unit)
    if better is None or baseline <= 0 or value <= 0:
        return None
    return value / baseline if better == "higher" else baseline / value


def convert(value: float, unit: str, to_unit: str) -> float | None:
    """``value`` in ``unit`` expressed in ``to_unit``; None when they do not convert."""
    if unit == to_unit:
        return value
    a, b = UNIT_SCALES.get(unit), UNIT_SCALES.get(to_unit)
    if a is None or b is None or a[0] != b[0]:
        return None
    return value * a[1] / b[1]


@dataclass
class Collection:
    """The usable results files, the rejected ones, and what was decided along the way."""

    files: list[ResultsFile] = field(default_factory=list)
    rejected: list[ResultsError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def machines(self) -> list[str]:
        """Machine labels, CPUs first, then GPUs, then TPUs, then anything else."""
        return sorted({f.machine for f in self.files}, key=_machine_key)

    @property
    def notebooks(self) -> list[str]:
        return sorted({f.notebook for f in self.files})


def _machine_key(label: str) -> tuple[int, str]:
    kind = label.split(":", 1)[0].strip().lower()
    return ({"cpu": 0, "gpu": 1, "tpu": 2}.get(kind, 3), label)


def _created(f: ResultsFile) -> datetime:
    created = datetime.fromisoformat(f.created)
    return created if created.tzinfo else created.replace(tzinfo=timezone.utc)


def find_files(sources: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """Every ``*.json`` under the given folders (or the files themselves), each once, in order.

    Also returns notes about sources that do not exist.
    """
    found: list[Path] = []
    seen: set[Path] = set()
    notes: list[str] = []
    for source in sources:
        source = Path(source)
        if source.is_dir():
            candidates = sorted(source.rglob("*.json"))
        elif source.is_file():
            candidates = [source]
        else:
            notes.append(f"{source} does not exist (skipped)")
            continue
        for path in candidates:
            if path.resolve() not in seen:
                seen.add(path.resolve())
                found.append(path)
    return found, notes


def collect(sources: Iterable[Path]) -> Collection:
    """Load every results file under ``sources``; keep one file per (machine, notebook)."""
    paths, notes = find_files(sources)
    collection = Collection(notes=notes)
    chosen: dict[tuple[str, str], ResultsFile] = {}
    for path in paths:
        try:
            rf = load(path)
        except ResultsError as err:
            collection.rejected.append(err)
            continue
        key = (rf.machine, rf.notebook)
        if key not in chosen:
            chosen[key] = rf
            continue
        old = chosen[key]
        keep, drop = (rf, old) if _created(rf) > _created(old) else (old, rf)
        chosen[key] = keep
        collection.notes.append(
            f"{keep.path} and {drop.path} both hold {rf.notebook} on '{rf.machine}': "
            f"using {keep.path} (created {keep.created}; the other {drop.created})"
        )
    collection.files = sorted(chosen.values(), key=lambda f: (f.notebook, _machine_key(f.machine)))
    return collection


def choose_baseline(machines: Sequence[str], requested: str | None = None) -> str | None:
    """The machine speed-ups are measured against: ``requested``, else the first CPU, else None."""
    if requested is not None:
        if requested not in machines:
            raise ValueError(f"baseline {requested!r} is not among the machines {list(machines)}")
        return requested
    return next((m for m in machines if m.lower().startswith("cpu")), None)


def md(text: object) -> str:
    """Text from a results file, safe inside a Markdown table cell or list item: one line, ``|``
    escaped (so it cannot end a cell) and no line break (so it cannot start a heading)."""
    one_line = " ".join(str(text).split())
    return one_line.replace("\\", "\\\\").replace("|", "\\|")


def _fmt_param(value: object) -> str:
    return "not recorded" if value is _MISSING else repr(value)


_MISSING = object()


def setup_differences(collection: Collection, notebook: str, reference: str | None) -> dict:
    """Machine -> how its run of ``notebook`` differs from the reference machine's run.

    Compared: ``data_source`` and every recorded parameter. The reference is ``reference`` (the
    baseline) when it ran the notebook, else the first machine that did. Machines whose runs
    match (or the reference itself) are left out; an empty dict means like for like.
    """
    runs = {f.machine: f for f in collection.files if f.notebook == notebook}
    if not runs:
        return {}
    ref_name = reference if reference in runs else sorted(runs, key=_machine_key)[0]
    ref = runs[ref_name]
    out: dict[str, list[str]] = {}
    for machine, f in runs.items():
        if machine == ref_name:
            continue
        diffs: list[str] = []
        if f.data_source != ref.data_source:
            diffs.append(
                f"data {f.data_source or 'not recorded'} vs {ref.data_source or 'not recorded'}"
            )
        if (f.parameters is None) != (ref.parameters is None):
            diffs.append("parameters recorded by one run only")
        elif f.parameters is not None and ref.parameters is not None:
            for name in sorted(set(f.parameters) | set(ref.parameters)):
                mine = f.parameters.get(name, _MISSING)
                theirs = ref.parameters.get(name, _MISSING)
                if mine != theirs:
                    diffs.append(f"{name} {_fmt_param(mine)} vs {_fmt_param(theirs)}")
        if diffs:
            out[machine] = diffs
    if out:
        out[""] = [ref_name]  # who was compared against
    return out


@dataclass(frozen=True)
class Row:
    """One metric of one notebook across machines (values in ``unit``; None: not measured)."""

    notebook: str
    metric: str
    unit: str
    values: dict[str, float | None]
    speedups: dict[str, float | None]
    remarks: tuple[str, ...] = ()


def comparison(collection: Collection, baseline: str | None) -> list[Row]:
    """Rows of the comparison: per notebook and metric, each machine's value and speed-up."""
    machines = collection.machines
    by_key = {(f.machine, f.notebook): f for f in collection.files}
    rows: list[Row] = []
    for notebook in collection.notebooks:
        metric_names = sorted(
            {name for (_, nb), f in by_key.items() if nb == notebook for name in f.metrics}
        )
        for name in metric_names:
            measured = {
                m: by_key[(m, notebook)].metrics[name]
                for m in machines
                if (m, notebook) in by_key and name in by_key[(m, notebook)].metrics
            }
            ref = measured.get(baseline) if baseline else None
            unit = (ref or next(iter(measured.values()))).unit
            values: dict[str, float | None] = {}
            remarks: list[str] = []
            for m in machines:
                metric = measured.get(m)
                values[m] = None if metric is None else convert(metric.value, metric.unit, unit)
                if metric is not None and values[m] is None:
                    remarks.append(f"'{m}' reports {metric.unit}, not {unit}: left out")
            base = values.get(baseline) if baseline else None
            speedups = {
                m: (None if v is None or base is None else speedup(base, v, unit))
                for m, v in values.items()
            }
            rows.append(Row(notebook, name, unit, values, speedups, tuple(remarks)))
    return rows


def fmt_value(value: float | None) -> str:
    """A number for a table: thousands separators for big ones, 4 significant digits otherwise."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}" if abs(value) >= 1 else f"{value:.3g}"


def fmt_speedup(factor: float | None) -> str:
    """``×12.3``-style speed-up, or an empty string."""
    if factor is None:
        return ""
    digits = 0 if factor >= 100 else 1 if factor >= 10 else 2
    return f"×{factor:.{digits}f}"


def markdown_table(
    rows: Sequence[Row],
    machines: Sequence[str],
    baseline: str | None,
    marked: Iterable[str] = (),
) -> str:
    """A Markdown table: metric, unit, one column per machine (value and speed-up vs baseline).

    Values of ``marked`` machines (runs that differ in parameters or data) get a ``†``.
    """
    marked = set(marked)
    header = ["metric", "unit", *(md(m) for m in machines)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * len(machines)]
    for row in rows:
        cells = [md(row.metric), md(row.unit)]
        for m in machines:
            text = fmt_value(row.values.get(m))
            factor = row.speedups.get(m)
            if factor is not None and m != baseline:
                text += f" ({fmt_speedup(factor)})"
            if m in marked and row.values.get(m) is not None:
                text += " †"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


_COLOURS = {"cpu": "#7f7f7f", "gpu": "#2ca02c", "tpu": "#1f77b4"}


def draw_chart(row: Row, machines: Sequence[str], baseline: str | None, path: Path) -> Path:
    """A horizontal bar chart of one metric across machines, speed-ups written on the bars."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = [m for m in machines if row.values.get(m) is not None]
    values = [row.values[m] or 0.0 for m in shown]
    fig = Figure(figsize=(7.5, 1.2 + 0.45 * len(shown)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    colours = [_COLOURS.get(m.split(":", 1)[0].strip().lower(), "#9467bd") for m in shown]
    ax.barh(range(len(shown)), values, color=colours)
    ax.set_yticks(range(len(shown)), [_short(m) for m in shown])
    ax.invert_yaxis()
    better = direction(row.unit)
    hint = {"higher": " (higher is better)", "lower": " (lower is better)"}.get(better or "", "")
    ax.set_xlabel(f"{row.unit}{hint}")
    ax.set_title(_short(f"{row.notebook}: {row.metric}", 80))
    for i, m in enumerate(shown):
        label = fmt_value(row.values[m])
        factor = row.speedups.get(m)
        if factor is not None and m != baseline:
            label += f"  {fmt_speedup(factor)}"
        ax.annotate(label, (values[i], i), xytext=(3, 0), textcoords="offset points", va="center")
    ax.margins(x=0.25)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def _short(label: str, limit: int = 40) -> str:
    """A machine label for a chart: one line, ``$`` escaped (no mathtext), at most ``limit``."""
    label = " ".join(label.split())
    label = label if len(label) <= limit else label[: limit - 1] + "…"
    return label.replace("$", r"\$")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


VERSION_COLUMNS = ("python", "numpy", "tensorflow", "keras", "torch", "torch_xla", "libtpu")


def render(collection: Collection, baseline: str | None, charts_dir: Path | None) -> str:
    """The whole report as Markdown; draws the charts into ``charts_dir`` (None: no charts)."""
    machines = collection.machines
    rows = comparison(collection, baseline)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Train faster on TPUs: results by machine",
        "",
        f"Generated {when} from {len(collection.files)} results file(s) on "
        f"{len(machines)} machine(s).",
    ]
    if baseline and len(machines) > 1:
        out.append(
            f"Speed-ups (×N) are against **{baseline}**: N times the throughput for rates "
            "(units ending in /s), 1/N of the time for durations; ratios get none. "
            "Below 1 means slower than the baseline."
        )
    elif len(machines) > 1:
        out.append("No CPU run among the inputs, so no speed-ups (pass --baseline to pick one).")
    out += ["", "## Machines", ""]
    out.append("| machine | platform | notebooks | " + " | ".join(VERSION_COLUMNS) + " |")
    out.append("|---|---|---:|" + "---|" * len(VERSION_COLUMNS))
    for m in machines:
        files = [f for f in collection.files if f.machine == m]
        platform = str(files[0].runtime.get("platform", "?"))
        versions = [str(files[0].versions.get(k) or "—") for k in VERSION_COLUMNS]
        cells = [md(m), md(platform), str(len(files)), *(md(v) for v in versions)]
        out.append("| " + " | ".join(cells) + " |")

    for notebook in collection.notebooks:
        nb_rows = [r for r in rows if r.notebook == notebook]
        differ = setup_differences(collection, notebook, baseline)
        reference = differ.pop("", [""])[0]
        table = markdown_table(nb_rows, machines, baseline, marked=differ)
        out += ["", f"## {md(notebook)}", "", table, ""]
        sources = {
            f.machine: f.data_source or "not recorded"
            for f in collection.files
            if f.notebook == notebook
        }
        if set(sources.values()) != {"not recorded"}:
            shown = "; ".join(f"{md(m)}: {md(src)}" for m, src in sorted(sources.items()))
            out += [f"Data: {shown}.", ""]
        for machine, diffs in sorted(differ.items()):
            out.append(
                f"- † '{md(machine)}' ran differently from '{md(reference)}' "
                f"({md('; '.join(diffs))}): not like for like, compare with care."
            )
        for row in nb_rows:
            out += [f"- {md(row.metric)}: {md(remark)}" for remark in row.remarks]
            if charts_dir is not None and any(v is not None for v in row.values.values()):
                png = draw_chart(
                    row, machines, baseline, charts_dir / _slug(f"{notebook}__{row.metric}.png")
                )
                out.append(f"![{notebook}: {row.metric}]({charts_dir.name}/{png.name})")
                out.append("")

    if collection.notes:
        out += ["", "## Notes", ""] + [f"- {md(n)}" for n in collection.notes]
    if collection.rejected:
        out += ["", "## Rejected files", ""] + [
            f"- `{md(e.path)}`: {md(e.problem)}" for e in collection.rejected
        ]
    out += ["", "## Files used", ""]
    out += [
        f"- `{md(f.path)}`: {md(f.notebook)} on '{md(f.machine)}', created {md(f.created)}"
        for f in collection.files
    ]
    return "\n".join(out) + "\n"


def write_report(
    sources: Sequence[Path],
    out: Path,
    *,
    baseline: str | None = None,
    charts: bool = True,
) -> tuple[Path, Collection]:
    """Collect ``sources`` and write the Markdown report to ``out`` (charts in ``<stem>_files/``).

    Raises ``ValueError`` if no usable results file is found or ``out`` is one of the inputs.
    """
    out = Path(out)
    collection = collect(sources)
    if any(out.resolve() == f.path.resolve() for f in collection.files):
        raise ValueError(f"refusing to overwrite the input file {out}")
    if not collection.files:
        problems = [str(e) for e in collection.rejected] + collection.notes
        detail = "; ".join(problems) if problems else "no *.json files"
        where = ", ".join(str(s) for s in sources)
        raise ValueError(f"no usable results files in {where} ({detail}); run `make run` first")
    chosen = choose_baseline(collection.machines, baseline)
    charts_dir = out.parent / f"{out.stem}_files" if charts else None
    text = render(collection, chosen, charts_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, text)  # 0644
    return out, collection


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: 0 on success, 1 if nothing usable was found (or, with --strict, rejects)."""
    parser = argparse.ArgumentParser(
        prog="python -m utils.tools.report",
        description="Merge results files from one or several machines into a Markdown report.",
    )
    parser.add_argument("sources", nargs="+", type=Path, help="folders or files of results")
    parser.add_argument("--out", type=Path, default=Path("build/report.md"))
    parser.add_argument("--baseline", help="machine label to compare against (default: the CPU)")
    parser.add_argument("--no-charts", action="store_true", help="tables only")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any file is rejected")
    args = parser.parse_args(argv)
    try:
        out, collection = write_report(
            args.sources, args.out, baseline=args.baseline, charts=not args.no_charts
        )
    except ValueError as err:
        print(f"report: {err}", file=sys.stderr)
        return 1
    for err in collection.rejected:
        print(f"report: rejected {err}", file=sys.stderr)
    for note in collection.notes:
        print(f"report: note: {note}")
    machines = ", ".join(collection.machines)
    print(f"report: {len(collection.files)} file(s) from {machines} -> {out}")
    return 1 if args.strict and collection.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
