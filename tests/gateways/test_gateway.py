"""The gateway core, without IRC: platforms registered by directory plugins the tests write.

The platform plugin (``PLATFORM_PLUGIN``) is a small line-chat adapter, standard library only, that
connects over a real TCP socket to :class:`ChatServer`, a chat server the test runs on 127.0.0.1.  The
test talks to the bot through :class:`ChatClient`, a second connection to the same server, the way a
person would.  The model is the bundled ``scripted`` provider, so every reply is known in advance.
Everything async runs under ``asyncio.run``; every wait has a generous deadline (for hangs only).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env, until, write_plugin

from kernel import Kernel
from kernel.gateway import PlatformConfig, SendResult
from kernel.gateway import platforms as gateway_platforms
from kernel.gateway.runner import GatewayError, split_message
from kernel.testing import HookRecorder, write_script

DEADLINE = 30.0  # seconds; only ever reached when something hangs

# ---------------------------------------------------------------------------
# The chat server and a person's client
# ---------------------------------------------------------------------------


class ChatServer:
    """A line chat server on 127.0.0.1, serving on the test's event loop.

    The first line of a connection says who it is: ``BOT <platform>`` for an adapter, ``USER`` for a
    person.  A person sends ``chat_id|user|text``; the server numbers it (``m1``, ``m2``...) and passes
    ``m<n>|chat_id|user|text`` to every connected bot.  A bot sends ``SAY {"chat", "text", "reply_to"}``
    (JSON, so replies may hold newlines); the server records it in ``said`` and relays the JSON line to
    every person.  ``joins`` and ``leaves`` count bot connections opened and closed.
    """

    def __init__(self) -> None:
        self.bots: list[asyncio.StreamWriter] = []
        self.users: list[asyncio.StreamWriter] = []
        self.said: list[dict[str, Any]] = []
        self.joins = 0
        self.leaves = 0
        self.received = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> ChatServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        for writer in [*self.bots, *self.users]:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def kick(self) -> None:
        """Drop every bot connection, as a server restart would."""
        for writer in list(self.bots):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = (await reader.readline()).decode().strip()
            if hello.startswith("BOT "):
                await self._bot(reader, writer)
            elif hello == "USER":
                await self._user(reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _bot(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.joins += 1
        self.bots.append(writer)
        try:
            while line := await reader.readline():
                verb, _, payload = line.decode().rstrip("\n").partition(" ")
                if verb == "SAY":
                    self.said.append(json.loads(payload))
                    for user in list(self.users):
                        user.write(payload.encode() + b"\n")
        finally:
            self.bots.remove(writer)
            self.leaves += 1

    async def _user(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.users.append(writer)
        try:
            while line := await reader.readline():
                self.received += 1
                for bot in list(self.bots):
                    bot.write(f"m{self.received}|".encode() + line)
        finally:
            self.users.remove(writer)


class ChatClient:
    """A person on the chat server: ``say`` a line, read the bot's next ``reply``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server: ChatServer) -> ChatClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"USER\n")
        await writer.drain()
        before = len(server.users)
        await until(lambda: len(server.users) > before, "the chat server to accept the person")
        return cls(reader, writer)

    async def say(self, chat: str, user: str, text: str) -> None:
        self.writer.write(f"{chat}|{user}|{text}\n".encode())
        await self.writer.drain()

    async def reply(self, deadline: float = DEADLINE) -> dict[str, Any]:
        try:
            line = await asyncio.wait_for(self.reader.readline(), deadline)
        except TimeoutError:
            pytest.fail(f"the bot sent no reply within {deadline} s")
        assert line, "the chat server closed the connection before the bot replied"
        return json.loads(line)

    async def ask(self, chat: str, user: str, text: str) -> dict[str, Any]:
        await self.say(chat, user, text)
        return await self.reply()

    def close(self) -> None:
        self.writer.close()


def run(coro: Awaitable[Any]) -> Any:
    """Run a test scenario on a fresh event loop, with an overall deadline."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, DEADLINE * 2)

    return asyncio.run(bounded())


# ---------------------------------------------------------------------------
# The plugins the tests write
# ---------------------------------------------------------------------------

PLATFORM_PLUGIN = r'''
"""A line-chat platform: one TCP connection to the test's chat server (see tests/gateways/test_gateway.py)."""

import asyncio
import json
import os

from kernel.gateway import BasePlatformAdapter, MessageEvent, SendResult, SessionSource

OPTIONS = @OPTIONS@


class LineChatAdapter(BasePlatformAdapter):
    MAX_MESSAGE_LENGTH = 4096

    def __init__(self, config):
        super().__init__(config)
        self.port = int(config.extra.get("port", 0))
        if "max_length" in config.extra:
            self.max_message_length = int(config.extra["max_length"])
        # fail_first: N makes the first N connects fail (raise, or return False with
        # fail_mode "false"), and the next ones wait for `release` while `gated`.
        self.fail_first = int(config.extra.get("fail_first", 0))
        self.fail_mode = config.extra.get("fail_mode", "raise")
        self.gated = self.fail_first > 0
        self.attempts = 0
        self.reconnect_flags = []
        self.release = asyncio.Event()
        # self_reconnect: the adapter restores a dropped connection itself (once `release` is set).
        self.reconnects_itself = bool(config.extra.get("self_reconnect", False))
        # inline: await handle_message inside the read loop (the Hermes adapters' convention).
        self.inline = bool(config.extra.get("inline", False))
        # refuse: chats whose every send fails (a chat the platform no longer has).
        self.refuse = set(config.extra.get("refuse", ()))
        self.refused = 0
        self._writer = None
        self._reading = None
        self._closing = False
        self._tasks = set()

    async def connect(self, *, is_reconnect=False):
        self.attempts += 1
        self.reconnect_flags.append(is_reconnect)
        if self.attempts <= self.fail_first:
            if self.fail_mode == "false":
                return False
            raise ConnectionRefusedError(f"planned failure {self.attempts}")
        if self.gated:
            await self.release.wait()
        await self._open()
        return True

    async def _open(self):
        reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._writer.write(f"BOT {self.name}\n".encode())
        await self._writer.drain()
        self._reading = asyncio.create_task(self._read(reader))
        self._mark_connected()

    def _spawn(self, coro):
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, reader):
        while line := await reader.readline():
            message_id, chat, user, text = line.decode().rstrip("\n").split("|", 3)
            kind = "channel" if chat.startswith("#") else "dm"
            source = SessionSource(self.platform, chat, chat_type=kind, user_id=user, user_name=user)
            event = MessageEvent(text=text, source=source, message_id=message_id)
            if self.inline:
                await self.handle_message(event)
            else:
                self._spawn(self.handle_message(event))  # keep reading meanwhile
        # The server dropped us.
        self._mark_disconnected()
        if self.reconnects_itself and not self._closing:
            self._spawn(self._reconnect())

    async def _reconnect(self):
        await self.release.wait()
        await self._open()

    async def send(self, chat_id, content, reply_to=None, metadata=None):
        if self._writer is None:
            return SendResult(success=False, error="not connected")
        if chat_id in self.refuse:
            self.refused += 1
            return SendResult(success=False, error=f"no chat {chat_id} here")
        payload = json.dumps({"chat": chat_id, "text": content, "reply_to": reply_to})
        self._writer.write(f"SAY {payload}\n".encode())
        await self._writer.drain()
        return SendResult(success=True)

    async def disconnect(self):
        self._closing = True
        if self._reading is not None:
            self._reading.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except ConnectionError:
                pass
        self._writer = None
        self._mark_disconnected()


def _check():
    if OPTIONS["check"] == "raise":
        raise RuntimeError("the linechat client library is missing")
    return OPTIONS["check"] == "ok"


def _env_enablement():
    port = os.environ.get(OPTIONS["env_var"], "").strip()
    return {"port": int(port), "home_channel": "#from-env"} if port else None


def register(ctx):
    factory = (lambda cfg: object()) if OPTIONS["bogus"] else (lambda cfg: LineChatAdapter(cfg))
    ctx.register_platform(
        name=OPTIONS["name"],
        label=OPTIONS["label"],
        adapter_factory=factory,
        check_fn=_check,
        required_env=OPTIONS["required_env"],
        env_enablement_fn=_env_enablement if OPTIONS["env_var"] else None,
        cron_deliver_env_var=OPTIONS["cron_var"],
        emoji="\N{SPEECH BALLOON}",
        platform_hint=OPTIONS["hint"],
        **OPTIONS["extra"],
    )
'''

POLICY_PLUGIN = r'''
"""pre_gateway_dispatch: "ignore ..." is dropped, "shout ..." is rewritten in capitals.
on_session_finalize: one JSON line per call appended to RECORDS.  /echo: says its arguments back."""

import json

RECORDS = @RECORDS@


def _dispatch(event, gateway, session_store):
    if event.text.startswith("ignore "):
        return {"action": "skip", "reason": "asked to be ignored"}
    if event.text.startswith("shout "):
        return {"action": "rewrite", "text": event.text[len("shout "):].upper()}
    return None


def _finalize(session_id, platform, old_session_id, new_session_id, reason):
    with open(RECORDS, "a", encoding="utf-8") as out:
        out.write(json.dumps({"session_id": session_id, "platform": platform, "reason": reason}) + "\n")


async def _echo(args):
    return f"echo: {args}"


def register(ctx):
    ctx.register_hook("pre_gateway_dispatch", _dispatch)
    ctx.register_hook("on_session_finalize", _finalize)
    ctx.register_command("echo", _echo, description="Say the arguments back")
'''

HINT = "You are chatting through LineChat: keep answers short."


def platform_plugin(
    home: Path,
    name: str,
    *,
    dirname: str | None = None,
    label: str | None = None,
    check: str = "ok",
    required_env: list[str] | None = None,
    env_var: str = "",
    cron_var: str | None = None,
    hint: str = "",
    extra: dict[str, Any] | None = None,
    bogus: bool = False,
) -> Path:
    """Write ``<home>/plugins/platforms/<dirname or name>/`` registering platform ``name``."""
    options = {
        "name": name,
        "label": label or name.title(),
        "check": check,
        "required_env": required_env,
        "env_var": env_var,
        "cron_var": cron_var,
        "hint": hint,
        "extra": extra or {},
        "bogus": bogus,
    }
    folder = dirname or name
    return write_plugin(
        home / "plugins" / "platforms",
        folder,
        PLATFORM_PLUGIN.replace("@OPTIONS@", repr(options)),
        manifest={"name": folder, "version": "0.1.0", "kind": "platform"},
    )


def policy_plugin(home: Path) -> Path:
    """Write the ``gwpolicy`` plugin; returns the file its ``on_session_finalize`` writes to."""
    records = home / "finalized.jsonl"
    write_plugin(home / "plugins", "gwpolicy", POLICY_PLUGIN.replace("@RECORDS@", repr(str(records))))
    return records


def finalized(records: Path) -> list[dict[str, Any]]:
    if not records.is_file():
        return []
    return [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines()]


def chat_config(home: Path, turns: list[Any], platforms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The scripted model playing ``turns``, and ``gateway.platforms`` set to ``platforms``."""
    script = write_script(home, turns)
    return {
        "model": {"provider": "scripted", "script": str(script)},
        "gateway": {"platforms": platforms},
    }


# ---------------------------------------------------------------------------
# Fixtures and the in-process gateway
# ---------------------------------------------------------------------------


@pytest.fixture
def hermes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Hermes home (also ``$HERMES_HOME``); the bundled plugins of the checkout stay (``scripted``)."""
    path = tmp_path / "hermes"
    path.mkdir()
    monkeypatch.setenv("HERMES_HOME", str(path))
    monkeypatch.delenv("LINECHAT_HOME", raising=False)
    return path


@pytest.fixture
def kernels() -> Iterator[Callable[..., Kernel]]:
    """``kernels(home, config)``: a loaded kernel, shut down after the test."""
    made: list[Kernel] = []

    def make(home: Path, config: dict[str, Any] | None = None) -> Kernel:
        k = Kernel(home=home, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


class Events:
    """Every event of some families, recorded as ``(name, context)`` (from any thread)."""

    def __init__(self, k: Kernel, *families: str) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        for family in families:
            k.events.connect(f"{family}:*", lambda name, ctx: self.seen.append((name, dict(ctx))))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [ctx for n, ctx in self.seen if n == name]


async def start_gateway(k: Kernel, *servers: tuple[str, ChatServer]) -> asyncio.Task[None]:
    """Run ``k.gateway`` on this loop; wait until each ``(platform, server)`` has its bot connected."""
    task = asyncio.create_task(k.gateway.run())
    for name, server in servers:
        await until(lambda s=server: s.bots or task.done(), f"platform {name} to connect")
        if task.done():
            task.result()  # the gateway ended: show why
    return task


async def stop_gateway(k: Kernel, task: asyncio.Task[None]) -> None:
    k.gateway.stop()
    await asyncio.wait_for(task, DEADLINE)


def request_messages(recorder: HookRecorder) -> list[list[dict[str, Any]]]:
    """The messages of every model request, in order (from the ``pre_api_request`` hook)."""
    return [call["request_messages"] for call in recorder.of("pre_api_request")]


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------


def test_register_platform_keeps_every_argument_and_unknown_keywords(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(
        hermes,
        "linechat",
        label="LineChat",
        required_env=["LINECHAT_TOKEN"],
        cron_var="LINECHAT_HOME",
        hint=HINT,
        extra={"pii_safe": True, "max_chars": 500, "allow_groups": ["a", "b"]},
    )
    k = kernels(hermes)

    spec = k.platforms.get("linechat")
    assert (spec.name, spec.label, spec.plugin) == ("linechat", "LineChat", "platforms/linechat")
    assert spec.required_env == ("LINECHAT_TOKEN",)
    assert spec.cron_deliver_env_var == "LINECHAT_HOME"
    assert spec.platform_hint == HINT
    assert spec.emoji == "\N{SPEECH BALLOON}"
    assert callable(spec.check_fn) and spec.check_fn() is True
    assert spec.env_enablement_fn is None
    assert spec.extra == {"pii_safe": True, "max_chars": 500, "allow_groups": ["a", "b"]}

    info = next(p for p in k.plugins if p.name == "platforms/linechat")
    assert info.enabled and info.error is None, info
    assert info.platforms == ["linechat"]
    assert info.to_dict()["platforms"] == ["linechat"]
    assert [s.name for s in k.platforms.all() if s.plugin == "platforms/linechat"] == ["linechat"]

    k.unregister("platforms/linechat")
    with pytest.raises(GatewayError, match="no platform named 'linechat'"):
        k.platforms.get("linechat")


def test_a_second_plugin_registering_a_taken_name_is_refused(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "samechat", dirname="aaa-chat", label="First")
    platform_plugin(hermes, "samechat", dirname="bbb-chat", label="Second")
    k = kernels(hermes)

    first = next(p for p in k.plugins if p.name == "platforms/aaa-chat")
    second = next(p for p in k.plugins if p.name == "platforms/bbb-chat")
    assert first.enabled and first.platforms == ["samechat"]
    assert not second.enabled and second.platforms == []
    assert second.error is not None
    assert "platform 'samechat' of plugin 'platforms/bbb-chat' was refused" in second.error
    assert "plugin 'platforms/aaa-chat' already registered it" in second.error
    spec = k.platforms.get("samechat")
    assert (spec.label, spec.plugin) == ("First", "platforms/aaa-chat")


SEED_STYLE_PLUGIN = r'''
"""A platform plugin shaped like the seed guide's: Hermes import path, connect(), send(chat_id, text)."""

import asyncio
import json
import os

from gateway.platforms.base import BasePlatformAdapter, MessageEvent, SessionSource


class MyPlatformAdapter(BasePlatformAdapter):
    async def connect(self):
        port = int(os.environ["MYPLATFORM_PORT"])
        reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        self.writer.write(b"BOT myplatform\n")
        self.pending = set()
        self.reading = asyncio.create_task(self.read(reader))
        return True

    async def read(self, reader):
        while line := await reader.readline():
            message_id, chat, user, text = line.decode().rstrip("\n").split("|", 3)
            source = SessionSource(self.platform, chat, user_id=user)
            event = MessageEvent(text, source=source, message_id=message_id)
            task = asyncio.create_task(self.handle_message(event))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def send(self, chat_id, text):
        self.writer.write(f"SAY {json.dumps({'chat': chat_id, 'text': text})}\n".encode())
        await self.writer.drain()

    async def disconnect(self):
        self.reading.cancel()
        self.writer.close()


def check_requirements():
    return bool(os.environ.get("MYPLATFORM_TOKEN"))


def _env_enablement():
    token = os.getenv("MYPLATFORM_TOKEN", "").strip()
    return {"token": token} if token else None


def register(ctx):
    ctx.register_platform(
        name="myplatform",
        label="MyPlatform",
        adapter_factory=lambda cfg: MyPlatformAdapter(cfg),
        check_fn=check_requirements,
        required_env=["MYPLATFORM_TOKEN"],
        env_enablement_fn=_env_enablement,
        cron_deliver_env_var="MYPLATFORM_HOME_CHANNEL",
        emoji="\N{SPEECH BALLOON}",
        platform_hint="Answer in one short line.",
    )
'''

SEED_STYLE_MANIFEST = {
    "name": "myplatform-platform",
    "label": "MyPlatform",
    "kind": "platform",
    "version": "1.0.0",
    "description": "The seed guide's example platform, wired to the test's chat server",
    "requires_env": [{"name": "MYPLATFORM_TOKEN", "description": "the bot's token", "password": True}],
    "optional_env": [{"name": "MYPLATFORM_HOME_CHANNEL", "description": "where deliveries go"}],
}


def test_a_seed_style_platform_plugin_is_enabled_by_its_environment_and_chats(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plugin(
        hermes / "plugins" / "platforms", "myplatform", SEED_STYLE_PLUGIN, manifest=SEED_STYLE_MANIFEST
    )
    monkeypatch.setenv("MYPLATFORM_TOKEN", "tok-123")
    monkeypatch.setenv("MYPLATFORM_HOME_CHANNEL", "#home")

    async def scenario() -> None:
        server = await ChatServer().start()
        monkeypatch.setenv("MYPLATFORM_PORT", str(server.port))
        k = kernels(hermes, chat_config(hermes, ["Seed reply."], {}))
        recorder = HookRecorder().attach(k)
        info = next(p for p in k.plugins if p.name == "platforms/myplatform")
        assert info.enabled and info.platforms == ["myplatform"], info
        row = next(r for r in k.gateway.status() if r.name == "myplatform")
        assert (row.enabled, row.source, row.label) == (True, "env", "MyPlatform")
        config, _, _ = k.gateway.platform_config(k.platforms.get("myplatform"))
        assert config is not None and config.token == "tok-123"

        task = await start_gateway(k, ("myplatform", server))
        client = await ChatClient.open(server)
        assert await client.ask("#seed", "ned", "hello") == {"chat": "#seed", "text": "Seed reply."}
        assert "Answer in one short line." in request_messages(recorder)[0][0]["content"]
        assert next(r for r in k.gateway.status() if r.name == "myplatform").connected is True
        results = await asyncio.to_thread(k.gateway.deliver, "myplatform", "Delivered.")
        assert [r.success for r in results] == [True]
        assert await client.reply() == {"chat": "#home", "text": "Delivered."}
        client.close()
        await stop_gateway(k, task)
        await until(lambda: server.leaves == 1, "the server to see the bot leave")
        await server.close()

    run(scenario())


# ---------------------------------------------------------------------------
# Status
# ---------------------------------------------------------------------------


def status_plugins(home: Path) -> None:
    platform_plugin(home, "alpha")  # enabled in config
    platform_plugin(home, "beta", env_var="BETA_PORT")  # enabled by its environment
    platform_plugin(home, "gamma")  # not enabled
    platform_plugin(home, "delta", required_env=["DELTA_TOKEN"])  # enabled, but its variable is missing
    platform_plugin(home, "epsilon", check="false")  # check_fn says no
    platform_plugin(home, "zeta", check="raise")  # check_fn raises
    platform_plugin(home, "eta", env_var="ETA_PORT")  # its environment would enable it; config says no


STATUS_CONFIG = {
    "gateway": {
        "platforms": {
            "alpha": {"enabled": True, "port": 1234, "token": "t-alpha", "home_channel": "#alpha"},
            "delta": {"enabled": True},
            "epsilon": {"enabled": True},
            "zeta": {"enabled": True},
            "eta": {"enabled": False},
        }
    }
}


def test_status_says_which_platforms_are_enabled_and_why_not(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    status_plugins(hermes)
    monkeypatch.setenv("BETA_PORT", "4321")
    monkeypatch.setenv("ETA_PORT", "4322")
    monkeypatch.delenv("DELTA_TOKEN", raising=False)
    k = kernels(hermes, STATUS_CONFIG)
    rows = {row.name: row for row in k.gateway.status() if row.plugin.startswith("platforms/")}
    mine = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"}
    assert mine <= set(rows)

    assert (rows["alpha"].enabled, rows["alpha"].source, rows["alpha"].reason) == (True, "config", "")
    assert (rows["beta"].enabled, rows["beta"].source, rows["beta"].reason) == (True, "env", "")
    assert not rows["gamma"].enabled
    assert "gateway.platforms.gamma.enabled" in rows["gamma"].reason
    assert not rows["delta"].enabled and "DELTA_TOKEN" in rows["delta"].reason
    assert not rows["epsilon"].enabled and "check_fn returned False" in rows["epsilon"].reason
    assert not rows["zeta"].enabled
    assert "check_fn" in rows["zeta"].reason
    assert "RuntimeError: the linechat client library is missing" in rows["zeta"].reason
    assert not rows["eta"].enabled and "gateway.platforms.eta.enabled" in rows["eta"].reason
    for name in mine:
        assert rows[name].connected is False and rows[name].error is None
        assert rows[name].label == name.title() and rows[name].plugin == f"platforms/{name}"

    # The config of an enabled platform: from config.yaml, or from what env_enablement_fn returned.
    alpha, source, _ = k.gateway.platform_config(k.platforms.get("alpha"))
    assert source == "config" and isinstance(alpha, PlatformConfig)
    assert (alpha.enabled, alpha.token, alpha.home_channel, alpha.extra) == (
        True,
        "t-alpha",
        "#alpha",
        {"port": 1234},
    )
    beta, source, _ = k.gateway.platform_config(k.platforms.get("beta"))
    assert source == "env" and beta is not None
    assert (beta.enabled, beta.home_channel, beta.extra) == (True, "#from-env", {"port": 4321})

    # The missing variable set: the platform is enabled.
    monkeypatch.setenv("DELTA_TOKEN", "secret")
    row = next(r for r in k.gateway.status() if r.name == "delta")
    assert (row.enabled, row.source, row.reason) == (True, "config", "")


def test_gateway_status_on_the_command_line(hermes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status_plugins(hermes)
    (hermes / "config.yaml").write_text(yaml.safe_dump(STATUS_CONFIG), encoding="utf-8")
    env = cli_env(hermes, BETA_PORT="4321")
    env.pop("DELTA_TOKEN", None)
    env.pop("ETA_PORT", None)

    proc = subprocess.run([*CLI, "gateway", "status", "--json"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    # Without gateway.broker: no broker, and the conversations in the home's SQLite file.
    assert status["broker"] is None
    assert status["sessions"] == {"store": "sqlite", "path": str(hermes / "gateway" / "sessions.db")}
    assert not (hermes / "gateway").exists(), "status must not create the session store"
    rows = {row["name"]: row for row in status["platforms"]}
    assert rows["alpha"]["enabled"] is True and rows["alpha"]["source"] == "config"
    assert rows["beta"]["enabled"] is True and rows["beta"]["source"] == "env"
    assert rows["gamma"]["enabled"] is False and "gateway.platforms.gamma.enabled" in rows["gamma"]["reason"]
    assert rows["delta"]["enabled"] is False and "DELTA_TOKEN" in rows["delta"]["reason"]
    assert "check_fn returned False" in rows["epsilon"]["reason"]
    assert "RuntimeError" in rows["zeta"]["reason"]
    assert set(rows["alpha"]) >= {
        "name",
        "label",
        "plugin",
        "enabled",
        "reason",
        "source",
        "connected",
        "error",
    }
    assert rows["alpha"]["plugin"] == "platforms/alpha" and rows["alpha"]["label"] == "Alpha"

    proc = subprocess.run([*CLI, "gateway", "status"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line and not line[0].isspace()}
    assert "enabled (config)" in lines["alpha"] and "enabled (env)" in lines["beta"]
    assert "not enabled" in lines["gamma"]
    assert "DELTA_TOKEN" in proc.stdout


# ---------------------------------------------------------------------------
# Routing messages to sessions
# ---------------------------------------------------------------------------


def test_chats_get_their_own_sessions_and_a_session_keeps_its_history(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat", hint=HINT)

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes,
            ["Hello alice.", "Hello bob.", "You said hello before."],
            {"linechat": {"enabled": True, "port": server.port}},
        )
        k = kernels(hermes, config)
        recorder = HookRecorder().attach(k)
        events = Events(k, "gateway", "session", "agent")
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)

        first = await client.ask("#general", "alice", "hello from general")
        assert first == {"chat": "#general", "text": "Hello alice.", "reply_to": "m1"}
        second = await client.ask("bob", "bob", "hello from a private chat")
        assert (second["chat"], second["text"]) == ("bob", "Hello bob.")
        third = await client.ask("#general", "alice", "do you remember me?")
        assert (third["chat"], third["text"]) == ("#general", "You said hello before.")

        sessions = k.gateway.sessions
        assert set(sessions) == {("linechat", "#general"), ("linechat", "bob")}
        general, bob = sessions[("linechat", "#general")], sessions[("linechat", "bob")]
        assert general.session_id != bob.session_id
        assert general.platform == bob.platform == "linechat"
        assert (general.turns, bob.turns) == (2, 1)

        # What the model was sent: the platform hint in the system message; the history of the chat.
        calls = request_messages(recorder)
        assert len(calls) == 3
        for messages in calls:
            assert messages[0]["role"] == "system" and HINT in messages[0]["content"]
        assert [(m["role"], m["content"]) for m in calls[2][1:]] == [
            ("user", "hello from general"),
            ("assistant", "Hello alice."),
            ("user", "do you remember me?"),
        ]
        assert [(m["role"], m["content"]) for m in calls[1][1:]] == [("user", "hello from a private chat")]
        sent_for = [call["session_id"] for call in recorder.of("pre_api_request")]
        assert sent_for == [general.session_id, bob.session_id, general.session_id]

        # The events of the bus.
        assert events.named("gateway:startup") == [{"platforms": ["linechat"]}]
        starts = events.named("session:start")
        assert [(s["session_id"], s["platform"], s["user_id"]) for s in starts] == [
            (general.session_id, "linechat", "alice"),
            (bob.session_id, "linechat", "bob"),
        ]
        agent_starts = events.named("agent:start")
        assert [(a["session_id"], a["message"]) for a in agent_starts] == [
            (general.session_id, "hello from general"),
            (bob.session_id, "hello from a private chat"),
            (general.session_id, "do you remember me?"),
        ]
        ends = events.named("agent:end")
        assert [(e["session_id"], e["response"]) for e in ends] == [
            (general.session_id, "Hello alice."),
            (bob.session_id, "Hello bob."),
            (general.session_id, "You said hello before."),
        ]
        assert all(e["platform"] == "linechat" for e in ends)

        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_pre_gateway_dispatch_skips_and_rewrites(hermes: Path, kernels: Callable[..., Kernel]) -> None:
    platform_plugin(hermes, "linechat")
    policy_plugin(hermes)

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, ["First answer.", "Second answer."], {"linechat": {"enabled": True, "port": server.port}}
        )
        k = kernels(hermes, config)
        recorder = HookRecorder().attach(k)
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)

        await client.say("#room", "carol", "ignore this one please")
        answer = await client.ask("#room", "carol", "shout make me loud")
        # The skipped message got no reply and reached no model: the first reply answers the rewrite.
        assert (answer["chat"], answer["text"]) == ("#room", "First answer.")
        answer = await client.ask("#room", "carol", "plain words")
        assert answer["text"] == "Second answer."

        dispatched = [call["event"].text for call in recorder.of("pre_gateway_dispatch")]
        assert dispatched == ["ignore this one please", "shout make me loud", "plain words"]
        calls = request_messages(recorder)
        assert [m["content"] for m in calls[-1] if m["role"] == "user"] == ["MAKE ME LOUD", "plain words"]
        assert len(calls) == 2
        assert not any("ignore" in m["content"] for m in calls[-1])

        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_slash_commands_in_a_chat_are_answered_by_the_commands(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat")
    policy_plugin(hermes)  # offers /echo

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, ["A model answer."], {"linechat": {"enabled": True, "port": server.port}}
        )
        k = kernels(hermes, config)
        recorder = HookRecorder().attach(k)
        events = Events(k, "command")
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)

        help_reply = await client.ask("#ops", "dave", "/help")
        assert help_reply["chat"] == "#ops"
        assert help_reply["text"].startswith("Commands:\n")
        assert "/help" in help_reply["text"] and "/plugins" in help_reply["text"]
        echo = await client.ask("#ops", "dave", "/echo one  two")
        assert echo == {"chat": "#ops", "text": "echo: one  two", "reply_to": "m2"}
        unknown = await client.ask("#ops", "dave", "/nosuchcommand")
        assert unknown["text"].startswith("Unknown command /nosuchcommand.")
        answer = await client.ask("#ops", "dave", "and now a question")
        assert answer["text"] == "A model answer."

        session = k.gateway.sessions[("linechat", "#ops")]
        assert events.named("command:help") == [
            {
                "platform": "linechat",
                "user_id": "dave",
                "session_id": session.session_id,
                "command": "help",
                "args": "",
                "plugin": None,
            }
        ]
        echoed = events.named("command:echo")
        assert [(e["args"], e["plugin"], e["platform"]) for e in echoed] == [
            ("one  two", "gwpolicy", "linechat")
        ]
        assert len(request_messages(recorder)) == 1  # the commands never reached the model
        assert session.turns == 1

        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


LONG_REPLY = (
    "Line one is here.\n"
    "Line two is a bit longer than that.\n"
    "alpha beta gamma delta epsilon zeta eta theta iota kappa"
)


def test_a_long_reply_is_split_to_the_adapters_message_length(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, [LONG_REPLY], {"linechat": {"enabled": True, "port": server.port, "max_length": 40}}
        )
        k = kernels(hermes, config)
        task = await start_gateway(k, ("linechat", server))
        assert k.gateway.adapters["linechat"].max_message_length == 40
        client = await ChatClient.open(server)

        await client.say("#long", "erin", "tell me a lot")
        pieces = [await client.reply() for _ in range(4)]
        assert [p["text"] for p in pieces] == [
            "Line one is here.",
            "Line two is a bit longer than that.",
            "alpha beta gamma delta epsilon zeta eta",
            "theta iota kappa",
        ]
        assert all(p["chat"] == "#long" and p["reply_to"] == "m1" for p in pieces)

        client.close()
        await stop_gateway(k, task)
        await server.close()
        assert len(server.said) == 4

    run(scenario())


def test_split_message() -> None:
    assert split_message("short", 40) == ["short"]
    assert split_message("  \n ", 40) == []
    assert split_message(LONG_REPLY, 40) == [
        "Line one is here.",
        "Line two is a bit longer than that.",
        "alpha beta gamma delta epsilon zeta eta",
        "theta iota kappa",
    ]
    # Two short lines that fit together stay together; a word longer than the limit is cut.
    assert split_message("ab\ncd\nefghijklmnop", 6) == ["ab\ncd", "efghij", "klmnop"]
    assert all(len(p) <= 7 for p in split_message("x" * 50 + " y", 7))


# ---------------------------------------------------------------------------
# Failing adapters
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail_mode", "error"),
    [
        ("raise", "connect failed: ConnectionRefusedError: planned failure 2"),
        ("false", "connect() returned False"),
    ],
)
def test_a_failing_connect_is_retried_while_the_other_platform_serves(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch, fail_mode: str, error: str
) -> None:
    monkeypatch.setattr(gateway_platforms, "BACKOFF_FIRST", 0.02)
    platform_plugin(hermes, "linechat")
    platform_plugin(hermes, "flaky")

    async def scenario() -> None:
        steady, shaky = await ChatServer().start(), await ChatServer().start()
        config = chat_config(
            hermes,
            ["Steady answer.", "Flaky answer."],
            {
                "linechat": {"enabled": True, "port": steady.port},
                "flaky": {"enabled": True, "port": shaky.port, "fail_first": 2, "fail_mode": fail_mode},
            },
        )
        k = kernels(hermes, config)
        events = Events(k, "gateway")
        task = await start_gateway(k, ("linechat", steady))
        assert events.named("gateway:startup") == [{"platforms": ["flaky", "linechat"]}]
        flaky = k.gateway.adapters["flaky"]
        # Two connects raised; the third waits for the test to release it.
        await until(lambda: flaky.attempts == 3, "the third connect of flaky")
        row = next(r for r in k.gateway.status() if r.name == "flaky")
        assert (row.enabled, row.connected) == (True, False)
        assert row.error == error
        assert k.gateway.errors == {"flaky": row.error}

        # Meanwhile the other platform answers.
        steady_client = await ChatClient.open(steady)
        assert (await steady_client.ask("#a", "fay", "are you there?"))["text"] == "Steady answer."
        assert shaky.joins == 0

        flaky.release.set()
        await until(lambda: shaky.bots and flaky.is_connected and not k.gateway.errors, "flaky to connect")
        row = next(r for r in k.gateway.status() if r.name == "flaky")
        assert (row.connected, row.error) == (True, None)
        shaky_client = await ChatClient.open(shaky)
        assert (await shaky_client.ask("#b", "gus", "and you?"))["text"] == "Flaky answer."
        assert flaky.reconnect_flags == [False, True, True]

        steady_client.close()
        shaky_client.close()
        await stop_gateway(k, task)
        await steady.close()
        await shaky.close()

    run(scenario())


def test_an_adapter_factory_returning_no_adapter_is_reported_and_the_others_run(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat")
    platform_plugin(hermes, "bogus", bogus=True)

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes,
            ["Still here."],
            {"linechat": {"enabled": True, "port": server.port}, "bogus": {"enabled": True}},
        )
        k = kernels(hermes, config)
        events = Events(k, "gateway")
        task = await start_gateway(k, ("linechat", server))
        assert events.named("gateway:startup") == [{"platforms": ["linechat"]}]
        assert set(k.gateway.adapters) == {"linechat"}
        error = k.gateway.errors["bogus"]
        assert "platform 'bogus'" in error and "adapter_factory returned object" in error
        assert "not a BasePlatformAdapter" in error
        row = next(r for r in k.gateway.status() if r.name == "bogus")
        assert (row.enabled, row.connected, row.error) == (True, False, error)

        client = await ChatClient.open(server)
        assert (await client.ask("#c", "hal", "hi"))["text"] == "Still here."
        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_a_dropped_adapter_is_reported_and_reconnected_with_backoff(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec: "An adapter that fails to connect or drops is retried with backoff and reported".

    The adapter reports the drop as the brief says: ``self._mark_disconnected()`` and its reader returns.
    """
    monkeypatch.setattr(gateway_platforms, "BACKOFF_FIRST", 0.02)
    monkeypatch.setattr(gateway_platforms, "WATCH_INTERVAL", 0.02)
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes,
            ["Before the drop.", "After the drop."],
            {"linechat": {"enabled": True, "port": server.port}},
        )
        k = kernels(hermes, config)
        task = await start_gateway(k, ("linechat", server))
        adapter = k.gateway.adapters["linechat"]
        client = await ChatClient.open(server)
        assert (await client.ask("#d", "lea", "hello"))["text"] == "Before the drop."

        adapter.gated = True  # the next connect waits for the test
        server.kick()
        await until(lambda: not adapter.is_connected, "the adapter to see the drop")
        try:
            await until(lambda: adapter.attempts == 2, "the gateway to reconnect after the drop", deadline=10)
            row = next(r for r in k.gateway.status() if r.name == "linechat")
            assert row.connected is False and "disconnected" in (row.error or ""), row
            assert adapter.reconnect_flags == [False, True]
            adapter.release.set()
            await until(lambda: server.bots and adapter.is_connected, "the adapter to be back")
            assert server.joins == 2
            assert (await client.ask("#d", "lea", "still there?"))["text"] == "After the drop."
            assert next(r for r in k.gateway.status() if r.name == "linechat").error is None
        finally:
            adapter.release.set()
            client.close()
            await stop_gateway(k, task)
            await server.close()

    run(scenario())


def test_an_adapter_that_reconnects_itself_is_only_watched_and_reported(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_platforms, "WATCH_INTERVAL", 0.02)
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        platforms = {"linechat": {"enabled": True, "port": server.port, "self_reconnect": True}}
        k = kernels(hermes, chat_config(hermes, ["Before.", "After."], platforms))
        task = await start_gateway(k, ("linechat", server))
        adapter = k.gateway.adapters["linechat"]
        client = await ChatClient.open(server)
        try:
            assert (await client.ask("#s", "max", "hi"))["text"] == "Before."
            server.kick()

            def row() -> Any:
                return next(r for r in k.gateway.status() if r.name == "linechat")

            await until(lambda: row().error is not None, "the drop to be reported")
            assert row().connected is False and "disconnected" in row().error
            adapter.release.set()  # the adapter reconnects by itself now
            await until(lambda: server.bots and row().error is None, "the adapter to be back")
            assert row().connected is True
            assert adapter.attempts == 1 and adapter.reconnect_flags == [False]  # the gateway never called
            assert server.joins == 2
            assert (await client.ask("#s", "max", "again"))["text"] == "After."
        finally:
            adapter.release.set()
            client.close()
            await stop_gateway(k, task)
            await server.close()

    run(scenario())


# ---------------------------------------------------------------------------
# Shutdown
# ---------------------------------------------------------------------------


def test_stop_disconnects_every_adapter_and_finalizes_the_sessions(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat")
    platform_plugin(hermes, "otherchat")
    records = policy_plugin(hermes)

    async def scenario() -> None:
        one, two = await ChatServer().start(), await ChatServer().start()
        config = chat_config(
            hermes,
            ["One.", "Two."],
            {
                "linechat": {"enabled": True, "port": one.port},
                "otherchat": {"enabled": True, "port": two.port},
            },
        )
        k = kernels(hermes, config)
        events = Events(k, "session")
        task = await start_gateway(k, ("linechat", one), ("otherchat", two))
        first, second = await ChatClient.open(one), await ChatClient.open(two)
        assert (await first.ask("#x", "ida", "one?"))["text"] == "One."
        assert (await second.ask("#y", "jon", "two?"))["text"] == "Two."
        ids = {key: s.session_id for key, s in k.gateway.sessions.items()}
        assert set(ids) == {("linechat", "#x"), ("otherchat", "#y")}
        adapters = dict(k.gateway.adapters)

        await stop_gateway(k, task)
        await until(lambda: one.leaves == 1 and two.leaves == 1, "the servers to see the bots leave")
        assert not one.bots and not two.bots
        assert all(not a.is_connected for a in adapters.values())
        assert k.gateway.sessions == {} and k.gateway.adapters == {}
        got = sorted((r["platform"], r["session_id"], r["reason"]) for r in finalized(records))
        assert got == sorted((platform, sid, "gateway_shutdown") for (platform, _), sid in ids.items())
        ended = sorted((e["platform"], e["session_id"]) for e in events.named("session:end"))
        assert ended == sorted((platform, sid) for (platform, _), sid in ids.items())

        first.close()
        second.close()
        await one.close()
        await two.close()

    run(scenario())


class HeldTurn:
    """A plugin whose ``pre_llm_call`` waits for ``release`` (set from the test's loop)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def register(self, ctx: Any) -> None:
        ctx.register_hook("pre_llm_call", self._before_model)

    def _before_model(self, **_: Any) -> None:
        self.started.set()
        assert self.release.wait(DEADLINE)


def test_stop_waits_for_the_turn_not_for_an_adapter_that_awaits_handle_message_in_its_read_loop(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter's read task never ends by itself; the gateway must finish the turn in progress,
    answer it, and stop — without waiting out the drain timeout (made an hour here)."""
    from kernel.gateway import runner

    monkeypatch.setattr(runner, "DRAIN_TIMEOUT", 3600.0)
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes,
            ["First.", "Second."],
            {"linechat": {"enabled": True, "port": server.port, "inline": True}},
        )
        k = kernels(hermes, config)
        held = HeldTurn()
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)
        try:
            held.release.set()
            assert (await client.ask("#z", "ada", "one?"))["text"] == "First."
            held.release.clear()
            k.register(held, name="held-turn")
            await client.say("#z", "ada", "two?")
            await until(held.started.is_set, "the second turn to start")
            k.gateway.stop()
            held.release.set()
            assert (await client.reply(DEADLINE))["text"] == "Second.", "the turn in progress is answered"
            await asyncio.wait_for(task, DEADLINE)
            assert k.gateway.adapters == {}
        finally:
            held.release.set()
            client.close()
            if not task.done():
                await stop_gateway(k, task)
            await server.close()

    run(scenario())


class TurnGate:
    """A plugin holding each pair's first model call until both messages of the pair were dispatched.

    So the second message of a pair always finds its chat busy and waits for the chat's turn.
    """

    def __init__(self) -> None:
        self.dispatched = 0
        self.model_calls = 0
        self._changed = threading.Condition()

    def register(self, ctx: Any) -> None:
        ctx.register_hook("pre_gateway_dispatch", self._dispatch)
        ctx.register_hook("pre_llm_call", self._before_model)

    def _dispatch(self, event: Any, gateway: Any, session_store: Any) -> None:
        with self._changed:
            self.dispatched += 1
            self._changed.notify_all()

    def _before_model(self, **_: Any) -> None:
        with self._changed:
            self.model_calls += 1
            pair = (self.model_calls + 1) // 2
            assert self._changed.wait_for(lambda: self.dispatched >= 2 * pair, DEADLINE)


def test_one_turn_at_a_time_per_chat_and_the_gateway_runs_again_after_stop(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two messages sent together in one chat are answered in order, the second seeing the first;
    then the same kernel's gateway is stopped and run again on a new event loop, and does the same —
    going on with the conversation kept in the session store (sessions.db), under a new session id
    since the stop finalized the first."""
    platform_plugin(hermes, "linechat", env_var="LINECHAT_PORT")  # enabled by $LINECHAT_PORT
    k = kernels(hermes, chat_config(hermes, ["First.", "Second.", "Third.", "Fourth."], {}))
    recorder = HookRecorder().attach(k)
    k.register(TurnGate(), name="turn-gate")

    ids: list[str] = []

    async def one_run(words: tuple[str, str], replies: tuple[str, str], before: list[str]) -> None:
        server = await ChatServer().start()
        monkeypatch.setenv("LINECHAT_PORT", str(server.port))
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)
        try:
            await client.say("#q", "olga", words[0])
            await client.say("#q", "olga", words[1])
            got = [await client.reply(10), await client.reply(10)]
            assert [(r["text"], r["reply_to"]) for r in got] == [(replies[0], "m1"), (replies[1], "m2")]
            session = k.gateway.sessions[("linechat", "#q")]
            assert session.turns == 2
            ids.append(session.session_id)
            last = request_messages(recorder)[-1]
            assert [m["content"] for m in last[1:]] == [*before, words[0], replies[0], words[1]]
        finally:
            client.close()
            await stop_gateway(k, task)
            await server.close()

    run(one_run(("a", "b"), ("First.", "Second."), []))
    assert k.gateway.sessions == {}
    assert (hermes / "gateway" / "sessions.db").is_file()
    run(one_run(("c", "d"), ("Third.", "Fourth."), ["a", "First.", "b", "Second."]))
    assert ids[0] != ids[1]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_gateway_run_answers_over_the_socket_and_stops_cleanly_on_a_signal(
    hermes: Path, stop_signal: signal.Signals
) -> None:
    platform_plugin(hermes, "linechat", hint=HINT)
    records = policy_plugin(hermes)

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, ["Hi from the gateway."], {"linechat": {"enabled": True, "port": server.port}}
        )
        (hermes / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        proc = await asyncio.create_subprocess_exec(
            *CLI,
            "gateway",
            "run",
            "--platform",
            "linechat",
            env=cli_env(hermes),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            loop = asyncio.get_running_loop()
            give_up = loop.time() + DEADLINE
            while not server.bots:
                if proc.returncode is not None or loop.time() > give_up:
                    out, err = await proc.communicate()
                    pytest.fail(f"the gateway never connected (exit {proc.returncode}):\n{out!r}\n{err!r}")
                await asyncio.sleep(0.02)
            client = await ChatClient.open(server)
            reply = await client.ask("#cli", "kim", "hello gateway")
            assert reply == {"chat": "#cli", "text": "Hi from the gateway.", "reply_to": "m1"}

            proc.send_signal(stop_signal)
            out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, f"{out!r}\n{err!r}"
        assert b"starting linechat" in out and b"stopped" in out
        await until(lambda: server.leaves == 1, "the server to see the bot leave")
        got = finalized(records)
        assert [(r["platform"], r["reason"]) for r in got] == [("linechat", "gateway_shutdown")]
        assert got[0]["session_id"] and got[0]["session_id"].startswith("session-")
        client.close()
        await server.close()

    run(scenario())


def test_gateway_run_with_nothing_enabled_says_so(hermes: Path) -> None:
    platform_plugin(hermes, "linechat")
    proc = subprocess.run([*CLI, "gateway", "run"], env=cli_env(hermes), capture_output=True, text=True)
    assert proc.returncode == 1
    assert "no platform is enabled" in proc.stderr


# ---------------------------------------------------------------------------
# Delivery to a home channel
# ---------------------------------------------------------------------------


def test_deliver_uses_the_running_gateway_from_another_thread(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_plugin(hermes, "linechat", cron_var="LINECHAT_HOME")
    monkeypatch.setenv("LINECHAT_HOME", "#news")

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, [], {"linechat": {"enabled": True, "port": server.port, "max_length": 40}}
        )
        k = kernels(hermes, config)
        task = await start_gateway(k, ("linechat", server))
        results = await asyncio.to_thread(k.gateway.deliver, "linechat", "The nightly report is ready.")
        assert [r.success for r in results] == [True]
        results = await asyncio.to_thread(k.gateway.deliver, "linechat", LONG_REPLY)
        assert len(results) == 4 and all(isinstance(r, SendResult) and r.success for r in results)
        await until(lambda: len(server.said) == 5, "the deliveries to arrive")
        assert server.said[0] == {"chat": "#news", "text": "The nightly report is ready.", "reply_to": None}
        assert [s["chat"] for s in server.said] == ["#news"] * 5
        assert (server.joins, server.leaves) == (1, 0)  # through the gateway's own connection
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_deliver_without_a_running_gateway_connects_once(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_plugin(hermes, "linechat", cron_var="LINECHAT_HOME")

    async def scenario() -> None:
        server = await ChatServer().start()
        k = kernels(hermes, chat_config(hermes, [], {"linechat": {"enabled": True, "port": server.port}}))
        monkeypatch.setenv("LINECHAT_HOME", "#alerts")
        results = await asyncio.to_thread(k.gateway.deliver, "linechat", "Disk almost full.")
        assert [r.success for r in results] == [True]
        await until(lambda: server.leaves == 1, "the one-shot adapter to disconnect")
        assert server.said == [{"chat": "#alerts", "text": "Disk almost full.", "reply_to": None}]
        assert (server.joins, server.leaves) == (1, 1)
        assert k.gateway.adapters == {}
        await server.close()

    run(scenario())


def test_deliver_refuses_unknown_disabled_and_homeless_platforms(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_plugin(hermes, "linechat", cron_var="LINECHAT_HOME")
    platform_plugin(hermes, "quiet")
    platform_plugin(hermes, "plain")  # no cron_deliver_env_var
    k = kernels(
        hermes,
        {"gateway": {"platforms": {"linechat": {"enabled": True, "port": 9}, "plain": {"enabled": True}}}},
    )
    with pytest.raises(GatewayError, match=r"no platform named 'nowhere' \(registered: .*linechat"):
        k.gateway.deliver("nowhere", "hi")
    with pytest.raises(
        GatewayError, match=r"platform 'quiet' cannot deliver: not enabled.*gateway\.platforms\.quiet"
    ):
        k.gateway.deliver("quiet", "hi")
    with pytest.raises(
        GatewayError,
        match=r"platform 'linechat' has no home channel: set \$LINECHAT_HOME or gateway\.platforms\.linechat",
    ):
        k.gateway.deliver("linechat", "hi")
    with pytest.raises(
        GatewayError, match=r"platform 'plain' has no home channel: set gateway\.platforms\.plain"
    ):
        k.gateway.deliver("plain", "hi")


def test_the_home_channel_falls_back_to_the_config(hermes: Path, kernels: Callable[..., Kernel]) -> None:
    platform_plugin(hermes, "linechat", cron_var="LINECHAT_HOME")

    async def scenario() -> None:
        server = await ChatServer().start()
        platforms = {"linechat": {"enabled": True, "port": server.port, "home_channel": "#configured"}}
        k = kernels(hermes, chat_config(hermes, [], platforms))
        spec = k.platforms.get("linechat")
        assert k.gateway.home_channel(spec, k.gateway.platform_config(spec)[0]) == "#configured"
        await asyncio.to_thread(k.gateway.deliver, "linechat", "From the config.")
        await until(lambda: server.leaves == 1, "the one-shot adapter to disconnect")
        assert server.said == [{"chat": "#configured", "text": "From the config.", "reply_to": None}]
        await server.close()

    run(scenario())


# ---------------------------------------------------------------------------
# Reset in a chat, a connect that hangs, indentation, deliver from a coroutine
# ---------------------------------------------------------------------------


def test_new_in_a_chat_starts_a_new_session_for_that_chat_only(
    hermes: Path, kernels: Callable[..., Kernel]
) -> None:
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        config = chat_config(
            hermes, ["First.", "Second.", "Third."], {"linechat": {"enabled": True, "port": server.port}}
        )
        k = kernels(hermes, config)
        task = await start_gateway(k, ("linechat", server))
        client = await ChatClient.open(server)
        assert (await client.ask("#a", "ann", "hello"))["text"] == "First."
        assert (await client.ask("#b", "bob", "hello"))["text"] == "Second."
        before_a = k.gateway.sessions[("linechat", "#a")].session_id
        before_b = k.gateway.sessions[("linechat", "#b")].session_id
        assert (await client.ask("#a", "ann", "/new"))["text"] == "Started a new conversation."
        after_a = k.gateway.sessions[("linechat", "#a")]
        assert after_a.session_id != before_a and after_a.messages == []
        assert k.gateway.sessions[("linechat", "#b")].session_id == before_b
        assert (await client.ask("#a", "ann", "again"))["text"] == "Third."
        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_a_connect_that_never_returns_is_timed_out_and_retried(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernel.gateway import platforms

    monkeypatch.setattr(platforms, "CONNECT_TIMEOUT", 0.2)
    monkeypatch.setattr(platforms, "BACKOFF_FIRST", 0.01)
    platform_plugin(hermes, "linechat")

    async def scenario() -> None:
        server = await ChatServer().start()
        # The first connect fails; the later ones hang until the test sets `release`.
        config = chat_config(
            hermes, ["Up."], {"linechat": {"enabled": True, "port": server.port, "fail_first": 1}}
        )
        k = kernels(hermes, config)
        task = asyncio.create_task(k.gateway.run())
        await until(lambda: "linechat" in k.gateway.adapters, "the adapter to be made")
        adapter = k.gateway.adapters["linechat"]
        await until(lambda: adapter.attempts >= 3, "another connect attempt after a hanging one timed out")
        assert "TimeoutError" in (k.gateway.errors.get("linechat") or "")
        adapter.release.set()
        await until(lambda: adapter.is_connected, "the connection once connect returns")
        await until(lambda: "linechat" not in k.gateway.errors, "the error to clear")
        client = await ChatClient.open(server)
        assert (await client.ask("#x", "xi", "ping"))["text"] == "Up."
        client.close()
        await stop_gateway(k, task)
        await server.close()

    run(scenario())


def test_split_message_keeps_the_indentation_of_the_next_line() -> None:
    text = "Plugins (2):\n  ✓ one v1\n  ✓ two v2"
    assert split_message(text, 12) == ["Plugins (2):", "  ✓ one v1", "  ✓ two v2"]


def test_deliver_inside_the_gateways_loop_says_to_use_adeliver(
    hermes: Path, kernels: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    platform_plugin(hermes, "linechat", cron_var="LINECHAT_HOME")
    monkeypatch.setenv("LINECHAT_HOME", "#news")

    async def scenario() -> None:
        server = await ChatServer().start()
        k = kernels(hermes, chat_config(hermes, [], {"linechat": {"enabled": True, "port": server.port}}))
        task = await start_gateway(k, ("linechat", server))
        with pytest.raises(GatewayError, match="adeliver"):
            k.gateway.deliver("linechat", "would block")
        results = await k.gateway.adeliver("linechat", "From the loop.")
        assert [r.success for r in results] == [True]
        await until(lambda: len(server.said) == 1, "the delivery")
        assert server.said == [{"chat": "#news", "text": "From the loop.", "reply_to": None}]
        await stop_gateway(k, task)
        await server.close()

    run(scenario())
