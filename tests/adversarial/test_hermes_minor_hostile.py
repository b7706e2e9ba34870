"""Hostile cases of issue 28's minor differences: downloads that are empty, endless or lie about their
size; image providers that raise while being made or replace another and then fail; memory commands
and tool results that are not what they claim.  Each holds its bound and crashes nothing.

The download servers are real sockets on 127.0.0.1 written here, since they must misbehave in ways a
well-mannered HTTP server cannot (an endless body, a Content-Length it never sends).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import run_cli, run_json

from kernel import Kernel
from kernel.providers import ProviderProfile
from kernel.providers.calls import send_tool_parts
from kernel.providers.image_gen import save_url_image

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n"


@dataclass
class RawServer:
    """One connection answered by ``answer(conn)``; ``sent`` counts the body bytes it got out."""

    answer: Callable[[socket.socket, RawServer], None]
    sent: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/image.png"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        try:
            conn.recv(65536)  # the request
            self.answer(conn, self)
        except OSError:  # the client hung up: what an endless body waits for
            pass
        finally:
            conn.close()
            self.done.set()

    def close(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket, RawServer], None]], RawServer]]:
    made: list[RawServer] = []

    def make(answer: Callable[[socket.socket, RawServer], None]) -> RawServer:
        made.append(RawServer(answer))
        return made[-1]

    yield make
    for server in made:
        server.close()


def endless(conn: socket.socket, server: RawServer) -> None:
    conn.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"\x89PNG" + b"\x00" * 65532
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    while True:
        conn.sendall(framed)
        server.sent += len(chunk)


def lying_length(conn: socket.socket, server: RawServer) -> None:
    conn.sendall(HEAD + b"Content-Length: 1000000000000\r\n\r\n\x89PNG")
    server.release.wait(60)  # never sends the rest; holds the connection until the test ends


def empty_chunked(conn: socket.socket, server: RawServer) -> None:
    conn.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")


def cached(home: Path) -> list[Path]:
    folder = home / "cache" / "images"
    return list(folder.iterdir()) if folder.is_dir() else []


def test_an_endless_body_is_cut_at_max_bytes(raw_server: Callable[..., RawServer], home: Path) -> None:
    server = raw_server(endless)
    with pytest.raises(ValueError, match="larger than 200000 bytes"):
        save_url_image(server.url, home, max_bytes=200_000, timeout=30)
    assert server.done.wait(30), "the server still streams: the client did not hang up"
    assert server.sent < 64 * 1024 * 1024  # what the socket buffers held, not the endless rest
    assert cached(home) == []


def test_a_body_announced_too_big_is_refused_before_it_is_read(
    raw_server: Callable[..., RawServer], home: Path
) -> None:
    """The server never sends the promised terabyte: only the header can have refused it (reading the
    body would wait for the timeout, an httpx error rather than the size refusal)."""
    server = raw_server(lying_length)
    with pytest.raises(ValueError, match="1000000000000 bytes, more than the 1000 byte limit"):
        save_url_image(server.url, home, max_bytes=1000, timeout=30)
    assert cached(home) == []


def test_an_empty_chunked_body_is_refused(raw_server: Callable[..., RawServer], home: Path) -> None:
    server = raw_server(empty_chunked)
    with pytest.raises(ValueError, match="empty"):
        save_url_image(server.url, home)
    assert cached(home) == []


@pytest.mark.parametrize("bound", [0, -1, True, 1.5, "25MB"])
def test_a_max_bytes_that_is_not_a_positive_count_is_refused(bound: object, home: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        save_url_image("http://127.0.0.1:9/never-asked.png", home, max_bytes=bound)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Image providers that raise, or replace another and then fail
# --------------------------------------------------------------------------


SOLID = """
from agent.image_gen_provider import ImageGenProvider, success_response


class Solid(ImageGenProvider):
    def __init__(self, tag, name="solid"):
        self.tag, self._name = tag, name

    @property
    def name(self):
        return self._name

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        return success_response(image="/made/by/" + self.tag, model="m", prompt=prompt,
                                aspect_ratio=aspect_ratio, provider=self.name)
"""

RAISES_IN_INIT = """
from agent.image_gen_provider import ImageGenProvider


class Broken(ImageGenProvider):
    def __init__(self):
        raise RuntimeError("no GPU in this plugin's dreams")

    name = "broken"

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        return {}


def register(ctx):
    ctx.register_image_gen_provider(Broken())
"""

AVAILABILITY_RAISES = (
    SOLID
    + """

class Flaky(Solid):
    def is_available(self):
        raise RuntimeError("is_available exploded")


def register(ctx):
    ctx.register_image_gen_provider(Flaky("flaky", "flaky"))
"""
)


def made_by(k: Kernel) -> str:
    result = run_json(k.tools.dispatch("generate_image", {"prompt": "p"}))
    assert result["success"] is True, result
    return str(result["image"]).rsplit("/", 1)[-1]


def test_a_provider_raising_in_init_fails_its_plugin_and_the_fallback_still_serves(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("broken-images", RAISES_IN_INIT)
    plugin_dir("flaky-images", AVAILABILITY_RAISES)
    plugin_dir(
        "solid-images", SOLID + "\n\ndef register(ctx):\n    ctx.register_image_gen_provider(Solid('ok'))\n"
    )
    k = make_kernel({"image_gen": {"provider": "broken"}})
    error = k.plugin("broken-images").error or ""
    assert "no GPU" in error, error
    # The configured one never came; the flaky one is not available; the only available one answers.
    assert made_by(k) == "ok"
    assert any("'broken'" in p and "'solid'" in p for p in k.problems), k.problems


REPLACES_THEN_FAILS = (
    SOLID
    + """

def register(ctx):
    ctx.register_image_gen_provider(Solid("usurper"))
    raise RuntimeError("changed my mind")
"""
)


def test_a_plugin_that_replaces_a_provider_and_then_fails_gives_it_back(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir(
        "aa-images", SOLID + "\n\ndef register(ctx):\n    ctx.register_image_gen_provider(Solid('first'))\n"
    )
    plugin_dir("zz-images", REPLACES_THEN_FAILS)
    k = make_kernel({"image_gen": {"provider": "solid"}})
    assert "changed my mind" in (k.plugin("zz-images").error or "")
    assert k.slots.get("image_gen", "solid").plugin == "aa-images"
    assert made_by(k) == "first"


# --------------------------------------------------------------------------
# A memory command whose handler misbehaves
# --------------------------------------------------------------------------


MEMORY = """
from agent.memory_provider import MemoryProvider


class Notes(MemoryProvider):
    name = "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


def register(ctx):
    ctx.register_memory_provider(Notes())
"""


@pytest.mark.parametrize(
    ("cli", "code", "shown"),
    [
        (
            "def notes_command(args):\n    raise RuntimeError('the notes are on fire')\n",
            1,
            "the notes are on fire",
        ),
        ("notes_command = 'not a function'\n", 2, "no handler"),
    ],
)
def test_a_memory_command_handler_that_raises_or_is_not_callable(
    plugin_dir: Callable[..., Path], home: Path, cli: str, code: int, shown: str
) -> None:
    plugin_dir("notes", MEMORY, files={"cli.py": cli + "\n\ndef register_cli(subparser):\n    pass\n"})
    (home / "config.yaml").write_text("memory:\n  provider: notes\n", encoding="utf-8")
    proc = run_cli(home, "notes")
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert shown in proc.stderr and "notes" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------
# Tool messages that only look multimodal
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        '{"_multimodal": true, "content": [',  # cut short
        '{"_multimodal": true, "content": ["a string part"]}',
        '{"_multimodal": 1, "content": [{"type": "text", "text": "x"}]}',
        '{"_multimodal": true, "content": "not a list"}',
        '{"_multimodal": true, "content": [{"type": "text", "text": "x"}]} trailing',
    ],
)
def test_a_tool_text_that_only_looks_like_an_envelope_is_sent_as_it_is(content: str) -> None:
    messages = [{"role": "tool", "tool_call_id": "c", "content": content}]
    send_tool_parts(messages)
    assert messages == [{"role": "tool", "tool_call_id": "c", "content": content}]


def test_an_envelope_is_only_unpacked_in_a_tool_message() -> None:
    envelope = '{"_multimodal": true, "content": [{"type": "text", "text": "x"}]}'
    messages = [{"role": "user", "content": envelope}, {"role": "assistant", "content": envelope}]
    send_tool_parts(messages)
    assert [m["content"] for m in messages] == [envelope, envelope]


def test_an_image_only_result_for_a_text_only_provider_is_a_placeholder() -> None:
    assert (
        ProviderProfile(name="t", supports_vision_tool_messages=False).supports_vision_tool_messages is False
    )
    envelope = '{"_multimodal": true, "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}'
    messages = [{"role": "tool", "tool_call_id": "c", "content": envelope}]
    send_tool_parts(messages, images=False)
    assert messages[0]["content"] == "[multimodal tool result]"
