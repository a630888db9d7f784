"""tests.tools.twice: the comparison logic (no notebook is run here)."""

from __future__ import annotations

import subprocess

import pytest

from tests.tools import twice
from utils.compare import Comparison, Variant


def _comparison(a_seconds, b_seconds) -> Comparison:
    variants = (Variant("fast way", lambda: None), Variant("seed way", lambda: None))
    return Comparison(variants, {"fast way": tuple(a_seconds), "seed way": tuple(b_seconds)})


def test_mask_hides_numbers_only() -> None:
    assert twice.mask("batch 128, 1.05x over 4 rounds") == "batch #, #x over # rounds"
    assert twice.mask("12,345 images") == "# images"


def test_printed_verdicts_parse_the_sentences_compare_prints() -> None:
    faster = _comparison([1.0] * 5, [2.0] * 5).verdict("fast way", "seed way").sentence()
    slower = _comparison([2.0] * 5, [1.0] * 5).verdict("fast way", "seed way").sentence()
    cannot = _comparison([1.0, 1.1, 0.9, 1.0, 1.05], [1.0] * 5).verdict("fast way", "seed way")
    equal = _comparison([1.0, 1.01, 0.99, 1.0, 1.02], [1.0] * 5).verdict("fast way", "seed way")
    assert (cannot.state, equal.state) == ("cannot tell", "equal")
    lines = ["round 1/4 done", faster]
    assert twice.printed_verdicts(lines) == {"fast way vs seed way": "faster"}
    assert twice.printed_verdicts([slower]) == {"fast way vs seed way": "slower"}
    assert twice.printed_verdicts([cannot.sentence()]) == {"fast way vs seed way": "cannot tell"}
    assert twice.printed_verdicts([equal.sentence()]) == {"fast way vs seed way": "equal"}
    raised = Comparison(
        (Variant("fast way", lambda: None), Variant("seed way", lambda: None)),
        {"fast way": (1.0,) * 5, "seed way": (1.2,) * 5},
        threshold=0.5,
    ).verdict("fast way", "seed way")
    assert raised.state == "equal" and "though faster" in raised.sentence()
    assert twice.printed_verdicts([raised.sentence()]) == {"fast way vs seed way": "equal"}
    # numbers in the names are masked, so "batch 128" and "batch 512" runs still pair up
    key = twice.printed_verdicts(["rung 3 is faster than rung 2: 1.20x, 88% interval"])
    assert key == {"rung # vs rung #": "faster"}


def test_recorded_verdicts_round_trip_through_compare() -> None:
    recorded = _comparison([1.0] * 5, [2.0] * 5).metrics([("fast way", "seed way")])
    doc = {"metrics": {k: {"value": v, "unit": u} for k, (v, u) in recorded.items()}}
    assert twice.results_verdicts(doc) == {"verdict_fast_way_vs_seed_way": "faster"}
    assert recorded["verdict_fast_way_vs_seed_way"][0] == 1.0
    assert twice.verdict_value(-1.0) == "slower" and twice.verdict_value(0) == "equal"
    assert twice.verdict_value(0.5) == "cannot tell" and twice.verdict_value("equal") == "equal"
    with pytest.raises(ValueError):
        twice.verdict_value(2)


@pytest.mark.parametrize(
    ("first", "second", "opposite"),
    [
        ("faster", "slower", True),
        ("equal", "faster", True),
        ("slower", "equal", True),
        ("cannot tell", "faster", False),
        ("equal", "cannot tell", False),
        ("slower", "cannot tell", False),
    ],
)
def test_which_changes_are_opposite_conclusions(first, second, opposite) -> None:
    assert twice.Difference("k", first, second).opposite is opposite
    assert twice.agree({"k": first}, {"k": second}) is not opposite


def test_opposite_verdicts_fail_and_cannot_tell_is_allowed() -> None:
    first = {"a": "faster", "b": "faster", "c": "cannot tell", "only1": "slower"}
    second = {"a": "faster", "b": "cannot tell", "c": "slower", "only2": "faster"}
    assert twice.agree(first, second)
    diffs = twice.differences(first, second)
    assert [(d.key, d.opposite) for d in diffs] == [("b", False), ("c", False)]
    assert twice.missing(first, second) == ["only1", "only2"]
    flipped = dict(second, a="slower")
    assert not twice.agree(first, flipped)
    assert [str(d) for d in twice.differences(first, flipped) if d.opposite] == [
        "OPPOSITE: a: faster -> slower"
    ]


def test_report_covers_recorded_and_printed() -> None:
    nb = {"cells": [{"outputs": [{"text": ["a is faster than b: 1.3x, ...\n"]}]}]}
    nb_flipped = {"cells": [{"outputs": [{"text": ["a is slower than b: 0.7x, ...\n"]}]}]}
    doc = {"metrics": {"verdict_a_vs_b": {"value": 1.0, "unit": "verdict"}}}
    ok, lines = twice.report([(nb, doc), (nb, doc)])
    assert ok and lines[0].startswith("recorded: 1 and 1 verdicts, 1 the same")
    ok, lines = twice.report([(nb, doc), (nb_flipped, doc)])
    assert not ok and any("OPPOSITE" in line for line in lines)


def test_hog_processes_end_with_stop() -> None:
    hogs = twice.start_hogs(2)
    try:
        assert all(p.poll() is None for p in hogs)
    finally:
        twice.stop_hogs(hogs)
    assert all(p.returncode is not None for p in hogs)
    with pytest.raises(subprocess.TimeoutExpired):  # sanity: a live process does not end itself
        live = twice.start_hogs(1)
        try:
            live[0].wait(timeout=0.1)
        finally:
            twice.stop_hogs(live)
