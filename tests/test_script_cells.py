"""`%%save_script`: writes the cell to the run's folder, prints nothing, refuses paths."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from utils.script_cells import register_save_script


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def test_the_cell_lands_in_the_folder_and_nothing_is_printed(shell, tmp_path, capsys):
    folder = register_save_script(tmp_path / "scripts")
    result = shell.run_cell("%%save_script train.py\nprint('hello')\n")
    assert result.success, result.error_in_exec
    assert (folder / "train.py").read_text() == "print('hello')\n"
    assert capsys.readouterr().out == ""


def test_a_new_folder_is_made_when_none_is_given(shell):
    folder = register_save_script(prefix="course_test_")
    assert folder.is_dir() and folder.name.startswith("course_test_")
    shell.run_cell("%%save_script a.py\nx = 1\n")
    assert (folder / "a.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("line", ["", "   ", "../escape.py", "sub/train.py", ".."])
def test_a_missing_name_or_a_path_is_refused_and_writes_nothing(shell, tmp_path, line):
    folder = register_save_script(tmp_path / "scripts")
    result = shell.run_cell(f"%%save_script {line}\nx = 1\n")
    assert isinstance(result.error_in_exec, ValueError)
    assert "plain file name" in str(result.error_in_exec)
    assert list(folder.iterdir()) == [] and not (tmp_path / "escape.py").exists()


def test_outside_a_kernel_the_error_says_so(tmp_path):
    InteractiveShell.clear_instance()
    with pytest.raises(RuntimeError, match="Jupyter kernel"):
        register_save_script(tmp_path)
