"""utils.fresh_process: results come back, failures say why."""

from __future__ import annotations

import pytest

from utils import fresh_process


def test_result_comes_back_and_utils_is_importable():
    code = (
        "import json, utils; print('noise'); print('RESULT ' + json.dumps([utils.COURSE_REPO, 2]))"
    )
    assert fresh_process.run_python_json(code) == [fresh_process_repo(), 2]


def fresh_process_repo() -> str:
    from utils import COURSE_REPO

    return COURSE_REPO


def test_environment_reaches_the_child():
    code = "import json, os; print('RESULT ' + json.dumps(os.environ['COURSE_PROBE']))"
    assert fresh_process.run_python_json(code, env={"COURSE_PROBE": "x1"}) == "x1"


def test_failure_carries_the_child_error():
    with pytest.raises(fresh_process.FreshProcessError, match="ZeroDivisionError"):
        fresh_process.run_python(["-c", "1/0"])


def test_missing_result_line_is_an_error():
    with pytest.raises(fresh_process.FreshProcessError, match="RESULT"):
        fresh_process.run_python_json("print('nothing useful')")


def test_timeout_is_bounded():
    with pytest.raises(fresh_process.FreshProcessError, match="ran past"):
        fresh_process.run_python(["-c", "import time; time.sleep(5)"], timeout_s=0.5)
