# The two quickstart commands, and the few others a developer runs.
# Everything installs itself into .venv on first use (torch from this machine's pinned wheels).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
SDK2    := .venv-sdk2
SDK3    := .venv-sdk

.PHONY: demo test test-fast test-all lint debian-deps bench sdk2-env test-sdk docs

$(STAMP): pyproject.toml
	infra/venv-install $(VENV) --quiet "torch==2.14.1" "torchvision==0.29.1" -e ".[dev]"
	touch $(STAMP)

## What the demo needs and nothing else: cloudddp with [train] (torch, torchvision), not the test toolchain.
## Its own stamp: `make test` still installs .[dev] (a superset: once it has, the demo installs nothing).
DEMO_STAMP := $(VENV)/.demo-stamp
$(DEMO_STAMP): pyproject.toml
	@echo "cloudddp demo: setting up $(VENV) (a Python virtual environment in this folder)"
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then \
	  echo "cloudddp demo: $(VENV) already holds cloudddp, torch and torchvision (installed by make test)"; \
	else \
	  echo "cloudddp demo: installing cloudddp[train] with torch==2.14.1 and torchvision==0.29.1 (its progress below)"; \
	  infra/venv-install $(VENV) "torch==2.14.1" "torchvision==0.29.1" -e ".[train]"; \
	fi
	touch $@

## Train ResNet-18 with DDP on 2 emulated SageMaker nodes on this machine (no cloud, no Docker).
demo: $(DEMO_STAMP)
	@test -d demo-data || echo "cloudddp demo: writing a small two-class image dataset to demo-data/"
	test -d demo-data || $(VENV)/bin/cloudddp demo-data demo-data
	@echo "cloudddp demo: training ResNet-18 with DDP on 2 emulated SageMaker nodes (each line is prefixed with its node)"
	$(VENV)/bin/cloudddp launch --provider local --nodes 2 --input train=demo-data sources/train_ddp.py

## Test tiers (tests/tiers.py; docs/contributing.md): unit (in process), component (one real local part),
## smoke (a short list of multi-process system tests) and full (the rest of the multi-process tests).
## xdist spreads the tests over WORKERS processes: most of their time is spent waiting on the processes and
## servers they start, so 3 workers keep 2 cores busy. One Slurm test cluster runs at a time (its lock, fixed ports).
WORKERS ?= 3
REPORTS := .test-reports
PYTEST  := $(VENV)/bin/pytest -p no:cacheprovider
TIER_REPORT := $(PY) tests/tier_report.py

## The quick loop: unit tests only (in process, no sockets, no child processes).
test-fast: $(STAMP)
	$(PYTEST) -m unit -q -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/basedpyright --project . --level error  # this folder's pyproject.toml, never an ancestor's pyrightconfig.json
	$(VENV)/bin/lint-imports

## The README's test command: lint, then unit + component + smoke (every real part at least once), then the
## minutes per tier and a check that no real part went untested (tests/tier_report.py).
test: $(STAMP) debian-deps lint
	@mkdir -p $(REPORTS)
	$(PYTEST) -m "unit or component or smoke" -n $(WORKERS) --dist loadgroup --junitxml=$(REPORTS)/test.xml \
	  $(PYTEST_ARGS); status=$$?; $(TIER_REPORT) $(REPORTS)/test.xml --optional sagemaker_sdk || status=1; exit $$status

## Everything: make test, then the full tier with both SageMaker SDK environments (CI runs this). The full tier on
## FULL_WORKERS processes: its tests are multi-process and CPU-heavier than make test's, and spend most of their time
## waiting (one process used 15 CPU-minutes in 22.5 wall-minutes). Side by side, two tests must never share a port:
## every fake that puts several "hosts" on 127.0.0.1 gives each job its own (providers/local free_port).
FULL_WORKERS ?= 2
test-all: test $(SDK2)/.installed-stamp $(SDK3)/.installed-stamp
	$(PYTEST) -m full -n $(FULL_WORKERS) --dist loadgroup --junitxml=$(REPORTS)/full.xml \
	  $(PYTEST_ARGS); status=$$?; $(TIER_REPORT) $(REPORTS)/test.xml $(REPORTS)/full.xml || status=1; exit $$status

## Debian's packages the tests run for real: a Slurm cluster (slurm-wlm + munge; infra/slurm/test-cluster.sh),
## Slurm's PBS/Torque wrappers (qsub/qstat/qdel for the PBS provider) and etcd (torchrun's etcd rendezvous).
## Installed when missing; needs root (CI is root). Without them their tests skip, and tier_report fails the run.
DEBIAN_PACKAGES := slurm-wlm munge slurm-wlm-torque etcd-server chromium chromium-driver
debian-deps:
	@if command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v qsub >/dev/null \
	  && command -v etcd >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's $(DEBIAN_PACKAGES) (the tests run them for real)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    $(DEBIAN_PACKAGES) >/dev/null; \
	else \
	  echo "the tests run Debian's $(DEBIAN_PACKAGES): sudo apt-get install $(DEBIAN_PACKAGES)"; \
	fi

bench: $(STAMP)
	$(PY) benchmarks/launcher_overhead.py --runs 7

## The real SageMaker SDK v2 (for capturing its requests, the drop-in benchmark and the SDK-session test)
## with cloudddp beside it, never in .venv. Stops if the install would pull torch into it.
$(SDK2)/.installed-stamp: pyproject.toml
	infra/venv-install --refuse torch $(SDK2) --quiet "sagemaker>=2.200,<3" -e .
	touch $@

sdk2-env: $(SDK2)/.installed-stamp

## The SageMaker SDK v3 interop tests (tests/providers/sagemaker/test_sagemaker_sdk.py) with the SDK in its own env, .venv-sdk
## (about 1 GB). `make test-all` builds it and runs them.
$(SDK3)/.installed-stamp: pyproject.toml
	infra/venv-install $(SDK3) --quiet -e ".[sagemaker-sdk]"
	touch $@

test-sdk: $(STAMP) $(SDK3)/.installed-stamp
	$(VENV)/bin/pytest tests/providers/sagemaker/test_sagemaker_sdk.py $(PYTEST_ARGS)

## The docs site (docs/, mkdocs.yml) into site/, warnings as errors. Needs the [docs] extra: pip install -e '.[docs]'.
docs:
	@test -x $(PY) && $(PY) -c "import mkdocs, material, mkdocs_click" 2>/dev/null || infra/venv-install $(VENV) --quiet -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
