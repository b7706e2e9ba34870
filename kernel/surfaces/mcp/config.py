"""The ``mcp_servers:`` section of ``config.yaml``, read into server configurations."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    pass


DEFAULT_TIMEOUT = 300.0  # seconds a tool call may take
DEFAULT_CONNECT_TIMEOUT = 60.0  # seconds to start, initialize and list the tools
BACKOFF_FIRST = 0.5  # first delay before a reconnection; doubles up to BACKOFF_MAX
BACKOFF_MAX = 60.0
STABLE_AFTER = 30.0  # a connection that lived this long restarts the backoff from the beginning
CLOSE_TIMEOUT = 10.0  # shutdown waits this long for the servers to stop before cancelling them
INSTALL_HINT = "pip install 'hermes-kernel[mcp]'"

KNOWN_KEYS = (
    "command",
    "args",
    "env",
    "url",
    "headers",
    "transport",
    "timeout",
    "connect_timeout",
    "enabled",
    "tools",
)
# Keys of Hermes's own MCP client that this kernel does not implement: accepted with a warning.
UNSUPPORTED_KEYS = frozenset(
    {
        "auth",
        "oauth",
        "ssl_verify",
        "client_cert",
        "client_key",
        "skip_preflight",
        "protocol",
        "supports_parallel_tool_calls",
        "keepalive_interval",
        "idle_timeout_seconds",
        "max_lifetime_seconds",
        "trust",
        "sampling",
        "elicitation",
    }
)
HTTP_TRANSPORTS = ("http", "streamable-http", "streamable_http", "streamablehttp")
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")

# Patterns used through re's own cache (compiled on first use, not at import).
_VAR = r"\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)\}"
_UNSAFE = r"[^A-Za-z0-9_]"


class ConfigProblem(ValueError):
    """A ``mcp_servers`` entry that cannot be used; the message names config.yaml and the key."""


# --------------------------------------------------------------------------- configuration


class ServerConfig:
    """One validated ``mcp_servers.<name>`` entry (strings already interpolated).

    ``transport`` is ``"stdio"`` or ``"http"``; ``label`` is what the record's
    description shows, built from the raw config so that no interpolated secret appears.
    (A plain class rather than a dataclass: this module is imported on every start.)
    """

    def __init__(self, name: str, transport: str, label: str = "", enabled: bool = True) -> None:
        self.name = name
        self.transport = transport
        self.label = label
        self.enabled = enabled
        self.command = ""
        self.args: list[str] = []
        self.env: dict[str, str] | None = None
        self.url = ""
        self.headers: dict[str, str] = {}
        self.timeout = DEFAULT_TIMEOUT
        self.connect_timeout = DEFAULT_CONNECT_TIMEOUT
        self.include: list[str] | None = None
        self.exclude: list[str] = []
        self.warnings: list[str] = []


def _where(name: str, key: str = "") -> str:
    return f"config.yaml: 'mcp_servers.{name}{'.' + key if key else ''}'"


def interpolate(value: Any, path: str, environ: Mapping[str, str], warnings: list[str]) -> Any:
    """``value`` with ``${VAR}`` / ``${env:VAR}`` replaced in every string, recursively.

    ``path`` names the key (``mcp_servers.files.args``) for the warning given
    when a variable is not set: it then stays as written.  Values are never
    put in a warning, only variable names.
    """
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            var = match.group(2)
            if var in environ:
                return environ[var]
            warnings.append(
                f"config.yaml: '{path}': ${{{var}}} is not set in the environment; left as written"
            )
            return match.group(0)

        return re.sub(_VAR, replace, value)
    if isinstance(value, dict):
        return {k: interpolate(v, f"{path}.{k}", environ, warnings) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, f"{path}[{i}]", environ, warnings) for i, v in enumerate(value)]
    return value


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigProblem(f"{where} must be a string, not {type(value).__name__}")


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigProblem(f"{where} must be a positive number of seconds, not {value!r}")
    return float(value)


def _patterns(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigProblem(f"{where} must be a list of tool names or glob patterns")


def parse_server(name: str, raw: Any, environ: Mapping[str, str]) -> ServerConfig:
    """Validate one ``mcp_servers`` entry; raise :class:`ConfigProblem` naming the key at fault."""
    if not name or not isinstance(name, str):
        raise ConfigProblem(f"config.yaml: 'mcp_servers' has an entry with an empty name: {name!r}")
    if not isinstance(raw, dict):
        raise ConfigProblem(
            f"{_where(name)} must be a mapping (command/args/env for stdio, or url/headers for HTTP), "
            f"not {type(raw).__name__}"
        )
    warnings: list[str] = []
    for key in raw:
        if key in KNOWN_KEYS:
            continue
        if key in UNSUPPORTED_KEYS:
            warnings.append(f"{_where(name, str(key))} is not supported by hermes-kernel; ignored")
        else:
            close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            warnings.append(f"{_where(name, str(key))} is not a known key; ignored{hint}")
    data = interpolate({k: raw[k] for k in KNOWN_KEYS if k in raw}, f"mcp_servers.{name}", environ, warnings)

    enabled = data.get("enabled", True)
    if isinstance(enabled, str) and enabled.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        enabled = enabled.strip().lower() in TRUE_WORDS
    if not isinstance(enabled, bool):
        raise ConfigProblem(f"{_where(name, 'enabled')} must be true or false, not {enabled!r}")

    command, url = data.get("command"), data.get("url")
    transport = data.get("transport")
    if transport is not None:
        if isinstance(transport, str) and transport.lower() == "sse":
            raise ConfigProblem(
                f"{_where(name, 'transport')}: SSE servers are not supported; use the server's "
                "Streamable HTTP endpoint (often .../mcp)"
            )
        if not isinstance(transport, str) or transport.lower() not in ("stdio", *HTTP_TRANSPORTS):
            raise ConfigProblem(
                f"{_where(name, 'transport')} must be 'stdio' or 'http' (Streamable HTTP), not {transport!r}"
            )
        transport = "stdio" if transport.lower() == "stdio" else "http"
    if command is not None and url is not None:
        raise ConfigProblem(f"{_where(name)} has both 'command' (stdio) and 'url' (HTTP); keep one")
    if command is None and url is None:
        raise ConfigProblem(f"{_where(name)} needs 'command' (a stdio server) or 'url' (an HTTP server)")
    kind = "stdio" if command is not None else "http"
    if transport is not None and transport != kind:
        key = "command" if kind == "stdio" else "url"
        raise ConfigProblem(f"{_where(name, 'transport')} is {transport!r} but the entry has '{key}'")

    cfg = ServerConfig(name, kind, enabled=enabled)
    cfg.warnings = warnings
    if kind == "stdio":
        import shlex  # for the label; imported here, off the start-up path

        if not isinstance(command, str) or not command.strip():
            raise ConfigProblem(f"{_where(name, 'command')} must be a non-empty string (the program to run)")
        cfg.command = command
        args = data.get("args", [])
        if not isinstance(args, list):
            raise ConfigProblem(
                f"{_where(name, 'args')} must be a list of arguments, not {type(args).__name__}"
            )
        cfg.args = [_scalar(a, _where(name, f"args[{i}]")) for i, a in enumerate(args)]
        env = data.get("env")
        if env is not None:
            if not isinstance(env, dict):
                raise ConfigProblem(f"{_where(name, 'env')} must map variable names to values")
            cfg.env = {str(k): _scalar(v, _where(name, f"env.{k}")) for k, v in env.items()}
        for key in ("url", "headers"):
            if key in data:
                warnings.append(f"{_where(name, key)} is for HTTP servers; ignored for a stdio server")
        raw_args: Any = raw.get("args") if isinstance(raw.get("args"), list) else []
        cfg.label = "stdio: " + _clip(shlex.join([str(raw.get("command")), *(str(a) for a in raw_args)]))
    else:
        if not isinstance(url, str) or urlsplit(url.strip()).scheme not in ("http", "https"):
            raise ConfigProblem(f"{_where(name, 'url')} must be an http:// or https:// URL, not {url!r}")
        cfg.url = url.strip()
        headers = data.get("headers", {})
        if not isinstance(headers, dict):
            raise ConfigProblem(f"{_where(name, 'headers')} must map header names to values")
        cfg.headers = {str(k): _scalar(v, _where(name, f"headers.{k}")) for k, v in headers.items()}
        for key in ("args", "env"):
            if key in data:
                warnings.append(f"{_where(name, key)} is for stdio servers; ignored for an HTTP server")
        cfg.label = "http: " + _clip(_public_url(str(raw.get("url"))))

    if "timeout" in data:
        cfg.timeout = _seconds(data["timeout"], _where(name, "timeout"))
    if "connect_timeout" in data:
        cfg.connect_timeout = _seconds(data["connect_timeout"], _where(name, "connect_timeout"))

    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, dict):
            raise ConfigProblem(f"{_where(name, 'tools')} must be a mapping with 'include' and/or 'exclude'")
        for key in tools:
            if key not in ("include", "exclude"):
                warnings.append(f"{_where(name, f'tools.{key}')} is not supported; ignored")
        if tools.get("include") is not None:
            cfg.include = _patterns(tools["include"], _where(name, "tools.include"))
        if tools.get("exclude") is not None:
            cfg.exclude = _patterns(tools["exclude"], _where(name, "tools.exclude"))
    return cfg


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _public_url(url: str) -> str:
    """``url`` without user info, query or fragment (which may hold secrets)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
