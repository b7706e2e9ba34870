"""``agent.plugin_llm`` for plugins written for Hermes Agent.

The result types and the trust error are the kernel's own (:mod:`kernel.llm`),
so what ``ctx.llm`` returns is a ``PluginLlmCompleteResult`` /
``PluginLlmStructuredResult`` of this module and what it raises for a refused
override is its ``PluginLlmTrustError``.  ``PluginLlm`` is the type of
``ctx.llm`` for ``isinstance``; built directly, as some plugins do
(``PluginLlm(plugin_id=...)``), it calls the current kernel's model for the
plugin that builds it (the plugin being loaded, else the plugin whose module
makes the call, else the id given): a plugin cannot borrow another's grant.
``PluginLlmTextInput`` / ``PluginLlmImageInput`` are read by
``ctx.llm.complete_structured`` like the equivalent dicts.

``make_plugin_llm_for_test`` (and its ``_TrustPolicy``) build a facade that
answers from a caller the test supplies, with Hermes Agent's arguments
(``messages``, ``provider_override``, ``model_override``,
``profile_override``, ``temperature``, ``max_tokens``, ``timeout``,
``extra_body``) and Hermes Agent's reply, ``(provider, model, response)``
with an OpenAI-shaped ``response``; no kernel is needed for it.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import llm as _llm
from ...base.config import section
from ...core.api import kernel_of, record_of
from ...llm import (
    PluginLlmCompleteResult,
    PluginLlmError,
    PluginLlmStructuredResult,
    PluginLlmTrustError,
    PluginLlmUsage,
)
from .. import host

if TYPE_CHECKING:
    import types

    from ...core.kernel import Kernel

__all__ = [
    "PluginLlm",
    "PluginLlmCompleteResult",
    "PluginLlmError",
    "PluginLlmImageInput",
    "PluginLlmInput",
    "PluginLlmStructuredResult",
    "PluginLlmTextInput",
    "PluginLlmTrustError",
    "PluginLlmUsage",
    "_TrustPolicy",
    "make_plugin_llm_for_test",
]

# How far up the call stack PluginLlm(...) looks for the plugin module that builds it.
_MAX_FRAMES = 64


# --------------------------------------------------------------------------
# Input blocks
# --------------------------------------------------------------------------


class _Block(Mapping[str, Any]):
    """An input block that also reads as the dict ``ctx.llm.complete_structured`` takes."""

    @abc.abstractmethod
    def _fields(self) -> dict[str, Any]:
        """The block as the plain dict ``ctx.llm`` reads."""

    def __getitem__(self, key: str) -> Any:
        return self._fields()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())


@dataclass(eq=True)
class PluginLlmTextInput(_Block):
    """A text block of ``complete_structured``'s ``input``."""

    text: str
    type: str = "text"

    def _fields(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(eq=True)
class PluginLlmImageInput(_Block):
    """An image block: ``data`` (bytes, with its ``mime_type``) or ``url`` (``http(s):`` or ``data:``)."""

    data: bytes | None = None
    url: str | None = None
    mime_type: str = "image/png"
    file_name: str = ""
    type: str = "image"

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"type": self.type, "mime_type": self.mime_type, "file_name": self.file_name}
        if self.data is not None:
            fields["data"] = self.data
        if self.url:
            fields["url"] = self.url
        return fields


PluginLlmInput = PluginLlmTextInput | PluginLlmImageInput | dict[str, Any]


# --------------------------------------------------------------------------
# The trust policy of a test facade
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _TrustPolicy:
    """Which overrides a facade made by :func:`make_plugin_llm_for_test` allows (Hermes Agent's fields)."""

    plugin_id: str
    allow_provider_override: bool = False
    allowed_providers: frozenset[str] | None = None  # None: no allow-list
    allow_any_provider: bool = False
    allow_model_override: bool = False
    allowed_models: frozenset[str] | None = None
    allow_any_model: bool = False
    allow_agent_id_override: bool = False
    allow_profile_override: bool = False


def _allow_list(raw: Any) -> tuple[frozenset[str] | None, bool]:
    if not isinstance(raw, list):
        return None, False
    names = {item.strip().lower() for item in raw if isinstance(item, str)}
    return frozenset(names - {"", "*"}), "*" in names


def _policy_from_config(kernel: Kernel | None, plugin_id: str) -> _TrustPolicy:
    """``plugins.entries.<plugin_id>.llm`` of the kernel's config as a policy; none allows nothing."""
    entries = section(kernel.config, "plugins", "entries") if kernel is not None else None
    entry = entries.get(plugin_id) if isinstance(entries, Mapping) else None
    gate = entry.get("llm") if isinstance(entry, Mapping) else None
    if not isinstance(gate, Mapping):
        return _TrustPolicy(plugin_id)
    providers, any_provider = _allow_list(gate.get("allowed_providers"))
    models, any_model = _allow_list(gate.get("allowed_models"))
    return _TrustPolicy(
        plugin_id,
        allow_provider_override=gate.get("allow_provider_override") is True,
        allowed_providers=providers,
        allow_any_provider=any_provider,
        allow_model_override=gate.get("allow_model_override") is True,
        allowed_models=models,
        allow_any_model=any_model,
        allow_agent_id_override=gate.get("allow_agent_id_override") is True,
        allow_profile_override=gate.get("allow_profile_override") is True,
    )


def _check(
    policy: _TrustPolicy, provider: str | None, model: str | None, agent_id: str | None, profile: str | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """The overrides ``policy`` lets through (stripped); :class:`PluginLlmTrustError` for one it refuses."""
    base = f"plugins.entries.{policy.plugin_id}.llm"

    def gate(what: str, value: str, allowed: bool, flag: str) -> None:
        if not allowed:
            raise PluginLlmTrustError(
                f"plugin '{policy.plugin_id}' may not choose the {what} ({value!r}): set {base}.{flag}: true"
            )

    def listed(what: str, value: str, names: frozenset[str] | None, any_name: bool, key: str) -> None:
        if not any_name and names is not None and value.strip().lower() not in names:
            raise PluginLlmTrustError(
                f"plugin '{policy.plugin_id}' may not use the {what} {value!r}: it is not in {base}.{key}"
            )

    if provider:
        gate("provider", provider, policy.allow_provider_override, "allow_provider_override")
        listed("provider", provider, policy.allowed_providers, policy.allow_any_provider, "allowed_providers")
    if model:
        gate("model", model, policy.allow_model_override, "allow_model_override")
        listed("model", model, policy.allowed_models, policy.allow_any_model, "allowed_models")
    if agent_id:
        gate("agent id", agent_id, policy.allow_agent_id_override, "allow_agent_id_override")
    if profile:
        gate("auth profile", profile, policy.allow_profile_override, "allow_profile_override")
    return (
        provider.strip() if provider else None,
        model.strip() if model else None,
        agent_id or None,
        profile.strip() if profile else None,
    )


# --------------------------------------------------------------------------
# Reading an OpenAI-shaped response (what a test caller returns)
# --------------------------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _reply_text(response: Any) -> str:
    try:
        content = _get(_get(_get(response, "choices")[0], "message"), "content")
    except (IndexError, KeyError, TypeError):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_get(part, "text") for part in content if _get(part, "type") in ("text", None)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _reply_usage(response: Any) -> PluginLlmUsage:
    raw = _get(response, "usage")

    def count(*names: str) -> int:
        for name in names:
            value = _get(raw, name) if raw is not None else None
            try:
                number = int(value) if value is not None else 0
            except (TypeError, ValueError):
                number = 0
            if number:
                return number
        return 0

    usage = PluginLlmUsage(
        input_tokens=count("prompt_tokens", "input_tokens"),
        output_tokens=count("completion_tokens", "output_tokens"),
        cache_read_tokens=count("cache_read_input_tokens", "cache_read_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens", "cache_write_tokens"),
    )
    usage.total_tokens = count("total_tokens") or usage.input_tokens + usage.output_tokens
    return usage


# --------------------------------------------------------------------------
# PluginLlm
# --------------------------------------------------------------------------


class _FacadeType(type):
    """Makes every ``ctx.llm`` an instance of the served ``PluginLlm``."""

    def __instancecheck__(cls, obj: Any) -> bool:
        if cls is PluginLlm:
            return isinstance(obj, _llm.PluginLlm)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub: Any) -> bool:
        if cls is PluginLlm:
            return isinstance(sub, type) and issubclass(sub, _llm.PluginLlm)
        return type.__subclasscheck__(cls, sub)


def _owner(plugin_id: str) -> tuple[Kernel | None, str]:
    """The kernel and the plugin a directly built facade belongs to (see the module's docstring)."""
    ctx = host.current_context()
    if ctx is not None:
        return kernel_of(ctx), record_of(ctx).name
    kernel = host.current_kernel()
    if kernel is None:
        return None, plugin_id
    modules = {r.module_name: r.name for r in list(kernel.host.records.values()) if r.module_name}
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        name = frame.f_globals.get("__name__")
        while isinstance(name, str) and name:
            if name in modules:
                return kernel, modules[name]
            name = name.rpartition(".")[0]
        frame = frame.f_back
    return kernel, plugin_id


class PluginLlm(_llm.PluginLlm, metaclass=_FacadeType):
    """Hermes Agent's ``PluginLlm``: the type of ``ctx.llm``, and a facade a plugin may build itself."""

    __slots__ = ("_async_caller", "_policy_loader", "_sync_caller")

    def __init__(
        self,
        *,
        plugin_id: str,
        policy_loader: Callable[[str], _TrustPolicy] | None = None,
        sync_caller: Callable[..., Any] | None = None,
        async_caller: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        kernel, owner = _owner(str(plugin_id or ""))
        super().__init__(kernel, owner)  # type: ignore[arg-type]  # bound on first use when None
        self._policy_loader = policy_loader
        self._sync_caller = sync_caller
        self._async_caller = async_caller

    # Hermes' signatures, spelled out because tests/compat compares them with Hermes 0.19's; each
    # passes its arguments on to ctx.llm's method, and a test caller answers in _answer / _aanswer.

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        provider: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        agent_id: str | None = None,
        profile: str | None = None,
        purpose: str | None = None,
    ) -> PluginLlmCompleteResult:
        """A chat completion: the test caller's answer, else the kernel's model (as ``ctx.llm``)."""
        return super().complete(messages, **_request(locals()))

    async def acomplete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        provider: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        agent_id: str | None = None,
        profile: str | None = None,
        purpose: str | None = None,
    ) -> PluginLlmCompleteResult:
        """As :meth:`complete`, awaited (a test's ``async_caller``, else its ``sync_caller``)."""
        return await super().acomplete(messages, **_request(locals()))

    # -- structured ------------------------------------------------------------------

    def complete_structured(
        self,
        *,
        instructions: str,
        input: Sequence[Any],
        json_schema: Mapping[str, Any] | None = None,
        json_mode: bool = False,
        schema_name: str | None = None,
        system_prompt: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        agent_id: str | None = None,
        profile: str | None = None,
        purpose: str | None = None,
    ) -> PluginLlmStructuredResult:
        """Instructions and input blocks in, parsed JSON out (the arguments of ``ctx.llm``'s)."""
        return super().complete_structured(**_request(locals()))

    async def acomplete_structured(
        self,
        *,
        instructions: str,
        input: Sequence[Any],
        json_schema: Mapping[str, Any] | None = None,
        json_mode: bool = False,
        schema_name: str | None = None,
        system_prompt: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        agent_id: str | None = None,
        profile: str | None = None,
        purpose: str | None = None,
    ) -> PluginLlmStructuredResult:
        """As :meth:`complete_structured`, awaited."""
        return await super().acomplete_structured(**_request(locals()))

    # -- internals ----------------------------------------------------------------------

    def _answer(self, call: _llm._Call) -> Any:
        """The test caller's answer to ``call``, else the kernel's (the test policy checked first)."""
        overrides = self._overrides(call.options)
        if self._sync_caller is None:
            self._bind()
            return super()._answer(call)
        return self._result(call, self._sync_caller(**_call_args(call, overrides)), overrides)

    async def _aanswer(self, call: _llm._Call) -> Any:
        """As :meth:`_answer`, awaited (a test's ``async_caller``, else its ``sync_caller``)."""
        overrides = self._overrides(call.options)
        if self._async_caller is None and self._sync_caller is None:
            self._bind()
            return await super()._aanswer(call)
        return self._result(call, await self._reply(_call_args(call, overrides)), overrides)

    def _bind(self) -> None:
        """Bind to the current kernel when built with none (outside any kernel)."""
        if self._kernel is None:
            kernel = host.current_kernel()
            if kernel is None:
                reason = host.unknown_kernel("PluginLlm").args[0]
                raise PluginLlmError(f"plugin '{self.plugin_id}': {reason}")
            self._kernel = kernel

    def _overrides(self, request: Mapping[str, Any]) -> tuple[str | None, str | None, str | None, str | None]:
        """A test policy's verdict on the overrides (on the kernel's path, the kernel's gate decides too)."""
        wanted = (request["provider"], request["model"], request["agent_id"], request["profile"])
        if self._policy_loader is not None:
            policy = self._policy_loader(self.plugin_id)
        elif self._sync_caller is not None or self._async_caller is not None:
            policy = _policy_from_config(self._kernel or host.current_kernel(), self.plugin_id)
        else:
            return wanted
        return _check(policy, *wanted)

    async def _reply(self, args: dict[str, Any]) -> Any:
        if self._async_caller is not None:
            return await self._async_caller(**args)
        assert self._sync_caller is not None
        return self._sync_caller(**args)

    def _result(self, call: _llm._Call, reply: Any, overrides: Any) -> Any:
        """The kernel's result type for a test caller's ``(provider, model, response)``."""
        cls, request, json_schema = call.result, call.options, call.options["json_schema"]
        try:
            provider, model, response = reply
        except (TypeError, ValueError):
            raise PluginLlmError(
                f"plugin '{self.plugin_id}': the test caller must return (provider, model, response), "
                f"not {type(reply).__name__}"
            ) from None
        _provider, _model, agent_id, profile = overrides
        text = _reply_text(response)
        audit: dict[str, Any] = {
            "plugin_id": self.plugin_id,
            "purpose": request["purpose"] or "",
            "profile": profile or "",
        }
        fields: dict[str, Any] = {}
        if cls is PluginLlmStructuredResult:
            wants_json = json_schema is not None or bool(request.get("json_mode"))
            parsed, content_type = _llm._parse(text, json_schema) if wants_json else (None, "text")
            fields = {"parsed": parsed, "content_type": content_type}
            if request.get("schema_name") is not None:
                audit["schema_name"] = request["schema_name"]
        return cls(
            text=text,
            provider=str(provider or ""),
            model=str(model or ""),
            agent_id=agent_id or "default",
            usage=_reply_usage(response),
            audit=audit,
            **fields,
        )


def _request(arguments: dict[str, Any]) -> dict[str, Any]:
    """A method's keyword arguments, from its ``locals()``."""
    return {k: v for k, v in arguments.items() if k not in ("self", "messages", "__class__")}


def _call_args(
    call: _llm._Call, overrides: tuple[str | None, str | None, str | None, str | None]
) -> dict[str, Any]:
    """The keyword arguments Hermes Agent gives a test caller."""
    provider, model, _agent_id, profile = overrides
    return {
        "messages": list(call.messages),
        "provider_override": provider,
        "model_override": model,
        "profile_override": profile,
        "temperature": call.options["temperature"],
        "max_tokens": call.options["max_tokens"],
        "timeout": call.options["timeout"],
        "extra_body": call.extra_body or None,
    }


def make_plugin_llm_for_test(
    *,
    plugin_id: str,
    policy: _TrustPolicy,
    sync_caller: Callable[..., Any] | None = None,
    async_caller: Callable[..., Awaitable[Any]] | None = None,
) -> PluginLlm:
    """A facade for a plugin's tests: ``policy`` decides the overrides, the callers give the replies."""
    return PluginLlm(
        plugin_id=plugin_id,
        policy_loader=lambda _plugin_id: policy,
        sync_caller=sync_caller,
        async_caller=async_caller,
    )
