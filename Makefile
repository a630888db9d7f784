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
test test-unit test-notebooks refresh: export COURSE_OFFLINE = 1

.PHONY: check-venv help setup run test test-unit test-notebooks test-platforms lint format refresh bench twice report set-repo-url clean

help:
	@echo "make run      execute every notebook with papermill into build/ (NB=04 for one, PARAMS=... to override,"
	@echo "              TIMEOUT=1800 seconds per cell by default, 0 for none)"
	@echo "make test     unit tests + pytest --nbval over notebooks/ (stored outputs are compared)"
	@echo "make test-platforms  notebook 02 under Colab's TPU image versions (PLATFORM=kaggle for Kaggle's)"
	@echo "make lint     ruff over utils/, tests/ and notebooks/"
	@echo "make refresh  re-execute notebooks in place so stored outputs match the code (NB=04 for one)"
	@echo "make bench    the training ladder on Keras + JAX (verdict per rung), then the TF benchmarks (Cloud TPU VMs)"
	@echo "make twice NB=09  run a notebook twice (second time beside a CPU hog); fail on opposite verdicts"
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

lint: $(STAMP)
	$(BIN)/ruff check utils tests notebooks
	$(BIN)/ruff format --check utils tests

format: $(STAMP)
	$(BIN)/ruff check --fix utils tests notebooks
	$(BIN)/ruff format utils tests

refresh: $(STAMP)
	$(BIN)/python -m utils.tools.nbtools refresh --kernel $(KERNEL) $(if $(NB),$(wildcard notebooks/$(NB)*.ipynb),notebooks/[0-9]*.ipynb)

# The training-speed ladder on Keras 3 + JAX (the free TPUs' stack), verdicts from interleaved
# rounds; then the TensorFlow benchmarks, for Cloud TPU VMs with a TF image (and this CPU).
bench: $(STAMP)
	KERAS_BACKEND=jax $(BIN)/python -m utils.jax.ladder_bench
	@echo "--- TensorFlow (for Cloud TPU VMs with a TF image) ---"
	$(BIN)/python -m utils.tf.input_bench
	KERAS_BACKEND=tensorflow $(BIN)/python -m utils.tf.train_ladder

# Maintainer check: run notebook NB twice (the second time beside a 2-process CPU hog) and fail
# on opposite verdicts. Heavy: on a shared machine, prefix it with the course's lock.
twice: $(STAMP)
	@test -n "$(NB)" || (echo "usage: make twice NB=09" && exit 2)
	COURSE_OFFLINE=1 $(BIN)/python -m utils.tools.twice $(NB) --kernel $(KERNEL)

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
