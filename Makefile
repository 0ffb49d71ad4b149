# The kit's entry points. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RAW ?= raw_results
LEGACY ?= examples/legacy
REPORT ?= report
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help setup demo demo-import report test lint lab docs clean clean-results

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml setup.py harness/loadgen/_native.c $(wildcard harness/loadgen/native_core/*) scripts/ensure-system-packages.sh
	scripts/ensure-system-packages.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@$(BIN)/python -c 'from harness.loadgen import native; print(native.describe())'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (kvbench)" >/dev/null
	touch $(STAMP)

setup: $(STAMP) ## create .venv, install the kit and any missing servers
	@echo "setup done: activate with 'source $(BIN)/activate'"

demo: setup demo-import ## run the built-in studies at demo scale on localhost, then write the report
	@# `harness list --demo`: each registered study's specs, one per line with the options a
	@# run needs here (without root: no network namespaces); the registry is the one list.
	@$(BIN)/harness list --demo > $(VENV)/demo-runs || exit 1; \
	while read -r spec opts; do \
	  echo "harness run experiments/$$spec $$opts"; \
	  $(BIN)/harness run "experiments/$$spec" --out $(RAW) --resume $$opts < /dev/null || exit 1; \
	done < $(VENV)/demo-runs
	$(BIN)/harness report --raw $(RAW) --out $(REPORT)

demo-import: setup ## import the seed reports' own numbers (once; re-import is refused)
	@# `harness list --legacy`: format, file (in $(LEGACY)), experiment per registered study
	@$(BIN)/harness list --legacy > $(VENV)/demo-imports || exit 1; \
	while read -r fmt file exp; do \
	  if [ -d "$(RAW)/imported/$$exp" ]; then echo "$$exp: imported already"; \
	  else $(BIN)/harness import "$$fmt" "$(LEGACY)/$$file" -o $(RAW)/imported --experiment "$$exp" < /dev/null || exit 1; fi; \
	done < $(VENV)/demo-imports

report: setup ## regenerate report/report.{html,pdf} from existing raw results
	$(BIN)/harness report --raw $(RAW) --out $(REPORT)

lint: setup ## ruff
	$(BIN)/ruff check harness tests benchmarks examples

# The tests that time things or load the CPU on purpose run alone (`serial`, see
# tests/conftest.py); the others in TEST_JOBS worker processes, a file at a time: most
# of them wait on servers and subprocesses, not on the CPU.
TEST_JOBS ?= 4
test: setup lint ## ruff, then the whole test suite (starts real servers)
	$(BIN)/pytest -q -p no:cacheprovider -m "not serial" -n $(TEST_JOBS) --dist loadfile --durations=15
	$(BIN)/pytest -q -p no:cacheprovider -m serial --durations=15

# --strict: a broken link or anchor, or a page left out of the nav, fails the build.
docs: setup ## build the manual (MkDocs) into site/; open site/index.html
	$(BIN)/mkdocs build --strict

# JupyterLab refuses to run as root without --allow-root; `make setup` assumes root on
# Debian, so both must work. LAB_ARGS passes anything else, e.g.
#   make lab LAB_ARGS="--ip=0.0.0.0 --port=8899 --IdentityProvider.token=secret --no-browser"
LAB_ARGS ?=
lab: setup ## open JupyterLab on the notebooks (LAB_ARGS="--ip=... --port=... --no-browser")
	$(BIN)/jupyter lab notebooks/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) $(LAB_ARGS)

clean-results: ## delete raw results, figures and report outputs (asks no questions)
	find $(RAW) -mindepth 1 -not -name .gitkeep -not -name README.md -delete
	find figures -mindepth 1 -not -name .gitkeep -not -name README.md -delete
	rm -rf $(REPORT)/executed $(REPORT)/report.html $(REPORT)/report.pdf

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache site
