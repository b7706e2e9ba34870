"""Hostile clients of the bundled HTTP platform, against a real ``hermes-kernel gateway run``.

One gateway (scripted model, a bearer token, a 1-second read timeout) serves the module; raw sockets
send what httpx would refuse to.  Every attack must be answered with a JSON error (or the connection
dropped), reach no model turn, and leave the endpoint answering honest messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import CLI, cli_env, run_cli
from test_http_platform import LISTENING

from kernel.testing import write_script

TOKEN = "tok-3f9a-very-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READ_TIMEOUT = 1.0
DEADLINE = 60.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    home = tmp_path_factory.mktemp("http-gateway")
    script = write_script(home, ["fine"] * 100)
    http = {"enabled": True, "port": 0, "token": TOKEN, "read_timeout": READ_TIMEOUT, "max_headers": 32}
    config = {
        "model": {"provider": "scripted", "script": str(script)},
        "gateway": {"platforms": {"http": http}},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    out = home / "gateway.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*CLI, "gateway", "run"], env=cli_env(home), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        give_up = time.monotonic() + DEADLINE
        while not LISTENING.search(out.read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < give_up, out.read_text(errors="replace")
            time.sleep(0.05)
        yield LISTENING.search(out.read_text())[1], proc, out  # type: ignore[index]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    output = out.read_text(errors="replace")
    assert "Traceback" not in output and TOKEN not in output, output
    for log in home.rglob("*.log"):
        assert TOKEN not in log.read_text(errors="replace"), log


def raw(url: str, data: bytes, *, wait: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection; everything the server answers until it closes (or ``wait``)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(data)
        got = b""
        with contextlib.suppress(ConnectionError, TimeoutError):  # a reset or a silence ends it
            while chunk := sock.recv(65536):
                got += chunk
        return got


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def json_of(answer: bytes) -> Any:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def post(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    headers = {**AUTH, "Content-Type": "application/json", **kwargs.pop("headers", {})}
    return httpx.post(f"{url}/v1/messages", content=content, headers=headers, timeout=DEADLINE, **kwargs)


def replies(url: str, chat: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/v1/chats/{chat}/replies", headers=AUTH, timeout=DEADLINE)
    assert answer.status_code == 200
    return answer.json()["replies"]


def still_answers(url: str, chat: str = "honest") -> None:
    answer = post(url, {"chat_id": chat, "text": "are you there?"}, params={"wait": 30})
    assert answer.status_code == 200 and answer.json()["reply"] == "fine", answer.text


def test_a_wrong_or_missing_token_is_refused_and_nothing_is_answered(served: Any) -> None:
    url, _proc, _out = served
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        answer = httpx.post(
            f"{url}/v1/messages",
            json={"chat_id": "intruder", "text": "hi"},
            headers=headers,
            timeout=DEADLINE,
        )
        assert answer.status_code == 401 and "token" in answer.json()["error"]
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert httpx.get(f"{url}/v1/chats/intruder/replies", headers=headers).status_code == 401
    assert replies(url, "intruder") == []
    still_answers(url)


def test_an_oversized_body_is_refused_by_its_length_without_reading_it(served: Any) -> None:
    url, _proc, _out = served
    head = (
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {1024 * 1024 + 1}\r\n\r\n"
    )
    answer = raw(url, head.encode())  # no body sent: the answer comes from the header alone
    assert status_of(answer) == 413 and "1048576" in json_of(answer)["error"]
    # The bound counts bytes of UTF-8: 0.9 MB of 2-byte characters fits, its \\u escapes do not.
    text = "é" * 450_000
    assert post(url, {"chat_id": "big", "text": text}).status_code == 202
    escaped = json.dumps({"chat_id": "big2", "text": text}, ensure_ascii=True).encode()
    assert post(url, escaped).status_code == 413
    assert replies(url, "big2") == []
    still_answers(url)


@pytest.mark.parametrize(
    ("body", "word"),
    [
        (b'{"chat_id": "bad", "text": ', "JSON"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"[" * 200_000 + b"]" * 200_000, "nested"),
        (b'["chat_id", "text"]', "object"),
        (b'{"chat_id": 7, "text": "x"}', "chat_id"),
        (b'{"chat_id": "bad", "text": ["x"]}', "text"),
        (b'{"chat_id": "bad", "text": "x", "message_id": true}', "message_id"),
        (b'{"chat_id": "bad", "text": "x", "user": {}}', "user"),
        (b'{"chat_id": "bad", "text": "   "}', "empty"),
        (b'{"chat_id": "bad"}', "missing"),
        (b'{"chat_id": "bad", "text": "x", "admin": true}', "admin"),
        (b'{"chat_id": "bad", "text": "a\\ud800b"}', "surrogate"),
        (b'{"chat_id": "bad", "text": "\\udfff"}', "surrogate"),
        (b'{"chat_id": "bad", "text": "nul\\u0000here"}', "control"),
        (b'{"chat_id": "bad\\u0000x", "text": "x"}', "control"),
        (b'{"chat_id": "bad\\nx", "text": "x"}', "control"),
        (b'{"chat_id": "bad\\ud83d", "text": "x"}', "surrogate"),
        (b'{"chat_id": "' + b"c" * 300 + b'", "text": "x"}', "bytes"),
    ],
)
def test_a_malformed_message_gets_a_json_error_and_no_turn(served: Any, body: bytes, word: str) -> None:
    url, _proc, _out = served
    answer = post(url, body)
    assert answer.status_code == 400, answer.text
    assert word.lower() in answer.json()["error"].lower()
    assert "Traceback" not in answer.text
    assert replies(url, "bad") == []


def test_bad_query_values_are_refused(served: Any) -> None:
    url, _proc, _out = served
    for wait in ("1e9", "nan", "-1", "121", "soon"):
        answer = post(url, {"chat_id": "q", "text": "x"}, params={"wait": wait})
        assert answer.status_code == 400 and "wait" in answer.json()["error"]
    answer = httpx.get(f"{url}/v1/chats/q/replies", params={"after": "-3"}, headers=AUTH)
    assert answer.status_code == 400
    assert replies(url, "q") == []


def test_too_many_or_too_large_headers_are_refused(served: Any) -> None:
    url, _proc, _out = served
    many = "".join(f"X-H{i}: v\r\n" for i in range(40))
    answer = raw(url, f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())
    assert status_of(answer) == 431 and "headers" in json_of(answer)["error"]
    huge = "X-Big: " + "a" * 20_000 + "\r\n"
    answer = raw(url, f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{huge}\r\n".encode())
    assert status_of(answer) == 431
    for request in (b"BLAH\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n", b"GET /v1/health HTTP/1.1\r\n bad\r\n\r\n"):
        assert status_of(raw(url, request)) in (400, 505)
    chunked = (
        f"POST /v1/messages HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    assert status_of(raw(url, chunked.encode())) == 501
    still_answers(url)


def test_a_slow_client_is_dropped_at_the_read_timeout_and_others_are_served(served: Any) -> None:
    url, _proc, _out = served
    host, port = url.removeprefix("http://").split(":")

    async def slowloris() -> tuple[bytes, float]:
        reader, writer = await asyncio.open_connection(host, int(port))
        started = time.monotonic()
        writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n")
        got = b""
        try:
            for i in range(50):  # one header line every 0.2 s: 10 s in all, were it let through
                writer.write(f"X-Drip-{i}: y\r\n".encode())
                await writer.drain()
                try:
                    got = await asyncio.wait_for(reader.read(4096), 0.2)
                except TimeoutError:
                    continue
                break
        except ConnectionError:
            pass
        finally:
            writer.close()
        return got, time.monotonic() - started

    async def scenario() -> tuple[bytes, float]:
        drip = asyncio.create_task(slowloris())
        await asyncio.to_thread(still_answers, url, "beside-the-slow-one")
        return await drip

    got, took = asyncio.run(scenario())
    assert status_of(got) == 408, got
    assert took < READ_TIMEOUT + 3, took


def test_unknown_paths_and_methods_get_json_errors(served: Any) -> None:
    url, _proc, _out = served
    answer = httpx.get(f"{url}/v1/nothing", headers=AUTH)
    assert answer.status_code == 404 and "error" in answer.json()
    answer = httpx.get(f"{url}/v1/messages", headers=AUTH)
    assert answer.status_code == 405 and answer.headers["Allow"] == "POST"
    answer = httpx.get(f"{url}/v1/chats/%FF/replies", headers=AUTH)
    assert answer.status_code == 400


def write_home(root: Path, http: dict[str, Any]) -> Path:
    root.mkdir()
    config = {"gateway": {"platforms": {"http": {"enabled": True, **http}}}}
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "http",
    [
        {"host": "0.0.0.0"},
        {"host": "0.0.0.0", "allow_remote": True},
        {"host": "::", "token": "t"},
        {"host": "example.org", "allow_remote": True},
    ],
)
def test_a_non_loopback_address_is_refused_without_allow_remote_and_a_token(
    tmp_path: Path, http: Any
) -> None:
    home = write_home(tmp_path / "home", http)
    status = run_cli(home, "gateway", "status", "--json")
    row = next(r for r in json.loads(status.stdout)["platforms"] if r["name"] == "http")
    assert row["enabled"] is False
    for words in ("config.yaml", "platforms/http", "allow_remote", "token", "loopback"):
        assert words in row["reason"]
    proc = run_cli(home, "gateway", "run")
    assert proc.returncode == 1 and "listening" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_remote_address_with_allow_remote_and_a_token_from_the_environment_is_accepted(
    tmp_path: Path,
) -> None:
    home = write_home(tmp_path / "home", {"host": "0.0.0.0", "allow_remote": True})
    status = run_cli(home, "gateway", "status", "--json", HTTP_PLATFORM_TOKEN="from-env")
    row = next(r for r in json.loads(status.stdout)["platforms"] if r["name"] == "http")
    assert row["enabled"] is True, row
    assert "from-env" not in status.stdout


def test_a_typo_or_a_bad_value_names_the_key(tmp_path: Path) -> None:
    for http, words in (
        ({"prot": 8080}, ("'prot'", "did you mean 'port'")),
        ({"port": 70000}, ("'port'", "65535")),
        ({"read_timeout": "soon"}, ("'read_timeout'", "number")),
        ({"max_body_bytes": True}, ("'max_body_bytes'", "whole number")),
    ):
        home = write_home(tmp_path / f"home{len(list(tmp_path.iterdir()))}", http)
        status = run_cli(home, "gateway", "status", "--json")
        row = next(r for r in json.loads(status.stdout)["platforms"] if r["name"] == "http")
        assert row["enabled"] is False and all(w in row["reason"] for w in words), row["reason"]
