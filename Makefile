# The two commands a user needs: `make demo` and `make test` (and `make bench` for the benchmarks).
# Each creates .venv (Python 3.11+) with what it needs when it is missing, then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
GENERATED := $(shell grep -l "@given" tests/test_*.py tests/*/test_*.py 2>/dev/null)

.PHONY: demo test test-deep bench prompts tables plugin webui-lib matcher real-loop real-ui real-loop-bench clean

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

# the deep runs: the tests marked `deep` (every labelled message, the matcher's folds and rebuild), then the
# generated tests with large budgets (hypothesis profile "deep")
test-deep: $(STAMP)
	$(BIN)/python -m pytest -m deep
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -m 'not deep' $(GENERATED)

# accept a change to the text the model reads or the card shows: rewrites fixtures/prompts/*.txt and
# fixtures/cards/*.txt (review the diff)
prompts: $(STAMP)
	$(BIN)/python -m pytest tests/texts/test_prompts.py tests/texts/test_card.py --snapshot-update -q

# write the plan language's tables (extensions/graph_engine/kinds.py) into the schema's enums and the docs' tables
tables: $(STAMP)
	$(BIN)/python -m graph_engine.tools.tables

# learn what matching ships (matching/data/matcher.json) from the bundled library and the labelled set; one
# thread, so that the same inputs give the same bytes (review and commit the file)
matcher: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/graph-engine build-matcher

# the web UI's layout library (dagre, pinned by package-lock.json; not committed): `npm ci` checks and unpacks the
# tarball into node_modules/, then the one file the component imports is made from it (without npm: downloaded
# from the npm registry and checked against the lock by the same script)
DAGRE := extensions/webui/graph_workflow_engine/dagre.js
DAGRE_TOOL := extensions/graph_engine/tools/dagre.py

$(DAGRE): package.json package-lock.json $(DAGRE_TOOL)
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null && \
	  $(PYTHON) -B $(DAGRE_TOOL) --from node_modules/@dagrejs/dagre --out $@ >&2; \
	else $(PYTHON) -B $(DAGRE_TOOL) --out $@ >&2; fi

webui-lib: $(DAGRE)

# the ZIP that Agent-Zero v1.x's Plugins dialog installs (only what runs inside Agent-Zero, the layout library
# built); prints its path.  WEBUI_LIB= leaves the library as it is (the tests: no network)
WEBUI_LIB ?= $(DAGRE)
plugin: $(WEBUI_LIB)
	@$(PYTHON) -B extensions/graph_engine/tools/installer.py --build-plugin dist

# the `bench` extra (LangGraph, for the side-by-side rows) is installed on top of the test extras
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $@

bench: $(VENV)/.bench-installed
	$(BIN)/python bench/run.py

# the pack in Agent-Zero's real message loop: A0_TREES names a folder of Agent-Zero source trees (see docs/development.md,
# Development); each tree's Python environment is built once under $(A0_TREES)/.venvs/
real-loop: $(STAMP)
	@test -n "$(A0_TREES)" -a -d "$(A0_TREES)" || { echo "make real-loop: set A0_TREES to a folder of Agent-Zero trees (docs/development.md)"; exit 2; }
	A0_TREES="$(A0_TREES)" $(BIN)/python tests/a0env.py
	A0_TREES="$(A0_TREES)" $(BIN)/python -m pytest $(wildcard tests/test_real_loop*.py)

# the workflow component in Agent-Zero's real web UI (v1.7's run_ui.py), driven by headless Chromium (Debian's
# chromium package, which this target does not install); screenshots in build/ui-shots
real-ui: $(STAMP) $(DAGRE)
	@test -n "$(A0_TREES)" -a -d "$(A0_TREES)" || { echo "make real-ui: set A0_TREES to a folder of Agent-Zero trees (docs/development.md)"; exit 2; }
	$(BIN)/python -m pip install --quiet -e '.[ui]'
	A0_TREES="$(A0_TREES)" $(BIN)/python tests/a0env.py v1.7
	A0_TREES="$(A0_TREES)" GRAPH_ENGINE_UI_SHOTS="$(CURDIR)/build/ui-shots" $(BIN)/python -m pytest $(wildcard tests/test_real_ui*.py)

# the two hooks timed (and profiled) in Agent-Zero's real message loop, v1.7 tree of A0_TREES: prints the table,
# writes bench/real_loop_results.json and the real-loop table of docs/performance.md
real-loop-bench: $(STAMP)
	@test -n "$(A0_TREES)" -a -d "$(A0_TREES)" || { echo "make real-loop-bench: set A0_TREES to a folder of Agent-Zero trees (docs/development.md)"; exit 2; }
	A0_TREES="$(A0_TREES)" $(BIN)/python tests/a0env.py v1.7
	A0_TREES="$(A0_TREES)" $(BIN)/python bench/real_loop.py

clean:
	rm -rf $(VENV) .pytest_cache node_modules $(DAGRE)
