"""utils.parameters: a wrong papermill value is a clear error naming the parameter."""

from __future__ import annotations

import pytest

from utils.parameters import Choice, Range, check_params, check_together


def test_check_params_accepts_right_types_and_none_when_allowed():
    check_params(EPOCHS=(3, int, False), LR=(1, float, False), SUBSET=(None, int, True))


@pytest.mark.parametrize(
    ("value", "expected", "allow_none"),
    [("3", int, False), (True, int, False), (None, int, False), (2.5, int, True)],
)
def test_check_params_rejects_wrong_types_with_the_papermill_fix(value, expected, allow_none):
    with pytest.raises(TypeError) as info:
        check_params(EPOCHS=(value, expected, allow_none))
    message = str(info.value)
    assert "EPOCHS" in message and repr(value) in message and "-p EPOCHS" in message


def test_check_params_rules_name_the_parameter_and_the_allowed_values() -> None:
    check_params(
        EPOCHS=(3, int, True, Range(min=1)),
        MODE=("sqrt", str, False, Choice("none", "sqrt")),
        SIZE=(None, int, True, Range(min=8)),
    )
    with pytest.raises(ValueError, match=r"EPOCHS must be in \[1, inf\].*got 0"):
        check_params(EPOCHS=(0, int, True, Range(min=1)))
    with pytest.raises(ValueError, match=r"LATENCY_MS must be in \[0, inf\].*-5"):
        check_params(LATENCY_MS=(-5.0, float, False, Range(min=0)))
    with pytest.raises(ValueError, match=r"MODE must be one of 'none', 'sqrt'.*'cube'"):
        check_params(MODE=("cube", str, False, Choice("none", "sqrt")))


@pytest.mark.parametrize(("value", "ok"), [(63, True), (64, True), (65, False), (1e9, False)])
def test_range_upper_bound_is_inclusive_and_checked(value, ok) -> None:
    rule = Range(min=1, max=64)
    assert (rule.problem(value) is None) is ok
    if not ok:
        with pytest.raises(ValueError, match=r"SIMULATED_DEVICES must be in \[1, 64\]"):
            check_params(SIMULATED_DEVICES=(value, (int, float), False, rule))
    assert Range(max=0).problem(1) == "must be in [-inf, 0]"


def test_a_rule_across_parameters_names_every_value() -> None:
    check_together(256 % 8 == 0, "the devices must divide the global batch", BATCH=256, DEVICES=8)
    with pytest.raises(ValueError, match=r"BATCH=100, DEVICES=8 break a rule: the devices"):
        check_together(
            100 % 8 == 0, "the devices must divide the global batch", BATCH=100, DEVICES=8
        )
