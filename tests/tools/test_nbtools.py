"""utils.tools.nbtools: metadata stripping, the one-place repository name, notebook conventions."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from utils import COURSE_REPO
from utils.tools import nbtools

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def test_strip_papermill_removes_run_metadata_only():
    nb = {
        "metadata": {"papermill": {"duration": 1.0}, "kernelspec": {"name": "python3"}},
        "cells": [{"metadata": {"papermill": {}, "execution": {}, "tags": ["parameters"]}}],
    }
    nbtools.strip_papermill(nb)
    assert nb["metadata"] == {"kernelspec": {"name": "python3"}}
    assert nb["cells"][0]["metadata"] == {"tags": ["parameters"]}


def test_every_file_names_the_same_repository():
    assert nbtools.current_repo() == COURSE_REPO
    assert nbtools.check_repo() == []


def test_set_repo_rewrites_every_file_and_rejects_bad_names(tmp_path, monkeypatch):
    copy = tmp_path / "course"
    for name in ("README.md", "CONTRIBUTING.md", "utils/__init__.py"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, copy / name)
    (copy / "notebooks").mkdir()
    for nb in NOTEBOOKS:
        shutil.copy(nb, copy / "notebooks" / nb.name)
    monkeypatch.setattr(nbtools, "ROOT", copy)
    monkeypatch.setattr(nbtools, "NOTEBOOKS", copy / "notebooks")

    with pytest.raises(ValueError, match="owner/name"):
        nbtools.set_repo("not a repo")
    changed = nbtools.set_repo("someone/fork-of-course")
    assert copy / "utils" / "__init__.py" in changed
    assert nbtools.current_repo() == "someone/fork-of-course"
    assert nbtools.check_repo() == []
    for path in nbtools.repo_files():
        assert COURSE_REPO not in path.read_text(encoding="utf-8")


def markdown_headings(cell: dict) -> list[str]:
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


def test_headings_skip_fenced_code():
    cell = {
        "cell_type": "markdown",
        "source": ["## 1. Real\n", "```python\n", "# a comment\n", "```\n"],
    }
    assert markdown_headings(cell) == ["## 1. Real"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_course_conventions(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    first = "".join(cells[0]["source"])
    assert cells[0]["cell_type"] == "markdown" and "objectives" in first.lower()
    setup = "".join(code[0]["source"])
    assert f'COURSE_REPO = "{COURSE_REPO}"' in setup and "bootstrap.prepare(" in setup
    assert any("parameters" in c["metadata"].get("tags", []) for c in code)
    # A recap closes the main line; only appendices (plumbing, detours) may follow it, after an
    # optional "## Part 2" (a path the free TPUs cannot run, e.g. 01's TensorFlow).
    headings = [(i, line) for i, c in enumerate(cells) for line in markdown_headings(c)]
    recaps = [i for i, line in headings if line.startswith("## Recap")]
    assert recaps, f"{path.name}: no Recap heading"
    after = [line for i, line in headings if i > recaps[-1]]
    if after and after[0].startswith("## Part 2"):
        first_appendix = next(
            (k for k, line in enumerate(after) if "appendix" in line.lower()), len(after)
        )
        after = after[first_appendix:]
    assert all("appendix" in line.lower() for line in after), f"{path.name}: {after}"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "not one clean top-to-bottom run"
    assert not any(o["output_type"] == "error" for c in code for o in c["outputs"])
    assert "papermill" not in nb["metadata"]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_committed_notebooks_store_sources_as_lists_of_lines() -> None:
    """A one-string source turns every one-line edit into a whole-cell diff."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            source = cell["source"]
            assert isinstance(source, list), f"{path.name} cell {i}: source is one string"
            assert all(line.count("\n") <= 1 for line in source), f"{path.name} cell {i}"


def test_canonical_splits_one_string_sources() -> None:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": "a = 1\nb = 2\n",
                "outputs": [{"output_type": "stream", "name": "stdout", "text": "x\ny\n"}],
            }
        ]
    }
    out = nbtools.canonical(nb)
    assert out["cells"][0]["source"] == ["a = 1\n", "b = 2\n"]
    assert out["cells"][0]["outputs"][0]["text"] == ["x\n", "y\n"]


# --------------------------------------------------------------------------- the set-up cell
def _copy_course(tmp_path: Path, monkeypatch) -> Path:
    copy = tmp_path / "course"
    (copy / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "CONTRIBUTING.md", copy / "CONTRIBUTING.md")
    for nb in NOTEBOOKS:
        shutil.copy(nb, copy / "notebooks" / nb.name)
    monkeypatch.setattr(nbtools, "ROOT", copy)
    monkeypatch.setattr(nbtools, "NOTEBOOKS", copy / "notebooks")
    return copy


def test_every_notebook_starts_with_contributings_set_up_block_and_its_ref():
    """After merging: `make sync-setup` makes this pass (CONTRIBUTING.md holds the block)."""
    block, ref = nbtools.setup_block(), nbtools.setup_ref()
    assert f'COURSE_REF = "{ref}"' in block and "GIT_TERMINAL_PROMPT" in block
    assert nbtools.check_setup() == []
    for path in NOTEBOOKS:
        setup = "".join(nbtools._setup_cell(json.loads(path.read_text("utf-8")))["source"])
        assert setup.startswith(block), path.name
        assert "bootstrap.prepare(" in nbtools.split_setup(setup)[1], path.name
        assert nbtools.is_collapsed(nbtools._setup_cell(json.loads(path.read_text("utf-8"))))


def test_sync_setup_rewrites_only_the_set_up_block_of_every_copy(tmp_path, monkeypatch):
    copy = _copy_course(tmp_path, monkeypatch)
    before = {p.name: json.loads(p.read_text("utf-8")) for p in nbtools.setup_notebooks()}
    with pytest.raises(ValueError, match="tag or commit"):
        nbtools.sync_setup("v1 ; rm -rf /")
    changed = nbtools.sync_setup("v9.8.7")
    assert copy / "CONTRIBUTING.md" in changed
    assert nbtools.setup_ref() == "v9.8.7" and nbtools.check_setup() == []
    assert 'COURSE_REF = "v9.8.7"' in (copy / "CONTRIBUTING.md").read_text("utf-8")
    for path in nbtools.setup_notebooks():
        nb, old = json.loads(path.read_text("utf-8")), before[path.name]
        cell, old_cell = nbtools._setup_cell(nb), nbtools._setup_cell(old)
        block, tail = nbtools.split_setup("".join(cell["source"]))
        assert block == nbtools.setup_block() and 'COURSE_REF = "v9.8.7"' in block
        assert tail == nbtools.split_setup("".join(old_cell["source"]))[1]  # its own needs kept
        assert all(line.count("\n") <= 1 for line in cell["source"])
        assert nbtools.is_collapsed(cell), f"{path.name}: the set-up cell is not collapsed"
        cell["source"], cell["metadata"] = old_cell["source"], old_cell["metadata"]
        assert nb == old, f"{path.name}: more than the set-up cell changed"
    assert nbtools.sync_setup() == []  # nothing left to rewrite
    assert nbtools.main(["check-setup"]) == 0


def test_check_setup_names_a_notebook_that_drifted(tmp_path, monkeypatch):
    _copy_course(tmp_path, monkeypatch)
    nbtools.sync_setup()
    path = nbtools.setup_notebooks()[0]
    nb = json.loads(path.read_text("utf-8"))
    nbtools._setup_cell(nb)["source"][0] = "# edited by hand\n"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert [p.split(":")[0] for p in nbtools.check_setup()] == [path.name]
    assert nbtools.main(["check-setup"]) == 1


def test_check_setup_names_a_set_up_cell_left_open(tmp_path, monkeypatch):
    _copy_course(tmp_path, monkeypatch)
    nbtools.sync_setup()
    path = nbtools.setup_notebooks()[-1]
    nb = json.loads(path.read_text("utf-8"))
    nbtools._setup_cell(nb)["metadata"] = {}
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert nbtools.check_setup() == [
        f"{path.name}: the set-up cell is not collapsed (run `make sync-setup`)"
    ]
    assert nbtools.sync_setup() == [path] and nbtools.check_setup() == []


# The set-up block run as Colab would run it, with github.com mapped (git's url.insteadOf) onto a
# local repository or onto a 127.0.0.1 server: no test reaches the network.
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, timeout=60)


def _run_setup(tmp_path: Path, ref: str, github: str) -> subprocess.CompletedProcess:
    block = nbtools.SETUP_REF.sub(f'COURSE_REF = "{ref}"', nbtools.setup_block())
    script = tmp_path / "setup_cell.py"
    script.write_text(block + "print('bootstrap says', bootstrap.MARK)\n", encoding="utf-8")
    work = tmp_path / "colab"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if "ASKPASS" not in k and not k.startswith("GIT")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path), GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0=f"url.{github}.insteadOf", GIT_CONFIG_VALUE_0="https://github.com/",
    )  # fmt: skip
    return subprocess.run(
        [sys.executable, str(script)], cwd=work, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@needs_git
def test_set_up_cell_fetches_the_recorded_ref_not_the_newest_commit(tmp_path):
    origin = tmp_path / "remotes" / COURSE_REPO
    (origin / "utils").mkdir(parents=True)
    (origin / "utils" / "__init__.py").write_text("")
    (origin / "utils" / "runtime.py").write_text("")
    (origin / "utils" / "bootstrap.py").write_text("MARK = 'the tagged commit'\n")
    _git(origin, "init", "-q")
    _git(
        origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x", "--allow-empty"
    )
    _git(origin, "add", ".")
    _git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course")
    _git(origin, "tag", "v-test")
    (origin / "utils" / "bootstrap.py").write_text("MARK = 'a newer commit'\n")
    _git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "newer")

    done = _run_setup(tmp_path, "v-test", f"file://{tmp_path / 'remotes'}/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "bootstrap says the tagged commit"


@needs_git
def test_set_up_cell_fails_in_one_line_when_the_ref_cannot_be_fetched(tmp_path):
    (tmp_path / "remotes").mkdir()
    done = _run_setup(tmp_path, "v-missing", f"file://{tmp_path / 'remotes'}/")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Could not fetch https://github.com/")
    assert "at v-missing" in lines[0] and "internet" in lines[0] and "upload" in lines[0]
    assert not (tmp_path / "colab" / "train-faster-on-tpus" / "utils").exists()


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # what a private or renamed repository answers
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@needs_git
def test_set_up_cell_never_prompts_for_a_password(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = _run_setup(tmp_path, "v-test", f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Could not fetch" in lines[0], done.stderr
    assert "terminal prompts disabled" in lines[0]


def test_course_ref_is_a_commit_of_this_repository_with_todays_utils():
    """The set-up cell fetches COURSE_REF on Colab/Kaggle: it must exist here, and its utils/ must
    be the utils/ the committed notebooks ran against (today's), or a learner gets other code."""
    root = Path(nbtools.ROOT)
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    ref = nbtools.setup_ref()
    found = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, (
        f"COURSE_REF {ref!r} is not a commit or tag of this repository: a learner's set-up cell "
        "could not fetch it. After committing, run: make set-ref REF=$(git rev-parse HEAD)"
    )
    changed = subprocess.run(
        ["git", "-C", str(root), "diff", "--stat", ref, "--", "utils"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not changed.strip(), (
        f"utils/ differs from COURSE_REF {ref!r}, so Colab/Kaggle would fetch other code than "
        f"the notebooks ran with:\n{changed}\nCommit, then: make set-ref REF=$(git rev-parse HEAD)"
    )


def test_nbval_markers_are_alone_on_their_line():
    """nbval honours `# NBVAL_IGNORE_OUTPUT` only as the whole comment: any text after it (an
    explanation in brackets) silently turns the marker off and the output is compared again."""
    markers = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION")
    bad = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            for line in cell["source"] if cell["cell_type"] == "code" else []:
                comment = line.strip().lstrip("#").strip()
                if line.strip().startswith("#") and comment.startswith("NBVAL_"):
                    if comment not in markers:
                        bad.append(f"{path.name} cell {i}: {line.strip()!r}")
    assert not bad, "markers nbval will not see:\n" + "\n".join(bad)
