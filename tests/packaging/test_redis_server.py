"""The tests' redis-server (``tests/redis_server.py``): Debian's, unpacked by ``make test-deps``, run on
127.0.0.1 and a random port, its data kept across a restart and a kill (append-only file)."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

import pytest
import redis
import redis_server as module
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis_server import REDIS_SERVER, RedisServer, free_port

NO_RETRY = Retry(NoBackoff(), 0)  # a refusal is an answer: redis-py would otherwise retry it for seconds


def test_the_wrapper_exists_and_prints_the_version() -> None:
    assert REDIS_SERVER.is_file(), f"{REDIS_SERVER} is missing: run `make test-deps`"
    proc = subprocess.run(
        [str(REDIS_SERVER), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Redis server v=7."), proc.stdout
    assert proc.stderr == ""


def test_the_server_listens_on_127_0_0_1_on_a_random_port(redis_server: RedisServer) -> None:
    client = redis_server.client()
    assert client.ping() is True
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert client.info("server")["tcp_port"] == redis_server.port
    assert client.config_get("bind") == {"bind": "127.0.0.1"}
    assert client.config_get("protected-mode") == {"protected-mode": "yes"}
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    assert client.config_get("appendfsync") == {"appendfsync": "always"}
    assert client.config_get("save") == {"save": ""}
    assert Path(client.config_get("dir")["dir"]) == redis_server.directory.resolve()
    client.set("greeting", "hello")
    assert redis.Redis.from_url(redis_server.url, decode_responses=True).get("greeting") == "hello"
    client.close()


def test_two_servers_get_two_ports(tmp_path: Path, redis_server: RedisServer) -> None:
    with RedisServer(tmp_path / "other") as other:
        assert other.port != redis_server.port
        assert other.client().get("greeting") is None


def test_a_value_survives_a_restart_on_the_same_port(tmp_path: Path) -> None:
    with RedisServer(tmp_path) as server:
        port, pid = server.port, server.pid
        server.client().set("kept", "yes")
        server.restart()
        assert (server.port, server.running) == (port, True)
        assert server.pid != pid
        assert server.client().get("kept") == "yes"
    assert (tmp_path / "appendonlydir").is_dir()
    assert "Ready to accept connections" in server.log.read_text(encoding="utf-8")


def test_kill_then_start_again_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    server = RedisServer(tmp_path).start()
    try:
        port = server.port
        server.client().rpush("queue", "a", "b")
        server.kill()
        assert not server.running and server.pid is None
        with pytest.raises(redis.ConnectionError):
            redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, retry=NO_RETRY).ping()
        server.start()
        assert server.port == port
        assert server.client().lrange("queue", 0, -1) == ["a", "b"]
    finally:
        server.stop()


def test_a_password_protected_server_refuses_a_client_without_it(tmp_path: Path) -> None:
    with RedisServer(tmp_path, password="s3cr:t/") as server:
        assert server.url == f"redis://:s3cr%3At%2F@127.0.0.1:{server.port}/0"
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port, retry=NO_RETRY).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port, password="wrong", retry=NO_RETRY).ping()
        assert server.client().ping() is True
        assert redis.Redis.from_url(server.url).ping() is True


def test_stop_is_safe_twice_and_before_a_start(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.stop()
    server.kill()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = server.port
    server.start()
    server.stop()
    server.stop()
    assert not server.running


def test_a_given_port_is_used(tmp_path: Path) -> None:
    port = free_port()
    with RedisServer(tmp_path, port=port) as server:
        assert server.client().info("server")["tcp_port"] == port


def test_a_taken_random_port_is_given_up_for_another(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first port picked is the module's server's: the new server cannot bind it, and the PING that
    server answers is not taken for the new one's."""
    ports = iter([redis_server.port])
    monkeypatch.setattr(module, "free_port", lambda: next(ports, None) or free_port())
    with RedisServer(tmp_path) as server:
        assert server.port != redis_server.port
        assert server.client().info("server")["process_id"] == server.pid
    assert "Address already in use" in server.log.read_text(encoding="utf-8")


def test_a_given_port_is_tried_again_until_it_is_free(tmp_path: Path) -> None:
    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    release = threading.Timer(0.5, holder.close)
    release.start()
    try:
        with RedisServer(tmp_path, port=port) as server:
            assert server.client().info("server")["tcp_port"] == port
    finally:
        release.cancel()
        holder.close()


def test_a_missing_wrapper_says_run_make_test_deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "REDIS_SERVER", tmp_path / "no-such-redis-server")
    with pytest.raises(RuntimeError, match="run `make test-deps`"):
        RedisServer(tmp_path).start()


def test_a_failed_start_shows_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = RedisServer(tmp_path)
    monkeypatch.setattr(server, "_command", lambda port: [str(REDIS_SERVER), "--no-such-option", "x"])
    with pytest.raises(RuntimeError, match="no-such-option"):
        server.start()
    assert not server.running
