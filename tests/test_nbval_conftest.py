"""notebooks/conftest.py: nbval's settings for the course notebooks."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def _conftest():
    spec = importlib.util.spec_from_file_location("nb_conftest", ROOT / "notebooks" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cells_wait_longer_for_their_outputs_than_nbvals_five_seconds():
    conftest = _conftest()
    cell = SimpleNamespace(output_timeout=5)  # as nbval's IPyNbCell sets it
    other = SimpleNamespace()  # a plain test item has no output timeout
    conftest.pytest_collection_modifyitems([cell, other])
    assert cell.output_timeout == conftest.OUTPUT_TIMEOUT_S >= 60
    assert not hasattr(other, "output_timeout")


def test_nbval_still_names_the_attribute_the_conftest_raises():
    """If nbval renames ``output_timeout``, the conftest would silently do nothing."""
    import nbval.plugin

    source = Path(nbval.plugin.__file__).read_text()
    assert "timeout=self.output_timeout" in source
