"""Peers that send what no well-behaved peer sends: here, an IRC server (our own asyncio server on
127.0.0.1) that floods a 70 KB line during registration.

The bundled IRC adapter must neither raise out of ``connect()`` nor lose the
connection for it: the overlong line is skipped and registration goes on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kernel.gateway.config import PlatformConfig


@pytest.mark.parametrize("flood", [70_000, 300_000])
def test_an_overlong_line_during_registration_is_skipped(irc_spec: Any, flood: int, tmp_path: Path) -> None:
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not (b"NICK" in b"".join(seen) and b"USER" in b"".join(seen)):
            line = await reader.readline()
            if not line:
                return
            seen.append(line)
        writer.write(b":evil NOTICE * :" + b"x" * flood + b"\r\n")
        writer.write(b":evil 001 hermesbot :Welcome hermesbot!bot@127.0.0.1\r\n")
        await writer.drain()
        with_timeout = asyncio.wait_for(reader.read(), 10)
        await with_timeout

    async def scenario() -> tuple[Any, Any, Any]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        config = {"enabled": True, "server": "127.0.0.1", "port": port, "nick": "hermesbot", "channels": []}
        bot = irc_spec.adapter_factory(PlatformConfig.from_dict(config))
        try:
            connected = await bot.connect()
            return connected, bot.is_connected, bot.last_error
        finally:
            await bot.disconnect()
            server.close()
            await server.wait_closed()

    connected, is_connected, error = asyncio.run(scenario())
    assert connected is True, error
    assert is_connected is True
    # The bundled adapter's records reach the kernel's log (they used to end at a NullHandler).
    log = (tmp_path / "hermes" / "logs" / "agent.log").read_text(encoding="utf-8")
    assert f"sent a line of {flood + 18:,} bytes" in log and "it was dropped" in log
