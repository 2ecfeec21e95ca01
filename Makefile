# The two Quick start commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.core: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m compileall -q src  # as a wheel install would: no compiling at each start
	touch $@

$(VENV)/.dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
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

# Install the dev dependencies and run the whole suite. The suite starts its own
# throwaway PostgreSQL (tests/pg.py); CI runs exactly this target.
test: $(VENV)/.dev
	$(BIN)/python -m pytest -q

# The engine benchmarks of issue 2 (results in docs/performance.md).
bench: $(VENV)/.dev
	$(BIN)/python bench/online_mock.py

clean:
	rm -rf demo .pytest_cache
