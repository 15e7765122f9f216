# The two quickstart commands, and the few others a developer runs.
# Everything installs itself into .venv on first use (torch from this machine's pinned wheels).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-fast lint bench

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "torch==2.14.1" "torchvision==0.29.1" -e ".[dev]"
	touch $(STAMP)

## Train ResNet-18 with DDP on 2 emulated SageMaker nodes on this machine (no cloud, no Docker).
demo: $(STAMP)
	test -d demo-data || $(VENV)/bin/cloudddp demo-data demo-data
	$(VENV)/bin/cloudddp launch --provider local --nodes 2 --input train=demo-data sources/train_ddp.py

## Lint, then every test (slow multi-process ones included).
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest $(PYTEST_ARGS)

## The quick loop: unit tests only.
test-fast: $(STAMP)
	$(VENV)/bin/pytest -m "not slow" -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/launcher_overhead.py --runs 7
