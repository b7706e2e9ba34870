# Two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# What the tests use beyond Python, all inside .venv: the reference MCP filesystem server, from the npm
# registry (pinned), and espeak-ng (speech), ngircd (the IRC adapter) and redis-server (the gateway's
# store), from Debian's packages.
NODE_DIR := $(VENV)/node
MCP_FS   := $(NODE_DIR)/node_modules/@modelcontextprotocol/server-filesystem/package.json
MCP_FS_VERSION := 2026.8.31
# The Debian packages, with the libraries only they use: fetched with `apt-get download` (copied from apt's
# own cache when it has the same file) and unpacked with `dpkg -x` into .venv/debs. No root, nothing
# installed system-wide, no maintainer script run, no service enabled or started. Anything else they need
# that this machine lacks (what `apt-get --simulate install` would add) is unpacked there too.
# .venv/debs/bin has wrappers that run DEBS_BINS with the libraries and data unpacked beside them.
# redis-server needs redis-tools: Debian's usr/bin/redis-server (redis-server's package) is a symlink to
# redis-check-rdb (redis-tools'), one binary that picks its mode from the name it is run by, so the wrapper
# runs the symlink (by the name redis-server), never redis-check-rdb by its own name.
DEBS_DIR   := $(VENV)/debs
DEBS       := espeak-ng libespeak-ng1 espeak-ng-data libpcaudio0 libsonic0 ngircd libident
DEBS       += redis-server redis-tools libjemalloc2 liblzf1
DEBS_BINS  := usr/bin/espeak-ng usr/sbin/ngircd usr/bin/redis-server
DEBS_STAMP := $(DEBS_DIR)/.installed
APT_ARCHIVES := /var/cache/apt/archives
# Published Hermes plugins for tests/compat (pinned in tests/compat/requirements.txt).
COMPAT_SITE := $(VENV)/compat-site
COMPAT_REQS := tests/compat/requirements.txt
# import-linter for the architecture's import contracts, kept out of the venv (see pyproject.toml).
LINT_SITE := $(VENV)/lint-site
LINT_REQS := tests/lint-requirements.txt

# Hermes Agent, the system we re-imagine, in a venv of its own (never the project's), for make bench-peers.
PEERS := .venv-peers
HERMES_AGENT_VERSION := 0.19.0

.PHONY: run test test-deps bench bench-quick bench-peers bench-gateway hermes-surface lint clean

# pip's download cache stays in the project's folder too.
export PIP_CACHE_DIR := $(abspath $(VENV))/pip-cache

# Re-install when the project metadata changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hermes-kernel demo

# The suite on TEST_WORKERS processes (two per core: most tests wait on a subprocess or a server), each
# taking the next test when it is free. The project's modules are compiled first: the tests start
# hundreds of interpreters, and where PYTHONDONTWRITEBYTECODE is set each would compile them again.
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 2 )))

test: $(STAMP) test-deps docs
	$(PY) -m compileall -q kernel extensions tests
	$(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

# The documentation site (mkdocs.yml) into site/, strictly: a broken link or anchor, a page left out of the nav
# or a docstring mkdocstrings cannot render fails the build (not --quiet: it would hide the warnings that
# fail it). It needs no network: no web fonts, no CDN.
.PHONY: docs
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

test-deps: $(MCP_FS) $(COMPAT_SITE)/.installed $(LINT_SITE)/.installed $(DEBS_STAMP)

# Fetched again when DEBS changes (the stamp holds the list it was made from).
ifneq ($(strip $(DEBS)),$(strip $(shell cat $(DEBS_STAMP) 2>/dev/null)))
.PHONY: $(DEBS_STAMP)
endif

# Built in $(DEBS_DIR).new, which replaces $(DEBS_DIR) once every program runs. Without apt's package
# lists (a fresh container), Debian's are read into a folder of the build, not /var/lib/apt/lists.
$(DEBS_STAMP):
	rm -rf $(DEBS_DIR).new
	mkdir -p $(DEBS_DIR).new/archives $(DEBS_DIR).new/bin
	set -e; cd $(DEBS_DIR).new/archives; \
	opts="-q -o APT::Sandbox::User=$$(id -un)"; \
	if ! apt-get $$opts download --print-uris $(DEBS) >/dev/null 2>&1; then \
		echo "apt has no lists of Debian's packages: reading them into $(DEBS_DIR).new/apt"; \
		mkdir -p ../apt/lists/partial ../apt/cache/archives/partial; \
		opts="$$opts -o Dir::State::Lists=$$PWD/../apt/lists -o Dir::Cache=$$PWD/../apt/cache"; \
		apt-get $$opts update; \
	fi; \
	if plan=$$(apt-get $$opts --simulate --no-install-recommends install $(DEBS) 2>&1); then \
		extra=$$(echo "$$plan" | awk '$$1 == "Inst" {print $$2}' | grep -vxF "$$(printf '%s\n' $(DEBS))" || true); \
	else \
		echo "apt-get --simulate cannot say what else they need here; unpacking $(DEBS) alone:"; \
		echo "$$plan" | tail -n 3; extra=; \
	fi; \
	[ -z "$$extra" ] || echo "also unpacked, missing on this machine:" $$extra; \
	apt-get $$opts download --print-uris $(DEBS) $$extra | tr -d "'" | while read -r uri file size sum; do \
		cached=$(APT_ARCHIVES)/$$file; \
		if [ -f "$$cached" ] && [ "$$(sha256sum < "$$cached" | cut -d' ' -f1)" = "$${sum#SHA256:}" ]; then \
			cp "$$cached" .; \
		else \
			echo "$${file%%_*}"; \
		fi; \
	done > ../to-download; \
	[ ! -s ../to-download ] || apt-get $$opts download $$(cat ../to-download); \
	for deb in *.deb; do dpkg -x "$$deb" ..; done
	set -e; cd $(DEBS_DIR).new; \
	libs=$$(find . -name '*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u | sed 's|^\.|$$debs|' | paste -sd:); \
	data=$$(find . -path '*/espeak-ng-data/phontab' -printf '%h\n' | sed 's|^\.|$$debs|; s|/[^/]*$$||' | head -n1); \
	for bin in $(DEBS_BINS); do \
		wrapper=bin/$${bin##*/}; \
		{ echo '#!/bin/sh'; \
		  echo "# Written by make test-deps: runs $$bin, unpacked here, with the libraries and data beside it."; \
		  echo 'debs=$$(cd "$$(dirname "$$0")/.." && pwd)'; \
		  echo "export LD_LIBRARY_PATH=$$libs\$${LD_LIBRARY_PATH:+:\$$LD_LIBRARY_PATH}"; \
		  echo "export ESPEAK_DATA_PATH=$$data"; \
		  echo "exec \"\$$debs/$$bin\" \"\$$@\""; } > $$wrapper; \
		chmod +x $$wrapper; \
		err=$$($$wrapper --version 2>&1 >/dev/null) && [ -z "$$err" ] \
			|| { echo "$$wrapper --version failed: $$err"; exit 1; }; \
	done; \
	rm -rf archives apt to-download; \
	echo "$(DEBS)" > .installed
	rm -rf $(DEBS_DIR)
	mv $(DEBS_DIR).new $(DEBS_DIR)
	@echo "unpacked into $(DEBS_DIR) ($$(du -sh $(DEBS_DIR) | cut -f1)): $(DEBS)"

$(MCP_FS): | $(STAMP)
	npm install --prefix $(NODE_DIR) --cache $(VENV)/npm-cache --no-audit --no-fund --silent \
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
# Then the framework integrations: a HostSession turn against the same hooks by hand, a pydantic-ai run with
# HermesCapability against plain pydantic-ai tools, an MCP tools/call through hermes-kernel mcp serve against
# a plain MCP server.
bench: $(STAMP)
	$(PY) tests/benchmarks/bench_kernel.py $(if $(wildcard $(PEERS)/.installed),--peer-python $(PEERS)/bin/python)
	$(PY) tests/benchmarks/bench_host_session.py
	$(PY) tests/benchmarks/bench_integrations.py
	$(PY) tests/benchmarks/bench_mcp_server.py

# A one-minute subset: dispatch, load and start-up with few repeats and small plugin counts (Hermes Agent
# side by side when make bench-peers has installed it).
bench-quick: $(STAMP)
	$(PY) tests/benchmarks/bench_kernel.py --quick $(if $(wildcard $(PEERS)/.installed),--peer-python $(PEERS)/bin/python)

$(PEERS)/.installed:
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet 'hermes-agent==$(HERMES_AGENT_VERSION)'
	touch $@

bench-peers: $(STAMP) $(PEERS)/.installed
	$(PY) tests/benchmarks/bench_kernel.py --peer-python $(PEERS)/bin/python

# Hermes Agent 0.19's module surface, from the peers venv, into tests/compat/hermes-0.19-surface.json (read by
# tests/compat/test_hermes_surface.py; the suite never needs Hermes itself).
hermes-surface: $(PEERS)/.installed
	$(PEERS)/bin/python scripts/hermes_surface.py --output tests/compat/hermes-0.19-surface.json

# The scaled-out gateway under load (tests/benchmarks/bench_gateway.py), driven over the bundled HTTP
# platform by lean HTTP clients: one ingress and 1, 2, 4, 8, 16 workers (separate processes) with a
# real redis-server from .venv/debs at 200 ms turns (scaling), 4 workers at 1 ms turns (capacity, with
# CPU and Redis commands per message), the broker's overhead at light load, and a profiled capacity run
# (round trips by MONITOR, cProfile in every process); then the chaos test's traffic calm and with its
# faults (tests/benchmarks/bench_chaos.py).  A few minutes; `--quick` is a quick check.
bench-gateway: $(STAMP) $(DEBS_STAMP)
	$(PY) tests/benchmarks/bench_gateway.py --profile
	$(PY) tests/benchmarks/bench_chaos.py

lint: $(STAMP)
	$(VENV)/bin/ruff check kernel extensions tests

clean:
	rm -rf $(VENV) $(PEERS) build dist .pytest_cache site
