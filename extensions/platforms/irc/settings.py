"""The IRC platform's settings: ``gateway.platforms.irc`` (or ``IRC_*``) read once into a frozen object.

The section's keys and their shapes are ``config_schema.CONFIG_SCHEMA``, which the plugin gives the
kernel with its platform: the kernel checks ``gateway.platforms.irc`` with it once plugins are loaded
(an unknown key, a value of the wrong type).  :meth:`IrcSettings.from_config` is the one place the
adapter's values are converted and checked, for every way they arrive (the file, ``extra``, the
``IRC_*`` variables, a ``PlatformConfig`` built in code).  A :class:`ValueError` names the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kernel.gateway import PlatformConfig

from .text import clean

_WHERE = "gateway.platforms.irc"
_NICK_RE = re.compile(r"^[A-Za-z\[\]\\^_`{|}][A-Za-z0-9\[\]\\^_`{|}-]*$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class IrcSettings:
    """The adapter's settings, read from ``gateway.platforms.irc`` (see ``docs/irc.md``)."""

    server: str
    port: int = 6667
    tls: bool = False
    tls_verify: bool = True
    tls_ca_file: str | None = None
    password: str | None = None
    nick: str = "hermes"
    username: str = "hermes"
    realname: str = "Hermes agent"
    channels: tuple[tuple[str, str | None], ...] = ()
    encoding: str = "utf-8"
    flood_burst: int = 4
    flood_interval: float = 0.5
    connect_timeout: float = 30.0
    reconnect_delay: float = 2.0
    reconnect_max_delay: float = 300.0
    ping_interval: float = 120.0
    ping_timeout: float = 60.0
    quit_message: str = "Goodbye"
    reply_prefix: bool = True
    keep_formatting: bool = False
    ignore_nicks: tuple[str, ...] = ()
    max_message_length: int = 400

    @classmethod
    def from_config(cls, config: PlatformConfig | Mapping[str, Any]) -> IrcSettings:
        """Read and check the settings; a :class:`ValueError` names the key that is wrong."""
        if isinstance(config, PlatformConfig):
            data: dict[str, Any] = dict(config.extra)
            if config.token and not data.get("password"):
                data["password"] = config.token
        else:
            data = dict(config)
            data.update(data.pop("extra", None) or {})
        server, port_value = _server_and_port(data)
        tls = _bool(data, "tls", False)
        nick = _text(data, "nick") or cls.nick
        if not _NICK_RE.match(nick):
            raise ValueError(f"{_WHERE}: 'nick' {nick!r} is not a valid IRC nickname")
        username = _text(data, "username") or nick
        if re.search(r"[\s@\x00-\x1f]", username):
            raise ValueError(f"{_WHERE}: 'username' {username!r} may not hold spaces or '@'")
        encoding = _text(data, "encoding") or "utf-8"
        try:
            "".encode(encoding)
        except LookupError:
            raise ValueError(f"{_WHERE}: unknown 'encoding' {encoding!r}") from None
        return cls(
            server=server,
            port=_int(data, "port", 6697 if tls else 6667, value=port_value, low=1, high=65535),
            tls=tls,
            tls_verify=_bool(data, "tls_verify", True),
            tls_ca_file=_text(data, "tls_ca_file"),
            password=_text(data, "password", strip=False),
            nick=nick,
            username=username,
            realname=clean(_text(data, "realname") or cls.realname) or cls.realname,
            channels=tuple(_channels(data.get("channels"))),
            encoding=encoding,
            flood_burst=_int(data, "flood_burst", cls.flood_burst, low=1, high=1000),
            flood_interval=_float(data, "flood_interval", cls.flood_interval, low=0.0),
            connect_timeout=_float(data, "connect_timeout", cls.connect_timeout, low=0.1),
            reconnect_delay=_float(data, "reconnect_delay", cls.reconnect_delay, low=0.01),
            reconnect_max_delay=_float(data, "reconnect_max_delay", cls.reconnect_max_delay, low=0.01),
            ping_interval=_float(data, "ping_interval", cls.ping_interval, low=0.0),
            ping_timeout=_float(data, "ping_timeout", cls.ping_timeout, low=0.1),
            quit_message=clean(_text(data, "quit_message") or "") or cls.quit_message,
            reply_prefix=_bool(data, "reply_prefix", True),
            keep_formatting=_bool(data, "keep_formatting", False),
            ignore_nicks=tuple(_names(data.get("ignore_nicks"), "ignore_nicks")),
            max_message_length=_int(data, "max_message_length", cls.max_message_length, low=16),
        )

    @property
    def where(self) -> str:
        """The server as a URL, for messages: ``irc://host:6667`` or ``ircs://host:6697``."""
        return f"{'ircs' if self.tls else 'irc'}://{self.server}:{self.port}"


def _server_and_port(data: Mapping[str, Any]) -> tuple[str, Any]:
    """The host (``server`` or ``host``, ``host:port`` and ``[v6]:port`` split), and the port value."""
    server = _text(data, "server") or _text(data, "host")
    if not server:
        raise ValueError(f"{_WHERE}: 'server' (the IRC server's host name) is not set")
    port_value = data.get("port")
    match = re.match(r"^\[([^\]]+)\](?::(\d+))?$", server) or re.match(r"^([^:]+):(\d+)$", server)
    if match:
        server = match.group(1)
        if port_value in (None, "") and match.group(2):
            port_value = match.group(2)
    return server, port_value


def _text(data: Mapping[str, Any], key: str, strip: bool = True) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{_WHERE}: '{key}' must be a string, not {type(value).__name__}")
    text = str(value)
    if strip:
        text = text.strip()
    return text or None


def _bool(data: Mapping[str, Any], key: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{_WHERE}: '{key}' must be true or false, not {value!r}")


def _number(data: Mapping[str, Any], key: str, default: Any, kind: type, value: Any = None) -> Any:
    value = data.get(key) if value is None else value
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"{_WHERE}: '{key}' must be a number, not {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{_WHERE}: '{key}' must be a number, not {value!r}") from None


def _int(
    data: Mapping[str, Any], key: str, default: int, *, value: Any = None, low: int, high: int = 10**9
) -> int:
    number: int = _number(data, key, default, int, value)
    if not low <= number <= high:
        raise ValueError(f"{_WHERE}: '{key}' must be between {low} and {high}, not {number}")
    return number


def _float(data: Mapping[str, Any], key: str, default: float, *, low: float) -> float:
    number: float = _number(data, key, default, float)
    if not number >= low:
        raise ValueError(f"{_WHERE}: '{key}' must be at least {low}, not {number}")
    return number


def _names(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.replace(",", " ").split()
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise ValueError(f"{_WHERE}: '{key}' must be a list of names or a comma-separated string")


def _channels(value: Any) -> Iterable[tuple[str, str | None]]:
    """``["#a", "#b key"]`` or ``"#a, #b"``: (channel, key) pairs; a bare name gets a ``#``."""
    if isinstance(value, str):
        entries = [e for e in value.split(",") if e.strip()]
    else:
        entries = _names(value, "channels")
    seen: set[str] = set()
    for entry in entries:
        parts = entry.split()
        name, key = parts[0], (parts[1] if len(parts) > 1 else None)
        if name[0] not in "#&+!":
            name = "#" + name
        if re.search(r"[\x00-\x20,\x07]", name) or len(parts) > 2:
            raise ValueError(f"{_WHERE}: bad channel {entry!r} (write '#name' or '#name key')")
        if name.lower() not in seen:
            seen.add(name.lower())
            yield name, key
