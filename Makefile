# Two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# What the tests use beyond Python: espeak-ng (speech), ngircd and openssl (the IRC adapter and
# its TLS test), from Debian's packages, and the reference MCP filesystem server, from the npm registry (pinned).
NODE_DIR := $(VENV)/node
MCP_FS   := $(NODE_DIR)/node_modules/@modelcontextprotocol/server-filesystem/package.json
MCP_FS_VERSION := 2026.8.31
APT_GET  := $(shell [ "$$(id -u)" = 0 ] || echo sudo) apt-get
# Published Hermes plugins for tests/compat (pinned in tests/compat/requirements.txt).
COMPAT_SITE := $(VENV)/compat-site
COMPAT_REQS := tests/compat/requirements.txt
# import-linter for the architecture's import contracts, kept out of the venv (see pyproject.toml).
LINT_SITE := $(VENV)/lint-site
LINT_REQS := tests/lint-requirements.txt

# Hermes Agent, the system we re-imagine, in a venv of its own (never the project's), for make bench-peers.
PEERS := .venv-peers
HERMES_AGENT_VERSION := 0.19.0

.PHONY: run test test-deps bench bench-peers lint clean

# Re-install when the project metadata changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hermes-kernel demo

test: $(STAMP) test-deps
	$(PY) -m pytest -q

test-deps: $(MCP_FS) $(COMPAT_SITE)/.installed $(LINT_SITE)/.installed
	@missing=""; \
	command -v espeak-ng >/dev/null 2>&1 || missing="$$missing espeak-ng"; \
	[ -x /usr/sbin/ngircd ] || command -v ngircd >/dev/null 2>&1 || missing="$$missing ngircd"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then \
		$(APT_GET) install -y --no-install-recommends $$missing \
		|| { $(APT_GET) update && $(APT_GET) install -y --no-install-recommends $$missing; }; \
	fi

$(MCP_FS): | $(STAMP)
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --silent \
		@modelcontextprotocol/server-filesystem@$(MCP_FS_VERSION)

$(COMPAT_SITE)/.installed: $(COMPAT_REQS) | $(STAMP)
	rm -rf $(COMPAT_SITE)
	$(PY) -m pip install --quiet --no-deps --target $(COMPAT_SITE) -r $(COMPAT_REQS)
	touch $@

$(LINT_SITE)/.installed: $(LINT_REQS) | $(STAMP)
	rm -rf $(LINT_SITE)
	$(PY) -m pip install --quiet --target $(LINT_SITE) -r $(LINT_REQS)
	touch $@

# With Hermes Agent installed (make bench-peers does it), make bench measures it side by side too.
bench: $(STAMP)
	$(PY) tests/benchmarks/bench_kernel.py $(if $(wildcard $(PEERS)/.installed),--peer-python $(PEERS)/bin/python)

$(PEERS)/.installed:
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet 'hermes-agent==$(HERMES_AGENT_VERSION)'
	touch $@

bench-peers: $(STAMP) $(PEERS)/.installed
	$(PY) tests/benchmarks/bench_kernel.py --peer-python $(PEERS)/bin/python

lint: $(STAMP)
	$(VENV)/bin/ruff check kernel extensions tests

clean:
	rm -rf $(VENV) $(PEERS) build dist .pytest_cache
