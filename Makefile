# make serve   install the service (runtime only) into .venv and serve http://127.0.0.1:8000
# make test    install the test tools too and run the whole test suite (no GPU, no datasets needed)
# make lint    ruff (lint and format check) and mypy on grail_core and service, as CI runs them
# make docs    build the documentation site from docs/ into site/ (MkDocs, strict: a broken link or anchor fails it)
# make bench   the CPU query benchmark (needs the shared datasets)
# make lock    re-resolve requirements.lock after a dependency change in pyproject.toml
# Every install takes its versions from requirements.lock, as the container build and CI do.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
DATA_DIR ?= ./data
LOCK := requirements.lock
# numba-cuda and NVIDIA's CUDA wheels where the machine has a GPU (the driver's control node is the sign);
# CUDA_EXTRA picks the toolkit: cu12 (driver 525 or newer) or cu13 (580 or newer), as in the Dockerfile.
CUDA_EXTRA ?= cu12
GPU := $(wildcard /dev/nvidiactl)
SERVE_REQUIREMENTS := $(if $(GPU),".[cuda]" "numba-cuda[$(CUDA_EXTRA)]",.)
PIP_INSTALL := $(PY) -m pip install -q --constraint $(LOCK)
# The test, development and benchmark tools are installed with uv (the lock's version, installed by pip first):
# several times faster than pip on a fresh machine. uv reads its own settings (UV_INDEX_URL, ...), not pip's.
# --compile-bytecode: the installed packages' bytecode is written once, here; where PYTHONDONTWRITEBYTECODE is
# set (many CI and container environments) every process would otherwise compile what it imports again, and the
# tests start hundreds (servers, their build workers, CLIs).
UV := $(VENV)/bin/uv
UV_INSTALL := $(UV) pip install --python $(PY) --quiet --system-certs --compile-bytecode --constraint $(LOCK)
# The project's own bytecode, written before the tests for the same reason (sources change between runs).
COMPILE_SOURCES := $(PY) -m compileall -q grail_core kernels service tests
# The test suite's processes (pytest-xdist): a test module runs whole on one of them, with its server.
TEST_WORKERS ?= 2

.PHONY: help serve test test-gpu lint docs bench lock

help:
	@sed -n 's/^# make /  make /p' Makefile
	@echo "  the client, once installed: $(VENV)/bin/grail --help"

$(PY):
	$(PYTHON) -m venv $(VENV)

# One stamp per set of packages: serving needs none of the test or benchmark tools.
$(VENV)/.installed-serve: pyproject.toml $(LOCK) | $(PY)
	$(PIP_INSTALL) -e $(SERVE_REQUIREMENTS)
	touch $@

$(UV): $(LOCK) | $(PY)
	$(PIP_INSTALL) uv
	touch $@

$(VENV)/.installed-%: pyproject.toml $(LOCK) | $(UV)
	$(UV_INSTALL) -e ".[$*]"
	touch $@

serve: $(VENV)/.installed-serve
	@echo "grail: serving http://$(HOST):$(PORT) (data in $(DATA_DIR)); the client is $(VENV)/bin/grail --url http://$(HOST):$(PORT)"
	$(VENV)/bin/grail-serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# The CUDA-simulator suite (tests/kernels) is a process of its own (NUMBA_ENABLE_CUDASIM must be set before
# numba.cuda loads). It runs beside the main suite at low priority, from when a core is free in the main suite's
# warm-up, the build kernels that both use being in numba's cache (tests/conftest.py creates the file that
# GRAIL_TEST_WARMED names); its output is printed at the end, and either suite failing fails make test.
test: $(VENV)/.installed-test
	$(COMPILE_SOURCES)
	scratch=$$(mktemp -d); warmed=$$scratch/warmed; \
	{ until [ -e $$warmed ]; do kill -0 $$$$ 2>/dev/null || exit 1; sleep 1; done; \
	  NUMBA_ENABLE_CUDASIM=1 nice -n 10 $(PY) -m pytest -q -p no:cacheprovider -m "not gpu" tests/kernels; \
	} >$$scratch/simulator.log 2>&1 & simulator=$$!; \
	GRAIL_TEST_WARMED=$$warmed $(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadfile -m "not gpu" \
		--ignore=tests/kernels tests; main=$$?; \
	touch $$warmed; wait $$simulator; simulator=$$?; \
	echo "CUDA-simulator suite (tests/kernels), run beside:"; cat $$scratch/simulator.log; rm -rf $$scratch; \
	[ $$main = 0 ] && [ $$simulator = 0 ]

# On a machine with a CUDA GPU: the same suites, then the GPU-only tests on the real device. Each is its own
# process: numba.cuda runs either the simulator or the device, never both.
test-gpu: $(VENV)/.installed-test
	$(COMPILE_SOURCES)
	$(PY) -m pytest -q --durations=15 -m "not gpu" --ignore=tests/kernels tests
	NUMBA_ENABLE_CUDASIM=1 $(PY) -m pytest -q tests/kernels
	$(PY) -m pytest -q -m gpu tests/gpu

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# NO_MKDOCS_2_WARNING: mkdocs-material prints a notice about MkDocs 2.0 on every build otherwise.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --config-file docs/mkdocs/mkdocs.yml

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/bench_queries.py

# One universal resolution (every Python from 3.10 on, Linux, macOS and Windows markers kept) of the runtime,
# every extra and numba-cuda's cu12 toolkit wheels; pip reads it as constraints (`--constraint`).
lock: $(VENV)/.installed-dev
	printf 'numba-cuda[cu12]\n' | $(VENV)/bin/uv pip compile pyproject.toml - --all-extras --universal \
		--python-version 3.10 --native-tls --no-header --quiet --output-file $(LOCK).new
	{ echo "# The versions every install uses: make serve/test/lint/bench, the container build and CI."; \
	  echo "# pip reads this file as constraints: pip install --constraint $(LOCK) -e '.[test]'."; \
	  echo "# Made by 'make lock' ($$($(VENV)/bin/uv --version) pip compile, universal, Python 3.10 and newer); do not edit."; \
	  cat $(LOCK).new; } > $(LOCK)
	rm -f $(LOCK).new
