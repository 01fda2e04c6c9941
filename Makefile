# The two commands a user needs: `make demo` and `make test` (and `make bench` for the benchmarks).
# Each creates .venv (Python 3.11+) with what it needs when it is missing, then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench prompts clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed; set PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/graph-engine demo

test: $(STAMP)
	$(BIN)/python -m pytest

# accept a change to the text the model reads or the card shows: rewrites fixtures/prompts/*.txt and
# fixtures/cards/*.txt (review the diff)
prompts: $(STAMP)
	$(BIN)/python -m pytest tests/test_prompts.py tests/test_card.py --snapshot-update -q

# the `bench` extra (LangGraph, for the side-by-side rows) is installed on top of the test extras
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $@

bench: $(VENV)/.bench-installed
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache
