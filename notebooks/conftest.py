"""pytest --nbval settings for the course notebooks.

Framework libraries write warnings to stderr that change between releases and machines, so
stderr is not compared (stdout, results and plots' text are). See shared notes on nbval.
"""


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
