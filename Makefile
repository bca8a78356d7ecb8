# Two commands set everything up on a fresh machine:
#   make serve   start the service on http://127.0.0.1:8000 (GPU when numba finds one, else CPU)
#   make test    run the whole test suite (CPU tests, then the GPU kernels under numba's CUDA simulator)
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
DATA_DIR ?= ./data

.PHONY: serve test test-gpu bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $@

serve: $(VENV)/.installed
	$(VENV)/bin/grail-serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

test: $(VENV)/.installed
	$(PY) -m pytest -q -m "not gpu" --ignore=tests/kernels tests
	if [ -d tests/kernels ]; then NUMBA_ENABLE_CUDASIM=1 $(PY) -m pytest -q -m "not gpu" tests/kernels; fi

# On a machine with a CUDA GPU: the same suites, then the GPU-only tests on the real device. Each is its own
# process: numba.cuda runs either the simulator or the device, never both.
test-gpu: $(VENV)/.installed
	$(PY) -m pytest -q -m "not gpu" --ignore=tests/kernels tests
	NUMBA_ENABLE_CUDASIM=1 $(PY) -m pytest -q tests/kernels
	$(PY) -m pytest -q -m gpu tests/gpu

bench: $(VENV)/.installed
	$(PY) benchmarks/bench_queries.py
