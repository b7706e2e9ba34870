# Two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test bench lint clean

# Re-install when the project metadata changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hermes-kernel demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) tests/benchmarks/bench_kernel.py

lint: $(STAMP)
	$(VENV)/bin/ruff check kernel extensions tests

clean:
	rm -rf $(VENV) build dist .pytest_cache
