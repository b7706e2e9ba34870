"""One model call's arguments, gathered once (``ChatRequest``), and the chat-completions body made of them."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .calls import send_tool_parts
from .parsing import _function_schema
from .profile import OMIT_TEMPERATURE, ProviderProfile

#: The keywords a transport's ``complete`` names; any other keyword is context for the profile's hooks.
NAMED_OPTIONS = ("model", "tools", "temperature", "max_tokens", "session_id", "task_id", "extra_body")

_NO_CONTEXT: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class ChatRequest:
    """What ``complete(messages, **kwargs)`` was asked, split once into the named options and the context.

    ``context`` holds every other keyword (``turn_id``, a profile's own arguments, ...): it is handed to
    the profile's ``build_extra_body`` / ``build_api_kwargs_extras`` and is read-only.  ``model`` only
    names the model the body's defaults are built for: a transport asks its own model and fallbacks.
    """

    messages: Sequence[Mapping[str, Any]]
    model: str | None = None
    tools: Sequence[Mapping[str, Any]] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    session_id: str | None = None
    task_id: str | None = None
    extra_body: Mapping[str, Any] | None = None
    context: Mapping[str, Any] = field(default_factory=lambda: _NO_CONTEXT)

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]], kwargs: Mapping[str, Any]) -> ChatRequest:
        """The request for ``complete(messages, **kwargs)``."""
        named = {name: kwargs[name] for name in NAMED_OPTIONS if name in kwargs}
        context = {key: value for key, value in kwargs.items() if key not in NAMED_OPTIONS}
        return cls(messages, **named, context=MappingProxyType(context) if context else _NO_CONTEXT)

    @property
    def turn_id(self) -> Any:
        """The agent turn this call belongs to (a context keyword), for the api hooks."""
        return self.context.get("turn_id")


def chat_body(profile: ProviderProfile, request: ChatRequest, model: str) -> dict[str, Any]:
    """The JSON body asking ``model``, with ``profile``'s hooks applied in the documented order."""
    prepared = copy.deepcopy([dict(m) for m in request.messages])
    send_tool_parts(prepared, images=getattr(profile, "supports_vision_tool_messages", True) is not False)
    result = profile.prepare_messages(prepared)
    if result is not None:
        prepared = list(result)
    body: dict[str, Any] = {"model": model, "messages": prepared}
    if request.tools:
        body["tools"] = [_function_schema(t) for t in request.tools]
    temperature = request.temperature
    if profile.fixed_temperature is OMIT_TEMPERATURE:
        temperature = None
    elif profile.fixed_temperature is not None:
        temperature = profile.fixed_temperature
    if temperature is not None:
        body["temperature"] = temperature
    max_tokens = request.max_tokens
    if max_tokens is None:
        max_tokens = profile.get_max_tokens(model)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    context = dict(request.context)  # a profile's hooks take it as keywords
    body.update(profile.build_extra_body(session_id=request.session_id, **context) or {})
    extras, top_level = profile.build_api_kwargs_extras(**context) or ({}, {})
    body.update(extras or {})
    body.update(top_level or {})
    if request.extra_body:
        body.update(request.extra_body)
    return body
