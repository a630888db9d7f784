# Train faster on TPUs: every command a learner or maintainer needs.
# `make run` and `make test` work on a fresh clone with only python3 and make installed.

PYTHON  ?= python3
VENV    := .venv
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
test test-unit test-notebooks refresh load-drill: export COURSE_OFFLINE = 1

.PHONY: check-venv help setup run test test-unit test-notebooks test-platforms lint format refresh bench report set-repo-url clean load-drill

help:
	@echo "make run      execute every notebook with papermill into build/ (NB=04 for one, PARAMS=... to override,"
	@echo "              TIMEOUT=1800 seconds per cell by default, 0 for none)"
	@echo "make test     unit tests + pytest --nbval over notebooks/ (stored outputs are compared)"
	@echo "make test-platforms  notebook 02 under Colab's TPU image versions (PLATFORM=kaggle for Kaggle's)"
	@echo "make lint     ruff over utils/, tests/ and notebooks/"
	@echo "make load-drill  unit tests with a CPU hog beside them (HOGS=4; DRILL_NB=08 adds nbval of one notebook)"
	@echo "make refresh  re-execute notebooks in place so stored outputs match the code (NB=04 for one)"
	@echo "make bench    tf.data pipeline benchmark, then the training ladder (MFU per rung, roofline error)"
	@echo "make report   merge build/results and results/ from several machines into build/report.md"
	@echo "make set-repo-url REPO=owner/name   rewrite every Colab link and set-up cell"
	@echo "make clean    remove build/ and caches (keeps .venv; 'make distclean' removes it too)"

setup: $(STAMP)

# An existing .venv must have been built with a usable Python (checked on every make, ~20 ms).
check-venv:
	@if [ -f $(VENV)/pyvenv.cfg ]; then \
	  v=$$(sed -n 's/^version[_a-z]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg | head -n 1); \
	  case "$$v" in 3.10|3.11|3.12) ;; *) \
	    echo "The existing $(VENV) was built with Python $${v:-of unknown version}; this course needs 3.10-3.12 (TensorFlow 2.21 and torch_xla 2.9 wheels). Remove it and rebuild: rm -rf $(VENV) && make setup PYTHON=python3.11"; exit 1;; \
	  esac; \
	  $(BIN)/python -c '' 2>/dev/null || { \
	    echo "The existing $(VENV) is broken: $(BIN)/python does not run (was the Python it was built with removed?). Remove it and rebuild: rm -rf $(VENV) && make setup PYTHON=python3.11"; exit 1; }; \
	fi

$(STAMP): requirements.txt | check-venv
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 10) <= v <= (3, 12) else \
	    "This course needs Python 3.10-3.12 (TensorFlow 2.21 and torch_xla 2.9 wheels); $(PYTHON) is %d.%d. Run: make test PYTHON=python3.11" % v)'
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "$(PYTHON) cannot create virtual environments: install python3-venv (e.g. apt install python3-venv)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (TPU course)" >/dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "Environment ready in $(VENV) (kernel '$(KERNEL)')."

run: $(STAMP)
	$(BIN)/python -m utils.tools.run_course --kernel $(KERNEL) --timeout $(TIMEOUT) $(if $(NB),--only $(NB)) -- $(PARAMS)

test: test-unit test-notebooks

# TensorFlow and torch_xla cannot share one process (importing torch_xla after TensorFlow aborts
# with an LLVM "option registered more than once" error), so the torch_xla tests run apart.
XLA_TESTS := tests/torch
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests $(addprefix --ignore=,$(XLA_TESTS))
	$(if $(XLA_TESTS),$(BIN)/python -m pytest $(XLA_TESTS))

test-notebooks: $(STAMP)
	$(BIN)/python -m pytest --nbval --nbval-kernel-name $(KERNEL) \
	    --nbval-sanitize-with notebooks/nbval_sanitize.cfg -p no:cacheprovider \
	    $(if $(NB),$(wildcard notebooks/$(NB)*.ipynb),notebooks)

# Platform fidelity: notebook 02 (Keras 3 + JAX) executed in a separate venv built from the package
# versions of Colab's TPU image (tests/platforms/colab-tpu-constraints.txt; PLATFORM=kaggle for
# Kaggle's), on the CPU with simulated devices. Needs the network the first time (pip). Colab runs
# Python 3.13 and Kaggle 3.12: python3.13/3.12 is used when installed, else $(PYTHON).
PLATFORM          ?= colab
PLATFORM_VENV     := build/venv-$(PLATFORM)
PLATFORM_PYTHON   ?= $(or $(shell python$(if $(filter colab,$(PLATFORM)),3.13,3.12) -c 'import sys; print(sys.executable)' 2>/dev/null),$(PYTHON))
PLATFORM_PKGS     := jax jaxlib keras numpy ml_dtypes optax matplotlib jsonschema psutil h5py \
                     $(if $(filter kaggle,$(PLATFORM)),tensorflow-cpu)
PLATFORM_STAMP    := $(PLATFORM_VENV)/.installed-$(shell cksum tests/platforms/$(PLATFORM)-tpu-constraints.txt 2>/dev/null | cut -d' ' -f1)

$(PLATFORM_STAMP): tests/platforms/$(PLATFORM)-tpu-constraints.txt
	@test -x $(PLATFORM_VENV)/bin/python || $(PLATFORM_PYTHON) -m venv $(PLATFORM_VENV)
	$(PLATFORM_VENV)/bin/python -m pip install -q -c $< $(PLATFORM_PKGS) nbval ipykernel pytest
	$(PLATFORM_VENV)/bin/python -m ipykernel install --sys-prefix --name tpu-course-$(PLATFORM) >/dev/null
	@rm -f $(PLATFORM_VENV)/.installed-*
	@touch $@

test-platforms: export COURSE_OFFLINE = 1
test-platforms: export COURSE_PLATFORM = $(PLATFORM)
test-platforms: $(PLATFORM_STAMP)
	$(PLATFORM_VENV)/bin/python -m pytest -p no:cacheprovider tests/platforms
	$(PLATFORM_VENV)/bin/python -m pytest -p no:cacheprovider --nbval-lax \
	    --nbval-kernel-name tpu-course-$(PLATFORM) notebooks/02_keras_jax_cifar10.ipynb

# Maintainers: the unit tests with HOGS busy processes beside them (and nbval of DRILL_NB, if
# set), bounded by DRILL_TIMEOUT seconds; the hogs are stopped however it ends. On the shared
# machine: flock /tmp/course-heavy.lock make load-drill
HOGS          ?= 4
DRILL_NB      ?=
DRILL_TIMEOUT ?= 1800
load-drill: $(STAMP)
	$(BIN)/python -m utils.tools.load_drill --hogs $(HOGS) --timeout $(DRILL_TIMEOUT) $(if $(DRILL_NB),--nb $(DRILL_NB))

lint: $(STAMP)
	$(BIN)/ruff check utils tests notebooks
	$(BIN)/ruff format --check utils tests

format: $(STAMP)
	$(BIN)/ruff check --fix utils tests notebooks
	$(BIN)/ruff format utils tests

refresh: $(STAMP)
	$(BIN)/python -m utils.tools.nbtools refresh --kernel $(KERNEL) $(if $(NB),$(wildcard notebooks/$(NB)*.ipynb),notebooks/[0-9]*.ipynb)

bench: $(STAMP)
	$(BIN)/python -m utils.tf.input_bench
	$(BIN)/python -m utils.tf.train_ladder

report: $(STAMP)
	$(BIN)/python -m utils.tools.report build/results results --out build/report.md

set-repo-url: $(STAMP)
	@test -n "$(REPO)" || (echo "usage: make set-repo-url REPO=owner/name" && exit 2)
	$(BIN)/python -m utils.tools.nbtools set-repo --repo $(REPO)

clean:
	rm -rf build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
