"""The book's browser test runs with build/venv-book's pytest (``make test-book``); the course's
own pytest runs (``.venv``, which has no Playwright) do not collect this folder."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("playwright") else ["test_*.py"]
