"""An embedding host's logging is left as the host set it (docs/logging.md, "Embedding hosts").

The Python logging guidance for libraries: a ``NullHandler`` on the library's
top logger and nothing else; no level, ``propagate`` or handler changes on
loggers the library does not own; records that any handler can render.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel import Kernel

FAILING = "def register(ctx):\n    raise RuntimeError('boom at https://user:sk-url-secret@api.example/v1')\n"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def root_handler() -> Iterator[Collect]:
    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def test_the_host_configuration_of_the_plugin_logger_survives_a_kernel(home: Path) -> None:
    host = logging.getLogger("hermes_plugins")
    mine = Collect()
    host.setLevel(logging.INFO)
    host.addHandler(mine)
    try:
        for _ in range(3):
            with Kernel(home=home) as k:
                k.load()
        assert logging.getLogger("hermes_plugins") is host, "the host's logger object was dropped"
        assert host.level == logging.INFO
        assert host.handlers == [mine]
        assert host.propagate is True
    finally:
        host.removeHandler(mine)
        host.setLevel(logging.NOTSET)


def test_the_kernel_top_logger_keeps_propagating(home: Path) -> None:
    top = logging.getLogger("hermes_kernel")
    with Kernel(home=home) as k:
        k.load()
        assert top.propagate is True
        assert all(isinstance(h, logging.NullHandler) for h in top.handlers)


def test_kernel_records_reach_the_hosts_root_handler_readable_and_masked(
    home: Path, plugin_dir, root_handler: Collect
) -> None:
    plugin_dir("breaks", FAILING)
    with Kernel(home=home) as k:
        k.load()
    failures = [r for r in root_handler.records if r.name.startswith("hermes_kernel.k")]
    messages = [r.getMessage() for r in failures]
    assert any(m.startswith("plugin_load_failed ") and "plugin='breaks'" in m for m in messages), messages
    assert all("sk-url-secret" not in m for m in messages), "a URL's key reached the host's handler"


def test_a_host_root_at_debug_does_not_fill_agent_log(home: Path, plugin_dir, root_handler: Collect) -> None:
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.DEBUG)
    try:
        plugin_dir("breaks", FAILING)
        with Kernel(home=home) as k:
            k.load()
    finally:
        root.setLevel(before)
    kernel_records = [r for r in root_handler.records if r.name.startswith("hermes_kernel.k")]
    assert any(r.levelno == logging.DEBUG for r in kernel_records)
    text = (home / "logs" / "agent.log").read_text(encoding="utf-8")
    assert "plugin_load_failed" in text
    assert "[debug" not in text, "agent.log takes WARNING and up whatever level the host chose"


def test_audit_lines_stay_in_agent_log(home: Path, root_handler: Collect) -> None:
    with Kernel(home=home) as k:
        k._logging.audit.info("plugin_llm_call", plugin="p", provider="x")
    assert "plugin_llm_call" in (home / "logs" / "agent.log").read_text(encoding="utf-8")
    assert not [r for r in root_handler.records if r.name.endswith(".audit")]


def test_the_first_record_of_a_kernel_that_never_loaded_is_masked_in_agent_log(home: Path) -> None:
    """A kernel's logging is made with its first record (see docs/logging.md); that first record, with a
    secret-named field and a credential in a URL, reaches agent.log masked like any other."""
    k = Kernel(home)
    try:
        k.log.warning("first_record", api_key="sk-live-123456", url="https://user:hunter2@example.test/x")
    finally:
        k.shutdown()
    text = (home / "logs" / "agent.log").read_text(encoding="utf-8")
    assert "first_record" in text
    assert "sk-live-123456" not in text and "hunter2" not in text
    assert "***" in text
