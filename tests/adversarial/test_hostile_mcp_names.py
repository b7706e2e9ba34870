"""Two MCP servers whose tools map to the same kernel name: the first in ``mcp_servers`` order keeps it.

``files-a`` and ``files_a`` both give ``mcp__files_a__echo``.  Each server is
a small FastMCP script written by the test; the one the test makes slow
blocks, before it answers anything, on reading a FIFO the test opens only
once the other server's tools are registered.  Whichever starts first, the
name ends with the first server of the config, and the other server's record
(``plugins list``) says which tool it lost and why (docs/mcp.md).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernel import Kernel

SERVER = """\
import sys

from mcp.server.fastmcp import FastMCP

label, gate = sys.argv[1], sys.argv[2]
if gate != "-":
    with open(gate, encoding="utf-8") as fifo:  # blocks until the test opens the FIFO for writing
        fifo.read()
server = FastMCP("race-" + label, log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    \"\"\"Echo the text, marked with the server that answered.\"\"\"
    return label + ":" + text


server.run("stdio")
"""

FIRST, SECOND = "files-a", "files_a"
SHARED = "mcp__files_a__echo"
WAIT = 60.0  # a safety net against a hang, never a wait for an event


class _Connected(logging.Handler):
    """Sets an event when the kernel logs that server ``name`` connected (its tools are registered then)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name_ = name
        self.event = threading.Event()
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.seen.append(text)
        if "mcp_server_connected" in text and f"server={self.name_!r}" in text:
            self.event.set()


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "race_server.py"
    path.write_text(SERVER, encoding="utf-8")
    return path


@pytest.fixture
def race(
    tmp_path: Path, script: Path, make_kernel: Callable[..., Kernel]
) -> Iterator[Callable[[str], Kernel]]:
    """``race(slow)``: a kernel whose server ``slow`` starts only after the other one is connected."""
    threads: list[threading.Thread] = []

    def run(slow: str) -> Kernel:
        gate = tmp_path / "gate"
        os.mkfifo(gate)
        servers = {
            name: {
                "command": sys.executable,
                "args": [str(script), name, str(gate) if name == slow else "-"],
                "connect_timeout": WAIT,
            }
            for name in (FIRST, SECOND)
        }
        k = make_kernel(config={"mcp_servers": servers}, load=False)
        fast = _Connected(SECOND if slow == FIRST else FIRST)
        k._logging.stdlib.addHandler(fast)
        k._logging.stdlib.setLevel(logging.INFO)  # the connection line is INFO; agent.log keeps its own level
        loader = threading.Thread(target=k.load, daemon=True)
        threads.append(loader)
        loader.start()
        assert fast.event.wait(WAIT), f"the fast server never connected: {fast.seen}"
        with open(gate, "w", encoding="utf-8") as fifo:  # lets the slow server start
            fifo.write("go")
        loader.join(WAIT)
        assert not loader.is_alive(), "load() did not return"
        return k

    yield run
    for thread in threads:
        thread.join(WAIT)


@pytest.mark.parametrize("slow", [FIRST, SECOND])
@pytest.mark.parametrize("round_", range(5))
def test_the_first_server_in_config_order_keeps_a_shared_name(
    race: Callable[[str], Kernel], slow: str, round_: int
) -> None:
    k = race(slow)
    first, second = k.plugin(f"mcp:{FIRST}"), k.plugin(f"mcp:{SECOND}")
    assert first.error is None and second.error is None, (first.error, second.error)
    tool = k.tools.get(SHARED)
    assert tool is not None and tool.plugin == f"mcp:{FIRST}", f"round {round_}: {tool and tool.plugin}"
    assert json.loads(k.tools.dispatch(SHARED, {"text": "hi"})) == {"result": f"{FIRST}:hi"}
    assert SHARED in first.tools and SHARED not in second.tools
    lost = [w for w in second.warnings if SHARED in w and FIRST in w]
    assert lost, second.warnings
    assert not [w for w in first.warnings if SHARED in w], first.warnings
