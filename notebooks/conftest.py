"""pytest --nbval settings for the course notebooks.

Framework libraries write warnings to stderr that change between releases and machines, so
stderr is not compared (stdout, results and plots' text are). See shared notes on nbval.
"""


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)


#: Seconds nbval waits for a cell's next output message after the kernel's reply (nbval's own is 5).
#: The outputs travel on another channel than the reply, and on a loaded 2-core machine (two nbval
#: shards side by side, or a run beside another job) a plot's output has come later than 5 s.
#: A cell that finishes normally is not slowed: reading stops at the kernel's "idle".
OUTPUT_TIMEOUT_S = 120


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = max(item.output_timeout, OUTPUT_TIMEOUT_S)
