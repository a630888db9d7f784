# Train faster on TPUs: every command a learner or maintainer needs.
# `make run` and `make test` work on a fresh clone with only python3 and make installed.

PYTHON  ?= python3
# The course's virtual environment; `make setup PYTHON=python3.13 VENV=/elsewhere/venv` builds
# another one (e.g. to test a Python version) without touching .venv.
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
KERNEL  := tpu-course
# One notebook alone: `make run NB=04` (a prefix or a path). Parameters: `make run PARAMS="-p EPOCHS 2"`.
NB      ?=
PARAMS  ?=
# `make run` stops a notebook whose cell runs longer than TIMEOUT seconds (0: no limit) and reports
# it as failed; the others still run. Generous: the longest cell takes minutes on a 2-core CPU.
TIMEOUT ?= 1800

# Quiet, reproducible notebook runs (inherited by papermill's and nbval's kernels).
export TF_CPP_MIN_LOG_LEVEL ?= 2
export TQDM_DISABLE ?= 1
export PYTHONHASHSEED ?= 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Tests and stored outputs use the offline CIFAR-10 stand-in: CI has no network, and tests may
# contact no address but 127.0.0.1. `make run` probes the network (bounded) and uses real data.
test test-unit test-notebooks refresh: export COURSE_OFFLINE = 1

.PHONY: check-venv help setup browser run test test-unit test-notebooks test-platforms platform-venv lint format refresh bench twice stress-multihost set-repo-url sync-setup set-ref status clean book test-book

help:
	@echo "make run      execute every notebook with papermill into build/ (NB=04 for one, PARAMS=... to override,"
	@echo "              TIMEOUT=1800 seconds per cell by default, 0 for none)"
	@echo "make test     unit tests + pytest --nbval over notebooks/ (stored outputs are compared)"
	@echo "make test-platforms  every notebook under Colab's and Kaggle's TPU image versions (about an hour;"
	@echo "              PLATFORMS=colab or NB=04 for fewer); writes results/platform-matrix.json"
	@echo "make lint     ruff over utils/, tests/ and notebooks/"
	@echo "make refresh  re-execute notebooks in place so stored outputs match the code (NB=04 for one)"
	@echo "make bench    the training ladder on Keras + JAX: a verdict, interval and coverage per rung"
	@echo "make twice NB=09  run a notebook twice (second time beside a CPU hog); fail on opposite verdicts"
	@echo "make stress-multihost RUNS=20 HOG=2  08's multi-host jobs many times beside a CPU hog; fail on a hang"
	@echo "make set-repo-url REPO=owner/name   rewrite every Colab link and set-up cell"
	@echo "make sync-setup      rewrite every notebook's set-up cell to CONTRIBUTING.md's"
	@echo "make set-ref REF=v1.0  set COURSE_REF (the course code a notebook fetches on Colab/Kaggle), then sync-setup"
	@echo "make status   rewrite README's status table from results/ (run times, platform matrix)"
	@echo "make book     the course as a website in build/book/html from the stored notebooks (no execution)"
	@echo "make test-book  build it, then open every page in headless Chromium (also the end of make test)"
	@echo "make clean    remove build/ and caches (keeps .venv; 'make distclean' removes it too)"

setup: $(STAMP)

# Python 3.11-3.13: jax 0.10.2 and keras 3.15 need >= 3.11; every pinned wheel (TensorFlow 2.21,
# torch 2.9, torch_xla 2.9, jaxlib 0.10.2) exists for 3.13, the Python of Colab's TPU image.
# An existing .venv must have been built with a usable Python (checked on every make, ~20 ms).
check-venv:
	@if [ -f $(VENV)/pyvenv.cfg ]; then \
	  v=$$(sed -n 's/^version[_a-z]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg | head -n 1); \
	  case "$$v" in 3.11|3.12|3.13) ;; *) \
	    echo "The existing $(VENV) was built with Python $${v:-of unknown version}; this course needs 3.11-3.13 (jax 0.10 and keras 3.15 need >= 3.11; TensorFlow 2.21 has no wheel beyond 3.13). Remove it and rebuild: rm -rf $(VENV) && make setup PYTHON=python3.13"; exit 1;; \
	  esac; \
	  $(BIN)/python -c '' 2>/dev/null || { \
	    echo "The existing $(VENV) is broken: $(BIN)/python does not run (was the Python it was built with removed?). Remove it and rebuild: rm -rf $(VENV) && make setup PYTHON=python3.13"; exit 1; }; \
	fi

$(STAMP): requirements.txt | check-venv
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 11) <= v <= (3, 13) else \
	    "This course needs Python 3.11-3.13 (jax 0.10 and keras 3.15 need >= 3.11; TensorFlow 2.21 has no wheel beyond 3.13); $(PYTHON) is %d.%d. Run: make test PYTHON=python3.13" % v)' \
	    || { [ $$? -eq 127 ] && echo "$(PYTHON) not found: install Python 3.11-3.13, or name one with PYTHON=python3.13"; exit 1; }
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "$(PYTHON) cannot create virtual environments: install python3-venv (e.g. apt install python3-venv)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (TPU course)" >/dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "Environment ready in $(VENV) (kernel '$(KERNEL)')."

run: $(STAMP)
	$(BIN)/python -m tests.tools.course run --kernel $(KERNEL) --timeout $(TIMEOUT) $(if $(NB),--only $(NB)) -- $(PARAMS)

# TensorFlow and torch_xla cannot share one process (importing torch_xla after TensorFlow aborts
# with an LLVM "option registered more than once" error), so the torch_xla tests run apart.
XLA_TESTS := tests/torch
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests $(addprefix --ignore=,$(XLA_TESTS) $(BOOK_TESTS))
	$(if $(XLA_TESTS),$(BIN)/python -m pytest $(XLA_TESTS))

# All notebooks: two nbval shards side by side, of about equal run time (shard b is every notebook
# not in NB_SHARD_A). The notebooks share no files and must pass with another run beside them
# anyway; on 2 cores this takes about two thirds of the time of one after the other. Each line of
# pytest's report is prefixed with its shard. NB=04 checks one notebook alone.
NBVAL       = $(BIN)/python -m pytest --nbval --nbval-kernel-name $(KERNEL) \
              --nbval-sanitize-with notebooks/nbval_sanitize.cfg -p no:cacheprovider
NB_SHARD_A ?= 09 08 03 01 00
NB_ALL      = $(wildcard notebooks/[0-9]*.ipynb)
NB_A        = $(foreach n,$(NB_SHARD_A),$(wildcard notebooks/$(n)*.ipynb))
NB_B        = $(filter-out $(NB_A),$(NB_ALL))
test-notebooks: $(STAMP)
ifneq ($(NB),)
	$(NBVAL) $(wildcard notebooks/$(NB)*.ipynb)
else
	@echo "nbval, two shards side by side: [a] $(notdir $(NB_A)); [b] $(notdir $(NB_B))"
	@bash -c 'set -o pipefail; \
	  ($(NBVAL) -v $(NB_A) 2>&1 | sed -u "s/^/[a] /") & a=$$!; \
	  ($(NBVAL) -v $(NB_B) 2>&1 | sed -u "s/^/[b] /") & b=$$!; \
	  ra=0; wait $$a || ra=$$?; rb=0; wait $$b || rb=$$?; \
	  echo "nbval: shard a exited $$ra, shard b exited $$rb"; [ $$ra -eq 0 ] && [ $$rb -eq 0 ]'
endif

# The course as a book: a static site in build/book/html from the stored notebooks
# (nothing is executed), built by Jupyter Book in a venv of its own (requirements-book.txt), so
# the learner's .venv does not grow. test-book (the end of make test's lane b) opens every page
# in headless Chromium (Debian's package: apt-get install chromium); screenshots: build/book-shots.
BOOK_VENV  := build/venv-book
# The browser: Debian's Chromium (COURSE_CHROMIUM=/path names another). `make browser` installs it
# as root with apt-get; without root or apt-get it stops at once with the command to run.
export COURSE_CHROMIUM ?= /usr/bin/chromium
BROWSER_INSTALL := apt-get update && apt-get install -y chromium
BOOK_STAMP := $(BOOK_VENV)/.installed-$(shell cksum requirements-book.txt 2>/dev/null | cut -d' ' -f1)
BOOK_TESTS := tests/book

$(BOOK_STAMP): requirements-book.txt
	@test -x $(BOOK_VENV)/bin/python || $(PYTHON) -m venv $(BOOK_VENV)
	$(BOOK_VENV)/bin/python -m pip install -q -r requirements-book.txt
	@rm -f $(BOOK_VENV)/.installed-*
	@touch $@

BOOK_BUILD = $(BOOK_VENV)/bin/python tests/book/build_book.py
BOOK_TEST  = $(BOOK_VENV)/bin/python -m pytest -q -p no:cacheprovider $(BOOK_TESTS)
book: $(BOOK_STAMP)
	$(BOOK_BUILD)

browser:
	@test -x "$(COURSE_CHROMIUM)" && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "Installing Chromium for the book's browser test: $(BROWSER_INSTALL)"; \
	  log=$$(mktemp); { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } >$$log 2>&1 \
	    || { tail -n 5 $$log; echo "Installing Chromium failed (whole log: $$log)."; exit 1; }; \
	  rm -f $$log; test -x "$(COURSE_CHROMIUM)" || { echo "apt-get installed no $(COURSE_CHROMIUM)"; exit 1; }; \
	else \
	  echo "make test opens the book in headless Chromium, and there is none at $(COURSE_CHROMIUM)."; \
	  echo "Install it (Debian or Ubuntu): sudo sh -c '$(BROWSER_INSTALL)'"; \
	  echo "or name one: make test COURSE_CHROMIUM=/path/to/chromium"; exit 1; \
	fi

test-book: book browser
	$(BOOK_TEST)

# Everything CI runs, in two lanes side by side (2 cores): lane a runs the framework unit tests
# (tests/jax, tests/keras, tests/tf), then nbval shard a; lane b runs the other unit tests (many of
# them wait on processes and deadlines rather than compute), the torch_xla tests in a process of
# their own, then nbval shard b. Lines are prefixed [a]/[b]; each lane stops at its first failing
# step, and the other lane still finishes. NB=04 runs the unit tests, then nbval on one notebook.
UNIT_A := tests/jax tests/keras tests/tf
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
ifneq ($(NB),)
test: test-unit test-notebooks
else
test: $(STAMP) $(BOOK_STAMP) browser
	@echo "two lanes side by side: [a] $(UNIT_A), nbval of $(notdir $(NB_A)); [b] the other unit tests, $(XLA_TESTS), nbval of $(notdir $(NB_B)), the book"
	@bash -c 'set -o pipefail; s=$$(date +%s); \
	  ( { $(PYTEST) $(UNIT_A) && $(NBVAL) -v $(NB_A); } 2>&1 | sed -u "s/^/[a] /") & a=$$!; \
	  ( { $(PYTEST) tests $(addprefix --ignore=,$(UNIT_A) $(XLA_TESTS) $(BOOK_TESTS)) && $(PYTEST) $(XLA_TESTS) \
	      && $(NBVAL) -v $(NB_B) && $(BOOK_BUILD) && $(BOOK_TEST); } 2>&1 | sed -u "s/^/[b] /") & b=$$!; \
	  ra=0; wait $$a || ra=$$?; rb=0; wait $$b || rb=$$?; \
	  echo "make test: lane a exited $$ra, lane b exited $$rb, $$(( $$(date +%s) - s )) s"; \
	  [ $$ra -eq 0 ] && [ $$rb -eq 0 ]'
endif

# Platform matrix: every notebook run top to bottom (papermill, on this CPU) in a venv built from
# the package versions of Colab's TPU image (Python 3.13) and of Kaggle's (Python 3.12,
# tensorflow-cpu 2.20, torch_xla 2.8): tests/platforms/<platform>-tpu-constraints.txt. Each
# notebook gets only the installs its own bootstrap.prepare calls would make on that TPU image
# (tests/tools/platforms.py replays them); the verdicts go to results/platform-matrix.json.
# Not part of `make test` (about an hour); needs the network the first time (pip, PyPI only).
# PLATFORMS=colab, NB=04 and NB_TIMEOUT=seconds narrow it; LOCK=/tmp/course-heavy.lock takes
# that flock around each notebook (a shared machine).
PLATFORMS         ?= colab kaggle
NB_TIMEOUT        ?= 1800
LOCK              ?=
PLATFORM          ?= colab
PLATFORM_VENV     := build/venv-$(PLATFORM)
# Colab runs Python 3.13, Kaggle 3.12; a pyenv-installed one is found too. Never another version.
PLATFORM_PY       := $(if $(filter colab,$(PLATFORM)),3.13,3.12)
PLATFORM_PYTHON   ?= $(firstword $(shell command -v python$(PLATFORM_PY) >/dev/null 2>&1 && python$(PLATFORM_PY) -c 'import sys; print(sys.executable)' 2>/dev/null) $(wildcard $(HOME)/.pyenv/versions/$(PLATFORM_PY).*/bin/python$(PLATFORM_PY)))
PLATFORM_PKGS     := jax jaxlib keras numpy ml_dtypes optax flax grain orbax-checkpoint torch torch-xla \
                     matplotlib jsonschema psutil h5py scipy pyyaml $(if $(filter kaggle,$(PLATFORM)),tensorflow-cpu)
PLATFORM_TOOLS    := ipykernel nbformat nbclient papermill nbval pytest
PLATFORM_STAMP    := $(PLATFORM_VENV)/.installed-$(shell cksum tests/platforms/$(PLATFORM)-tpu-constraints.txt 2>/dev/null | cut -d' ' -f1)

$(PLATFORM_STAMP): tests/platforms/$(PLATFORM)-tpu-constraints.txt
	@test -n "$(PLATFORM_PYTHON)" || { echo "$(PLATFORM) needs Python $(PLATFORM_PY): install it (e.g. pyenv install $(PLATFORM_PY)) or pass PLATFORM_PYTHON=/path/to/python$(PLATFORM_PY)"; exit 1; }
	@test -x $(PLATFORM_VENV)/bin/python || $(PLATFORM_PYTHON) -m venv $(PLATFORM_VENV)
	$(PLATFORM_VENV)/bin/python -m pip install -q -c $< $(PLATFORM_PKGS) $(PLATFORM_TOOLS)
	$(PLATFORM_VENV)/bin/python -m ipykernel install --sys-prefix --name tpu-course-$(PLATFORM) >/dev/null
	@rm -f $(PLATFORM_VENV)/.installed-*
	@touch $@

platform-venv: $(PLATFORM_STAMP)

test-platforms: export COURSE_OFFLINE = 1
test-platforms:
	@for p in $(PLATFORMS); do $(MAKE) --no-print-directory platform-venv PLATFORM=$$p || exit 1; done
	@for p in $(PLATFORMS); do COURSE_PLATFORM=$$p build/venv-$$p/bin/python -m pytest -q -p no:cacheprovider tests/platforms || exit 1; done
	$(PYTHON) -m tests.tools.platforms --platforms $(PLATFORMS) --timeout $(NB_TIMEOUT) \
	    $(if $(NB),--only $(NB)) $(if $(LOCK),--lock $(LOCK)) --out results/platform-matrix.json

lint: $(STAMP)
	$(BIN)/ruff check utils tests notebooks
	$(BIN)/ruff format --check utils tests notebooks

format: $(STAMP)
	$(BIN)/ruff check --fix utils tests notebooks
	$(BIN)/ruff format utils tests notebooks

refresh: $(STAMP)
	$(BIN)/python -m tests.tools.course refresh --kernel $(KERNEL) $(if $(NB),$(wildcard notebooks/$(NB)*.ipynb),notebooks/[0-9]*.ipynb)

# The training-speed ladder on Keras 3 + JAX (the free TPUs' stack), verdicts from interleaved rounds.
bench: $(STAMP)
	KERAS_BACKEND=jax $(BIN)/python -m tests.tools.bench

# Maintainer check: run notebook NB twice (the second time beside a 2-process CPU hog) and fail
# on opposite verdicts. Heavy: on a shared machine, prefix it with the course's lock.
twice: $(STAMP)
	@test -n "$(NB)" || (echo "usage: make twice NB=09" && exit 2)
	COURSE_OFFLINE=1 $(BIN)/python -m tests.tools.twice $(NB) --kernel $(KERNEL)

# Maintainer check: 08's Keras and JAX multi-host jobs RUNS times each beside HOG busy processes;
# fails if any job fails or hangs (each still ends at its timeout, with its processes' last lines).
RUNS ?= 20
HOG  ?= 2
stress-multihost: $(STAMP)
	COURSE_OFFLINE=1 $(BIN)/python -m tests.tools.stress_multihost --runs $(RUNS) --hog $(HOG)

set-repo-url: $(STAMP)
	@test -n "$(REPO)" || (echo "usage: make set-repo-url REPO=owner/name" && exit 2)
	$(BIN)/python -m tests.tools.course set-repo --repo $(REPO)

# The set-up cell: CONTRIBUTING.md holds it; these rewrite every notebook's copy (no kernel needed).
sync-setup:
	$(PYTHON) -m tests.tools.course sync-setup

set-ref:
	@test -n "$(REF)" || (echo "usage: make set-ref REF=<tag or commit the notebooks fetch>" && exit 2)
	$(PYTHON) -m tests.tools.course sync-setup --ref $(REF)

# README's status table, from results/run-times.json (make refresh) and results/platform-matrix.json.
status:
	$(PYTHON) -m tests.tools.course status

clean:
	rm -rf build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
