"""Maintainer tools, run from the command line; notebooks never import them.

- ``run_course``: ``make run``: execute notebooks with papermill, collect results.
- ``report``: ``make report``: merge results files from several machines into one table.
- ``nbtools``: ``make refresh`` and ``make set-repo-url``: re-execute notebooks, rewrite links.
"""
