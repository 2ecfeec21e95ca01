# The two Quick start commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint docs bench clean lock

# Everything is installed from the lock files in requirements/ (exact versions of every
# package, extras and dev tools included), so a new SDK release cannot change what a
# clean clone runs. agac itself goes in last, editable and without resolving anything.
# Upgrading the lock is `make lock`, committed on its own.
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: $(BIN)/python pyproject.toml requirements/core.txt
	$(PIP) -r requirements/core.txt
	$(PIP) --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q src  # as a wheel install would: no compiling at each start
	touch $@

$(VENV)/.dev: $(BIN)/python pyproject.toml requirements/dev.txt
	$(PIP) -r requirements/dev.txt
	$(PIP) --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q src
	touch $@ $(VENV)/.core

# Install agac, create ./demo from the bundled example, run it offline on the mock
# provider, export the results and say where they are.
demo: $(VENV)/.core
	$(BIN)/agac init demo --example quickstart
	cd demo && ../$(BIN)/agac run review_triage
	cd demo && ../$(BIN)/agac export review_triage --action classify --format jsonl --out results/classify.jsonl
	cd demo && ../$(BIN)/agac export review_triage --action reply --format csv --out results/reply.csv
	@echo
	@echo "Results: $(CURDIR)/demo/results/ (classify.jsonl, reply.csv); store: $(CURDIR)/demo/.agac/agac.db"
	@echo "Try: cd demo && ../$(BIN)/agac status review_triage && ../$(BIN)/agac records show r0001"
	@echo "Put agac on your PATH in this shell with:"
	@echo "    . $(abspath $(VENV))/bin/activate"

# Install the dev dependencies and run the whole suite. The suite starts its own
# throwaway PostgreSQL (tests/pg.py, one per test worker); CI runs exactly this target.
# Most of the suite's time is spent waiting on the agac processes, servers and crashes it
# drives, so it runs in TEST_WORKERS processes (pytest-xdist); TEST_WORKERS=0 runs it in one.
# `--dist worksteal`: a process with nothing left takes half the queue of the busiest one,
# so a run of slow tests handed out together (the worker or crash tests) is not the tail.
TEST_WORKERS ?= 3
test: $(VENV)/.dev
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# Lint, layout and types: ruff's checks, ruff's formatter in check mode (`ruff format`
# fixes what it reports) and mypy over the package (all pinned in the dev lock).
lint: $(VENV)/.dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src

# The documentation site (mkdocs-material; the API reference from docstrings through
# mkdocstrings), built with --strict: a broken link or a missing page fails the build.
docs: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The engine benchmarks of issue 2 (results in docs/performance.md).
bench: $(VENV)/.dev
	$(BIN)/python bench/online_mock.py

clean:
	rm -rf demo .pytest_cache site

# Re-resolve the lock files from pyproject.toml with uv (`pip install uv`). uv reads only
# PyPI here, never the machine's local pip indexes. Review the diff and commit it alone.
lock:
	uv pip compile pyproject.toml requirements/build.in --extra dev --universal --python-version 3.11 \
		--no-emit-package agac --upgrade -o requirements/dev.txt
	uv pip compile pyproject.toml requirements/build.in --universal --python-version 3.11 \
		--no-emit-package agac -c requirements/dev.txt -o requirements/core.txt
