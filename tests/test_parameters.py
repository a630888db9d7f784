"""utils.parameters: a wrong papermill value is a clear error naming the parameter."""

from __future__ import annotations

import pytest

from utils.parameters import (
    Choice,
    Range,
    check_params,
    check_together,
    per_replica_batch_spec,
    per_replica_batch_used,
    simulated_devices_spec,
    simulated_devices_used,
)


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


def test_simulated_devices_has_one_spec_with_a_lesson_minimum():
    check_params(SIMULATED_DEVICES=simulated_devices_spec(1))
    check_params(SIMULATED_DEVICES=simulated_devices_spec(64, at_least=2))
    for bad, at_least in ((0, 1), (65, 1), (1, 2)):
        with pytest.raises(ValueError, match=r"SIMULATED_DEVICES must be in \["):
            check_params(SIMULATED_DEVICES=simulated_devices_spec(bad, at_least=at_least))
    with pytest.raises(TypeError, match="SIMULATED_DEVICES"):
        check_params(SIMULATED_DEVICES=simulated_devices_spec(None))
    assert simulated_devices_used(8, on_cpu=True) == 8
    assert simulated_devices_used(8, on_cpu=False) is None


def test_per_replica_batch_default_is_the_seeds_batch_per_chip_or_in_all_on_a_cpu():
    check_params(PER_REPLICA_BATCH=per_replica_batch_spec(None))
    with pytest.raises(TypeError):
        check_params(PER_REPLICA_BATCH=per_replica_batch_spec(None, allow_none=False))
    with pytest.raises(ValueError, match=r"must be in \[8, 4096\]"):
        check_params(PER_REPLICA_BATCH=per_replica_batch_spec(4, at_least=8))
    with pytest.raises(ValueError, match=r"must be in \[1, 4096\]"):
        check_params(PER_REPLICA_BATCH=per_replica_batch_spec(4097))
    assert per_replica_batch_used(None, on_cpu=False, devices=8) == 128
    assert per_replica_batch_used(None, on_cpu=True, devices=8) == 16
    assert per_replica_batch_used(None, on_cpu=True, devices=4) == 32
    assert per_replica_batch_used(None, on_cpu=True, devices=1) == 128
    assert per_replica_batch_used(24, on_cpu=True, devices=8) == 24
