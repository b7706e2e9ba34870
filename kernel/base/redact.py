"""Secrets and terminal controls out of text and data: what logs, error messages and the CLI show.

No logging here (the stdlib's ``logging`` is not imported): the command line and error messages use
these without paying for the logging machinery (:mod:`kernel.base.log` builds on them).
"""

from __future__ import annotations

import functools
import re
from typing import Any

# Words of a key name that make its value a secret, alone or as the end of a longer word ("apitoken",
# "clientsecret", "dbpassword"): "api_key", "apiKey", "x-api-key", "accessToken", "Authorization"... are
# secret; "input_tokens", "max_tokens" and "tokenizer" are not.
_SECRET_WORDS = frozenset(
    {"token", "secret", "secrets", "password", "passwords", "passwd", "passphrase", "authorization"}
    | {"credential", "credentials", "bearer", "apikey", "apikeys", "cookie", "cookies"}
)
# "<owner> key": "api key", "private key", "signing key"... ("privatekey" glued too); "key" alone is not.
_KEY_OWNERS = ("api", "private", "access", "secret", "auth", "signing", "encryption")
_KEY_WORDS = ("key", "keys")
_SECRET_ENDINGS = tuple(_SECRET_WORDS) + tuple(o + k for o in _KEY_OWNERS for k in _KEY_WORDS)
# "tokens" counts model tokens, unless a kind of credential precedes it ("refresh_tokens", "accesstokens").
_TOKEN_KINDS = ("access", "refresh", "auth", "api", "bearer", "session", "oauth", "csrf", "bot", "client")
# A secret word followed by one of these names a property of the secret, not the secret: "token_count".
_ABOUT = frozenset(
    {"count", "counts", "limit", "limits", "usage", "budget", "length", "len", "size", "type", "types"}
    | {"ttl", "expiry", "expires", "expiration", "url", "uri", "endpoint"}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_BREAK = re.compile(r"[^a-z0-9]+")


def is_secret_key(name: Any) -> bool:
    """Whether a key (of a log field, a mapping, an environment variable) names a secret.

    The name is split into words at separators and camelCase humps, in any
    case, trailing digits dropped.  It is a secret when a word is or ends with
    a secret word (``token``, ``secret``, ``password``, ``authorization``...:
    ``auth_token``, ``apitoken``, ``CLIENTSECRET``), ends with a kind of key
    (``apikey``, ``privatekey``) or is ``key`` after such an owner (``api key``,
    ``private key``, ``access key``), or is ``tokens`` after a kind of
    credential (``refresh_tokens``) -- unless the next word names a property
    of it (``token_count``, ``token_url``).  ``input_tokens``, ``max_tokens``,
    ``tokenizer`` and ``keyboard`` are not secrets.
    """
    text = str(name)
    return _cached_secret_name(text) if len(text) <= 200 else _is_secret_name(text)


def _is_secret_name(name: str) -> bool:
    words = [w.rstrip("0123456789") for w in _WORD_BREAK.split(_CAMEL.sub("_", name).lower())]
    words = [w for w in words if w]
    for index, word in enumerate(words):
        before = words[index - 1] if index else ""
        if not (
            word.endswith(_SECRET_ENDINGS)
            or (word in _KEY_WORDS and before.endswith(_KEY_OWNERS))
            or (word.endswith("tokens") and (word[:-6] or before).endswith(_TOKEN_KINDS))
        ):
            continue
        if index + 1 < len(words) and words[index + 1] in _ABOUT:
            continue
        return True
    return False


_cached_secret_name = functools.lru_cache(maxsize=4096)(_is_secret_name)


#: How deep :func:`redacted` looks into nested mappings and lists; a deeper one is replaced by a marker.
REDACT_DEPTH = 20
_TOO_DEEP = "<nested too deep: not shown>"


def redacted(value: Any, depth: int = 0) -> Any:
    """``value`` with the values of secret-named keys replaced, in nested mappings and lists too; a
    mapping or list nested deeper than :data:`REDACT_DEPTH` is replaced whole by a marker."""
    if isinstance(value, dict | list | tuple) and depth > REDACT_DEPTH:
        return _TOO_DEEP
    if isinstance(value, dict):
        return {
            k: (_REDACTED if is_secret_key(k) and v not in (None, "") else redacted(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redacted(v, depth + 1) for v in value]
    return value


_REDACTED = "***"

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# Query parameters that carry credentials although their names are not secret words.
_SECRET_PARAMS = frozenset({"key", "sig", "signature", "auth", "code"})


def mask_url(url: str) -> str:
    """``url`` without its credentials: the user info becomes ``***@`` and secret-named query values
    ``***`` (``https://user:KEY@host/v1?api-key=K`` -> ``https://***@host/v1?api-key=***``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            masked = [(k, "***" if is_secret_key(k) or k.lower() in _SECRET_PARAMS else v) for k, v in pairs]
            query = urlencode(masked, safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<a URL>"


def mask_urls(text: str) -> str:
    """``text`` with every URL in it masked (see :func:`mask_url`)."""
    return _URL.sub(lambda match: mask_url(match.group()), text) if "://" in text else text


# ``name=value``, ``name: 'value'``, ``"name": "value"`` in free text.  Only the name and its sign are
# matched, so that the value of a name that is not secret is searched too ("Error: token=abc").
# A name starts where a word does: tried inside a long word too, the search would be quadratic.
_NAME_SIGN = re.compile(
    r"""(?P<q>["']?)(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P=q)(?P<sep>[ \t]*[=:][ \t]*)"""
)
# A value: quoted, or running to a space or punctuation (``Bearer``/``Basic`` and what follows together).
_VALUE = re.compile(
    r""""[^"\n]*"|'[^'\n]*'|(?:(?:bearer|basic|token)[ \t]+)?[^\s,;&'"()\[\]{}<>]+""", re.IGNORECASE
)
_BEARER = re.compile(r"\b(?P<scheme>bearer|basic)(?P<space>[ \t]+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)


def _hide_values(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _NAME_SIGN.finditer(text):
        if match.start() < pos or not is_secret_key(match["name"]):
            continue
        value = _VALUE.match(text, match.end())
        if value is None:
            continue
        shown = value.group()
        quoted = shown[:1] in "'\"" and len(shown) >= 2
        if shown in ("''", '""', _REDACTED) or (
            # "api_key: not set" is prose; "api_key: sk-abc123" or a long opaque word is not.
            ":" in match["sep"]
            and not quoted
            and not (any(c.isdigit() for c in shown) or len(shown) >= 16 or " " in shown)
        ):
            continue
        out += [text[pos : value.start()], f"{shown[0]}{_REDACTED}{shown[0]}" if quoted else _REDACTED]
        pos = value.end()
    return "".join([*out, text[pos:]]) if out else text


def redact_text(text: str) -> str:
    """``text`` (an exception's message, a log line's text) without the secrets it spells out: URLs
    masked (:func:`mask_url`), the value of every secret-named ``name=value`` / ``"name": "value"``
    and the credential after ``Bearer`` replaced by ``***``."""
    text = mask_urls(text)
    if "=" in text or ":" in text:
        text = _hide_values(text)
    return _BEARER.sub(lambda m: f"{m['scheme']}{m['space']}{_REDACTED}", text)


# Characters that would steer a terminal (C0 but tab and newline, DEL, C1) or reorder the text shown
# (bidirectional overrides): shown as escapes, never passed through.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` as a terminal may show it: control characters as visible escapes (``\\x1b``,
    ``\\u202e``), URLs without their credentials."""
    return _CONTROL.sub(_escape, mask_urls(text))
