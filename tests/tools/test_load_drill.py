"""utils.tools.load_drill: counts come from pytest's summary, and no hog outlives the drill."""

from __future__ import annotations

import os
from pathlib import Path

from utils.tools import load_drill


def test_counts_read_pytest_summary() -> None:
    out = "....\n2 failed, 530 passed, 3 skipped, 1 error in 285.12s (0:04:45)\n"
    assert load_drill._counts(out) == {"passed": 530, "failed": 2, "error": 1, "skipped": 3}
    assert load_drill._counts("") == {"passed": 0, "failed": 0, "error": 0, "skipped": 0}


def _hogs_of_this_process() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and load_drill.HOG.encode() in cmd:
            found.append(int(entry))
    return found


def test_a_small_drill_passes_and_stops_its_hogs(capsys) -> None:
    assert load_drill.main(["--hogs", "2", "--timeout", "300", "tests/test_parameters.py"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[0]
    assert line.startswith("load drill (2 hogs): ") and " 0 failed, 0 errors" in line
    assert not _hogs_of_this_process(), "a hog outlived the drill"
