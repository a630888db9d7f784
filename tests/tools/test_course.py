"""tests.tools.course: make run / refresh, the one set-up cell, the repository name."""

from __future__ import annotations

import ast
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from tests.tools import course
from utils import COURSE_REPO, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "notebooks"
NOTEBOOKS = course.find_notebooks()


def _notebook(path: Path, *sources: str, parameters: str = "") -> Path:
    nb = nbformat.v4.new_notebook()
    if parameters:
        nb.cells.append(nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_notebooks_are_found_in_order_by_prefix_or_path() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(10)]
    assert course.find_notebooks("04")[0].name.startswith("04_")
    assert course.find_notebooks(str(NOTEBOOKS[2])) == [NOTEBOOKS[2]]
    with pytest.raises(ValueError, match="no notebook matches '99'"):
        course.find_notebooks("99")


def test_parameters_are_typed_like_papermills() -> None:
    args = ["-p", "A", "2", "-p", "B", "0.5", "-p", "C", "None", "-p", "D", "x", "-r", "E", "7"]
    assert course.parse_parameters(args) == {"A": 2, "B": 0.5, "C": None, "D": "x", "E": "7"}
    with pytest.raises(ValueError, match="-p NAME VALUE"):
        course.parse_parameters(["-p", "A"])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_papermill_sees_every_name_the_parameters_cell_sets(notebook: Path) -> None:
    """A comment papermill cannot parse (08's held a ';') hides the parameter from ``-p``."""
    cell = next(c for c in nbformat.read(notebook, 4).cells if "parameters" in c.metadata.tags)
    tree = ast.parse(cell.source)
    names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
    assert course._declared(notebook) == names


def test_a_failing_notebook_is_reported_and_the_rest_still_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "build"
    args = ["run", "--kernel", "python3", "--folder", str(FIXTURES), "--out", str(out)]
    assert course.main([*args, "--", "-p", "REPEAT", "2", "-r", "GREETING", "42"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("01_passes") and lines[0].endswith("ok")
    assert "FAILED: cell 3: ValueError: boom from the fixture" in lines[1]
    assert lines[2].startswith("03_records") and lines[2].endswith("ok")
    assert lines[-1] == "2 of 3 notebooks ran top to bottom"
    first = nbformat.read(out / "01_passes.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in first.cells for o in c.get("outputs", []))
    assert printed == "'42' x 2: 4242\n"  # papermill's types reached the kernel


def test_make_run_prints_no_kernel_transport_warning(tmp_path: Path, capfd) -> None:
    """A kernel on TCP warned "running over TCP without encryption" once per notebook in make
    run; the kernels now talk over Unix sockets."""
    _notebook(tmp_path / "nbs" / "01_quiet.ipynb", "print('ran')")
    args = ["run", "--kernel", "python3", "--folder", str(tmp_path / "nbs")]
    assert course.main([*args, "--out", str(tmp_path / "build")]) == 0
    out, err = capfd.readouterr()
    assert "ok" in out and "without encryption" not in out + err, err


def test_an_unknown_parameter_is_a_usage_error_before_anything_runs(tmp_path, capsys) -> None:
    args = ["run", "--kernel", "python3", "--folder", str(FIXTURES), "--out", str(tmp_path)]
    assert course.main([*args, "--", "-p", "REPEET", "2"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter(s) REPEET" in err and "01_passes: GREETING, REPEAT" in err
    assert not list(tmp_path.iterdir())


def test_a_cell_past_the_time_limit_fails_its_notebook_only(tmp_path: Path, capsys) -> None:
    _notebook(tmp_path / "nbs" / "01_hangs.ipynb", "import time\ntime.sleep(600)")
    _notebook(tmp_path / "nbs" / "02_after.ipynb", "print('still ran')")
    args = ["run", "--kernel", "python3", "--folder", str(tmp_path / "nbs"), "--timeout", "5"]
    assert course.main([*args, "--out", str(tmp_path / "build")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "a cell ran longer than 5 s" in lines[0] and lines[1].endswith("ok")


def test_refresh_stores_outputs_canonically_and_leaves_a_failure_untouched(tmp_path) -> None:
    good = _notebook(tmp_path / "01_good.ipynb", "print('hi')")
    bad = _notebook(tmp_path / "02_bad.ipynb", "raise ValueError('no')")
    before = bad.read_text()
    assert course.refresh([good, bad], "python3") == 1
    assert bad.read_text() == before
    nb = json.loads(good.read_text())
    assert nb["cells"][0]["outputs"][0]["text"] == ["hi\n"] and "papermill" not in nb["metadata"]


def test_committed_notebooks_store_sources_as_lists_of_lines() -> None:
    for path in NOTEBOOKS:
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            assert isinstance(cell["source"], list), f"{path.name} cell {i}: one string"
            assert all(line.count("\n") <= 1 for line in cell["source"]), f"{path.name} {i}"


# --------------------------------------------------------------------- the repository name
def test_every_file_names_the_same_repository() -> None:
    assert course.current_repo() == COURSE_REPO
    assert course.check_repo() == []


def _copy_course(tmp_path: Path, monkeypatch) -> Path:
    copy = tmp_path / "course"
    for name in ("README.md", "CONTRIBUTING.md", "utils/__init__.py"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, copy / name)
    (copy / "notebooks").mkdir()
    for nb in NOTEBOOKS:
        shutil.copy(nb, copy / "notebooks" / nb.name)
    monkeypatch.setattr(course, "ROOT", copy)
    monkeypatch.setattr(course, "NOTEBOOKS", copy / "notebooks")
    monkeypatch.setattr(course, "CONTRIBUTING", copy / "CONTRIBUTING.md")
    return copy


def test_set_repo_rewrites_every_file_and_rejects_bad_names(tmp_path, monkeypatch) -> None:
    copy = _copy_course(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="owner/name"):
        course.set_repo("not a repo")
    changed = course.set_repo("someone/fork-of-course")
    assert copy / "utils" / "__init__.py" in changed and len(changed) == 13
    assert course.current_repo() == "someone/fork-of-course" and course.check_repo() == []
    assert course.main(["check-repo"]) == 0


def test_readme_status_table_is_generated_from_results() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    start = readme.index(course.STATUS_START)
    end = readme.index(course.STATUS_END) + len(course.STATUS_END)
    assert readme[start:end] == course.status_table(), "run `make status`"


def test_refresh_records_its_run_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(course, "RUN_TIMES", tmp_path / "run-times.json")
    course._record_run_time("05_x", 61.4)
    course._record_run_time("06_y", 2.0)
    assert json.loads((tmp_path / "run-times.json").read_text())["seconds"] == {
        "05_x": 61,
        "06_y": 2,
    }


# ------------------------------------------------------------------------- the set-up cell
def test_every_notebook_starts_with_contributings_set_up_cell() -> None:
    block = course.setup_block()
    assert len(block.splitlines()) <= 8 and COURSE_REPO in block
    assert course.check_setup() == []


def _setup_ref() -> str:
    """The COURSE_REF in CONTRIBUTING's set-up cell."""
    return course.SETUP_REF.search(course.setup_block()).group(1)


def test_sync_setup_sets_the_ref_and_changes_only_the_set_up_cells(tmp_path, monkeypatch) -> None:
    copy = _copy_course(tmp_path, monkeypatch)
    before = {p.name: json.loads(p.read_text("utf-8")) for p in course.find_notebooks()}
    with pytest.raises(ValueError, match="tag or commit"):
        course.sync_setup("v1 ; rm -rf /")
    assert copy / "CONTRIBUTING.md" in course.sync_setup("v9.8.7")
    assert _setup_ref() == "v9.8.7" and course.check_setup() == []
    for path in course.find_notebooks():
        nb, old = json.loads(path.read_text("utf-8")), before[path.name]
        cell, old_cell = course._first_code_cell(nb), course._first_code_cell(old)
        assert 'COURSE_REF = "v9.8.7"' in "".join(cell["source"])
        cell["source"] = old_cell["source"]
        assert nb == old, f"{path.name}: more than the set-up cell changed"
    course._first_code_cell(nb)["source"][0] = "# edited by hand\n"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert [p.split(":")[0] for p in course.check_setup()] == [path.name]
    assert course.main(["check-setup"]) == 1


# The set-up cell run by IPython as Colab would run it, in an empty folder, with github.com mapped
# (git's url.insteadOf) onto a local repository or a 127.0.0.1 server: no test reaches the network.
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> None:
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(cwd), *who, *args], check=True, capture_output=True)


def _run_setup(tmp_path: Path, ref: str, github: str) -> subprocess.CompletedProcess:
    block = course.SETUP_REF.sub(f'COURSE_REF = "{ref}"', course.setup_block())
    script = tmp_path / "setup_cell.ipy"
    script.write_text(block + "\nprint('bootstrap says', bootstrap.MARK)\n", encoding="utf-8")
    work = tmp_path / "colab"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if "ASKPASS" not in k and not k.startswith("GIT")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path), GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0=f"url.{github}.insteadOf", GIT_CONFIG_VALUE_0="https://github.com/",
    )  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "IPython", "--quick", "--no-banner", str(script)], cwd=work,
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        start_new_session=True,  # no terminal: a password prompt would fail, never wait
    )  # fmt: skip


@needs_git
def test_set_up_cell_fetches_the_recorded_ref_not_the_newest_commit(tmp_path) -> None:
    origin = tmp_path / "remotes" / COURSE_REPO
    (origin / "utils").mkdir(parents=True)
    (origin / "utils" / "__init__.py").write_text("")
    (origin / "utils" / "bootstrap.py").write_text("MARK = 'the tagged commit'\n")
    _git(origin, "init", "-q")
    _git(origin, "add", ".")
    _git(origin, "commit", "-qm", "course")
    _git(origin, "tag", "v-test")
    (origin / "utils" / "bootstrap.py").write_text("MARK = 'a newer commit'\n")
    _git(origin, "commit", "-qam", "newer")
    done = _run_setup(tmp_path, "v-test", f"file://{tmp_path / 'remotes'}/")
    assert done.stdout.strip().endswith("bootstrap says the tagged commit"), done.stderr


@needs_git
def test_set_up_cell_says_what_to_do_when_the_course_cannot_be_fetched(tmp_path) -> None:
    (tmp_path / "remotes").mkdir()
    done = _run_setup(tmp_path, "v-missing", f"file://{tmp_path / 'remotes'}/")
    assert "Could not fetch the course at v-missing: is the internet on?" in done.stdout
    assert "bootstrap says" not in done.stdout


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # what a private or renamed repository answers
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@needs_git
def test_set_up_cell_never_waits_for_a_password(tmp_path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = _run_setup(tmp_path, "v-test", f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert "Could not fetch the course" in done.stdout


def test_course_ref_is_a_commit_of_this_repository_with_todays_utils() -> None:
    """Colab and Kaggle fetch COURSE_REF: its utils/ must be the utils/ the notebooks ran with."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ref = _setup_ref()
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "--stat", ref, "--", "utils"],
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 0, f"COURSE_REF {ref!r} is not a commit here: {diff.stderr}"
    assert not diff.stdout.strip(), (
        f"utils/ differs from COURSE_REF {ref!r}:\n{diff.stdout}\n"
        "Commit, then: make set-ref REF=$(git rev-parse HEAD)"
    )


def _headings(cell: dict) -> list[str]:
    """A markdown cell's heading lines, not counting comment lines inside fenced code."""
    if cell["cell_type"] != "markdown":
        return []
    found, fenced = [], False
    for line in "".join(cell["source"]).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif line.startswith("#") and not fenced:
            found.append(line)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_course_conventions(path: Path) -> None:
    """Objectives first, a parameters cell, a recap closing the main line (then only a Part 2
    or appendices), one clean top-to-bottom run with no error stored."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert (
        cells[0]["cell_type"] == "markdown" and "objectives" in "".join(cells[0]["source"]).lower()
    )
    assert any("parameters" in c["metadata"].get("tags", []) for c in code)
    headings = [(i, line) for i, c in enumerate(cells) for line in _headings(c)]
    recaps = [i for i, line in headings if line.startswith("## Recap")]
    assert recaps, f"{path.name}: no Recap heading"
    after = [line for i, line in headings if i > recaps[-1] and line.startswith("## ")]
    if after and after[0].startswith("## Part 2"):
        after = after[
            next((k for k, a in enumerate(after) if "appendix" in a.lower()), len(after)) :
        ]
    assert all("appendix" in line.lower() for line in after), f"{path.name}: {after}"
    ran = [c for c in code if "skip-execution" not in c["metadata"].get("tags", [])]
    assert [c["execution_count"] for c in ran] == list(range(1, len(ran) + 1))
    assert not any(o["output_type"] == "error" for c in code for o in c["outputs"])
    assert "papermill" not in nb["metadata"] and nb["metadata"]["kernelspec"]["name"] == "python3"
