# Two entry points for a newcomer: `make demo` (install, load data/, ask a question) and
# `make test` (install, run the fast test lane). Both install into .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
DS := $(VENV)/bin/deepsearcher
QUESTION ?= Which office assembles the NR-7 robot, and who is that office's manager?

.PHONY: install demo test test-slow test-all lint bench reference
install: $(VENV)/.installed

# torch==2.13.0 goes first: it is the CPU build on this machine's disk; without it pip would
# resolve torch for sentence-transformers to a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,web,eval,scale]'
	touch $@

demo: install
	$(DS) load data/ --collection demo --description "Northwind Robotics sample documents"
	$(DS) query "$(QUESTION)" --collection demo

# The `slow` marker is applied in tests/conftest.py (browser, Ray, several processes, real
# servers). `test` + `test-slow` together run every test once; `test-all` runs them in one go.
PYTEST := $(VENV)/bin/pytest -q --durations=15
# The fast lane runs on one worker per core (pytest-xdist, at most 4): its tests wait on
# sockets, subprocesses and model loads as much as they compute. The slow lane stays in one
# process: its multi-process and browser tests already use the cores.
test: install
	$(PYTEST) -m "not slow" -n auto --maxprocesses 4

test-slow: install
	$(PYTEST) -m slow

test-all: install
	$(PYTEST)

lint: install
	$(VENV)/bin/ruff check deepsearcher loaders tests benchmarks scripts
	$(VENV)/bin/ruff format --check deepsearcher loaders tests benchmarks scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

reference: install
	$(PY) scripts/gen_reference.py

bench: install
	$(PY) benchmarks/ingest.py
	$(PY) benchmarks/query.py
	$(PY) benchmarks/query.py --top-k 5 --max-llm-calls 60 --concurrency 8 --out-name query_k5
	$(PY) benchmarks/topk_recall.py
	$(PY) benchmarks/serve.py
	$(PY) benchmarks/research.py
