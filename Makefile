# `make run`: set up the environment if needed, then run the whole DVC pipeline offline.
# `make test`: set up the environment if needed, then lint and run the test suite (< 15 min on 2 cores).
# `make test-e2e`: the end-to-end tests that run whole DVC pipelines, queues and README walkthroughs
# (marked `slow`; several minutes each). CI (.ci/run) runs both.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dpaudit-installed

.PHONY: run test test-e2e lint env chromium clean-outputs

env: $(STAMP)

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11'" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

# Reinstall only when the package metadata changed since the last install.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# Stage commands call `python`: run them inside the virtualenv. params.yaml is checked first, outside
# DVC: an `audits` entry without a dataset or an experiment stops DVC while it reads dvc.yaml ("Could
# not find 'item.experiment'"), before the check stage could name the key.
run: env
	. $(BIN)/activate && python stages/check.py --validate-only && dvc repro

lint: env
	$(BIN)/ruff check src stages tests benchmarks

# The report test renders the HTML in headless Chromium; install Debian's when it is missing.
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the report rendering test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the rendering test will be skipped"; \
	  else echo "note: chromium missing and not root; the rendering test will be skipped"; fi; \
	fi

test: env lint chromium
	. $(BIN)/activate && DPAUDIT_PROGRESS=0 TF_CPP_MIN_LOG_LEVEL=2 python -m pytest -m "not slow" --durations=25

test-e2e: env
	. $(BIN)/activate && DPAUDIT_PROGRESS=0 TF_CPP_MIN_LOG_LEVEL=2 python -m pytest -m slow --durations=0
