"""``ctx.llm``: plugins call the user's model, behind a trust gate.

With no overrides a call goes to the user's active provider and model
(``model.provider`` / ``model.model``); a plugin may choose a provider,
model, agent id or auth profile only where ``plugins.entries.<plugin_id>.llm``
in config.yaml allows it.  The gate is read from the file on every call and
fails closed.  Every call writes one audit line to ``<home>/logs/agent.log``.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

from .base.config import section
from .base.safe_yaml import load_json
from .core.api import kernel_of, record_of
from .core.context import ServiceContext

if TYPE_CHECKING:
    from .core.kernel import Kernel

STRUCTURED_NAME = "plugin_structured_output"
JSON_DIRECTIVE = "Answer with a single JSON object only: no prose before or after it, no code fences."
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


class PluginLlmTrustError(PermissionError):
    """A plugin asked for a provider, model, agent id or profile its config entry does not allow."""


class PluginLlmError(RuntimeError):
    """The model call failed (no model configured, the provider refused, the network failed)."""


@dataclass
class PluginLlmUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class PluginLlmCompleteResult:
    text: str
    provider: str
    model: str
    agent_id: str
    usage: PluginLlmUsage = field(default_factory=PluginLlmUsage)
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass
class PluginLlmStructuredResult(PluginLlmCompleteResult):
    parsed: Any = None
    content_type: str = "text"


class LlmOptions(TypedDict, total=False):
    """The keywords every ``ctx.llm`` call takes, all optional (``None``: the user's own)."""

    provider: str | None
    model: str | None
    temperature: float | None
    max_tokens: int | None
    timeout: float | None
    agent_id: str | None
    profile: str | None
    purpose: str | None


class StructuredOptions(LlmOptions, total=False):
    """The keywords ``complete_structured`` takes besides ``instructions`` and ``input``."""

    json_schema: Mapping[str, Any] | None
    json_mode: bool
    schema_name: str | None
    system_prompt: str | None


LLM_DEFAULTS: LlmOptions = {
    "provider": None,
    "model": None,
    "temperature": None,
    "max_tokens": None,
    "timeout": None,
    "agent_id": None,
    "profile": None,
    "purpose": None,
}
STRUCTURED_DEFAULTS: StructuredOptions = {
    **LLM_DEFAULTS,
    "json_schema": None,
    "json_mode": False,
    "schema_name": None,
    "system_prompt": None,
}


@dataclass(frozen=True)
class _Call:
    """One ``ctx.llm`` call as its method received it: what it returns, its messages (as given),
    the request body it adds, and every option (defaults filled in)."""

    result: type[PluginLlmCompleteResult]
    messages: Sequence[Any]
    extra_body: dict[str, Any]
    options: StructuredOptions


@dataclass(frozen=True)
class _Route:
    config: dict[str, Any]
    provider: str
    agent_id: str
    profile: str | None


@dataclass
class _Plan:
    """One call, ready to send."""

    route: _Route
    client: Any
    messages: list[dict[str, Any]]
    kwargs: dict[str, Any]
    owned: bool

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if self.owned and callable(close):
            close()


class PluginLlm:
    """The model access of one plugin (``ctx.llm``)."""

    __slots__ = ("__plugin", "_kernel")

    def __init__(self, kernel: Kernel, plugin_id: str) -> None:
        self._kernel = kernel
        self.__plugin = plugin_id

    @property
    def plugin_id(self) -> str:
        """The plugin this access belongs to: what the trust gate checks and the audit names.

        Read-only: a plugin cannot borrow another plugin's grant by renaming itself.
        """
        return self.__plugin

    # -- chat -------------------------------------------------------------------------

    def complete(
        self, messages: Sequence[Mapping[str, Any]], **options: Unpack[LlmOptions]
    ) -> PluginLlmCompleteResult:
        """A chat completion with the user's model (or an allowed override)."""
        return self._answer(_Call(PluginLlmCompleteResult, messages, {}, _options("complete", options)))

    async def acomplete(
        self, messages: Sequence[Mapping[str, Any]], **options: Unpack[LlmOptions]
    ) -> PluginLlmCompleteResult:
        """As :meth:`complete`, on the caller's event loop."""
        return await self._aanswer(
            _Call(PluginLlmCompleteResult, messages, {}, _options("acomplete", options))
        )

    # -- structured ------------------------------------------------------------------

    def complete_structured(
        self, *, instructions: str, input: Sequence[Any], **options: Unpack[StructuredOptions]
    ) -> PluginLlmStructuredResult:
        """Instructions and typed input blocks in, a parsed (and validated) JSON object out."""
        return self._answer(_structured_call("complete_structured", instructions, input, options))

    async def acomplete_structured(
        self, *, instructions: str, input: Sequence[Any], **options: Unpack[StructuredOptions]
    ) -> PluginLlmStructuredResult:
        """As :meth:`complete_structured`, on the caller's event loop."""
        return await self._aanswer(_structured_call("acomplete_structured", instructions, input, options))

    # -- one call, sent ----------------------------------------------------------------

    def _answer(self, call: _Call) -> Any:
        """Send ``call`` to the model and read the reply (a subclass may answer otherwise)."""
        plan = self._plan(call)
        chat = self._call(lambda: plan.client.complete(plan.messages, **plan.kwargs), plan)
        return self._reply_of(call, chat, plan.route)

    async def _aanswer(self, call: _Call) -> Any:
        """As :meth:`_answer`, awaited."""
        plan = self._plan(call)
        chat = await self._acall(plan.client.acomplete(plan.messages, **plan.kwargs), plan)
        return self._reply_of(call, chat, plan.route)

    # -- the trust gate and routing ----------------------------------------------------------

    def _gate(self) -> dict[str, Any]:
        """This plugin's ``llm`` entry, read from config.yaml now (a change applies at once)."""
        kernel = self._kernel
        fresh, _problems = kernel.host.reread_config()
        entries = section(fresh, "plugins", "entries")
        entry = entries.get(self.plugin_id) if isinstance(entries, dict) else None
        gate = entry.get("llm") if isinstance(entry, dict) else None
        return gate if isinstance(gate, dict) else {}

    def _check(self, gate: dict[str, Any], what: str, value: str, allow: str, allowed: str | None) -> None:
        base = f"plugins.entries.{self.plugin_id}.llm"
        if gate.get(allow) is not True:
            raise PluginLlmTrustError(
                f"plugin '{self.plugin_id}' may not choose the {what} ({value!r}): "
                f"set {base}.{allow}: true in config.yaml to allow it"
            )
        if allowed is None or allowed not in gate:
            return
        listed = gate.get(allowed)
        # Matched as Hermes matches: trimmed, case-insensitive.
        names = (
            {item.strip().lower() for item in listed if isinstance(item, str)}
            if isinstance(listed, list)
            else set()
        )
        if not ("*" in names or value.strip().lower() in names):
            raise PluginLlmTrustError(
                f"plugin '{self.plugin_id}' may not use the {what} {value!r}: add it to {base}.{allowed} "
                f"in config.yaml (now {listed!r}; ['*'] allows any)"
            )

    def _route(
        self,
        provider: str | None,
        model: str | None,
        agent_id: str | None,
        profile: str | None,
        timeout: float | None,
    ) -> _Route:
        gate = self._gate() if any(v is not None for v in (provider, model, agent_id, profile)) else {}
        if provider is not None:
            self._check(gate, "provider", provider, "allow_provider_override", "allowed_providers")
        if model is not None:
            self._check(gate, "model", model, "allow_model_override", "allowed_models")
        if agent_id is not None:
            self._check(gate, "agent id", agent_id, "allow_agent_id_override", None)
        if profile is not None:
            self._check(gate, "auth profile", profile, "allow_profile_override", None)
        config = copy.deepcopy(self._kernel.providers.model_config())
        if provider is not None and provider != config.get("provider"):
            # Another provider: its own URL and key, not the user's active ones.
            config = {k: v for k, v in config.items() if k not in ("base_url", "api_key", "model", "script")}
            config["provider"] = provider
        if model is not None:
            config["model"] = model
        elif provider is not None and "model" not in config:
            # Another provider and no model named: its profile's default, as Hermes picks it.
            config["model"] = self._default_model(provider)
        if timeout is not None:
            config["timeout"] = timeout
        return _Route(config, str(config.get("provider") or ""), agent_id or "default", profile)

    def _default_model(self, provider: str) -> str:
        """The model a plugin gets from ``provider`` when it names none: the profile's
        ``default_aux_model``, else its ``default_model``, else its first fallback model."""
        from .providers.registry import ProviderLookupError

        try:
            profile = self._kernel.providers.get_provider_profile(provider)
        except ProviderLookupError:
            return ""  # the client's own error names the unknown provider
        fallback = profile.fallback_models[0] if profile.fallback_models else ""
        return str(profile.default_aux_model or profile.default_model or fallback or "")

    def _plan(self, call: _Call) -> _Plan:
        """Check the gate, pick the client, and gather the transport's keyword arguments."""
        from .providers.manager import ProviderSelectionError

        options = call.options
        messages = _messages(call.messages)
        route = self._route(
            options["provider"], options["model"], options["agent_id"], options["profile"], options["timeout"]
        )
        try:
            client = self._kernel.providers.client(route.config)
        except ProviderSelectionError as exc:
            raise PluginLlmError(f"plugin '{self.plugin_id}': {exc}") from None
        kwargs = {
            "temperature": options["temperature"],
            "max_tokens": options["max_tokens"],
            "extra_body": {**_extra(route), **call.extra_body},
        }
        # A client made for an override serves this call only; the user's own is kept.
        owned = route.config != self._kernel.providers.model_config()
        return _Plan(route, client, messages, kwargs, owned)

    def _call(self, fn: Any, plan: _Plan) -> Any:
        from .providers.transport import ProviderError

        try:
            return fn()
        except ProviderError as exc:
            raise PluginLlmError(f"plugin '{self.plugin_id}': the model call failed: {exc}") from exc
        finally:
            plan.close()

    async def _acall(self, awaitable: Any, plan: _Plan) -> Any:
        from .providers.transport import ProviderError

        try:
            return await awaitable
        except ProviderError as exc:
            raise PluginLlmError(f"plugin '{self.plugin_id}': the model call failed: {exc}") from exc
        finally:
            plan.close()

    # -- results --------------------------------------------------------------------------------

    def _reply_of(self, call: _Call, chat: Any, route: _Route) -> Any:
        """The result ``call``'s method returns, read from the model's ``chat`` reply."""
        options = call.options
        if call.result is PluginLlmStructuredResult:
            return self._structured_result(
                chat,
                route,
                options["purpose"],
                options["json_schema"],
                options["json_mode"],
                options["schema_name"],
            )
        return self._finish(
            "plugin_llm.complete", PluginLlmCompleteResult, chat, route, options["purpose"], {}
        )

    def _finish(
        self, event: str, cls: Any, chat: Any, route: _Route, purpose: str | None, extra: dict[str, Any]
    ) -> Any:
        usage = PluginLlmUsage(
            **{k: v for k, v in chat.usage.as_dict().items() if k in PluginLlmUsage.__dataclass_fields__}
        )
        audit = {"plugin_id": self.plugin_id, "purpose": purpose, "profile": route.profile}
        if "schema_name" in extra:
            audit["schema_name"] = extra.pop("schema_name")
        result = cls(
            text=chat.text,
            provider=chat.provider or route.provider,
            model=chat.model,
            agent_id=route.agent_id,
            usage=usage,
            audit=audit,
            **extra,
        )
        self._kernel.host.audit.info(
            event,
            plugin=self.plugin_id,
            purpose=purpose,
            provider=result.provider,
            model=result.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
        )
        return result

    def _structured_result(
        self,
        chat: Any,
        route: _Route,
        purpose: str | None,
        json_schema: Mapping[str, Any] | None,
        json_mode: bool,
        schema_name: str | None,
    ) -> PluginLlmStructuredResult:
        parsed, content_type = _parse(chat.text, json_schema)
        extra: dict[str, Any] = {"parsed": parsed, "content_type": content_type}
        if schema_name is not None:
            extra["schema_name"] = schema_name
        return self._finish(
            "plugin_llm.complete_structured", PluginLlmStructuredResult, chat, route, purpose, extra
        )


def _options(method: str, options: Mapping[str, Any]) -> StructuredOptions:
    """``options`` with the left-out ones at their defaults; an unknown keyword raises ``TypeError``."""
    allowed = STRUCTURED_DEFAULTS if method.endswith("_structured") else LLM_DEFAULTS
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"ctx.llm.{method}() got unexpected keyword argument(s): {', '.join(unknown)}")
    return cast(StructuredOptions, {**STRUCTURED_DEFAULTS, **options})


def _structured_call(
    method: str, instructions: str, blocks: Sequence[Any], options: Mapping[str, Any]
) -> _Call:
    """A structured call: its messages and request body built, its options checked."""
    full = _options(method, options)
    messages, extra = _structured_request(
        instructions,
        blocks,
        full["json_schema"],
        full["json_mode"],
        full["schema_name"],
        full["system_prompt"],
    )
    return _Call(PluginLlmStructuredResult, messages, extra, full)


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, (str, bytes)) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content'")
        out.append(dict(message))
    return out


def _extra(route: _Route) -> dict[str, Any]:
    return {"metadata": {"auth_profile": route.profile}} if route.profile else {}


def _structured_request(
    instructions: str,
    blocks: Sequence[Any],
    json_schema: Mapping[str, Any] | None,
    json_mode: bool,
    schema_name: str | None,
    system_prompt: str | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError("complete_structured needs non-empty instructions")
    if isinstance(blocks, (str, bytes)) or not blocks:
        raise ValueError("complete_structured needs a non-empty list of input blocks")
    wants_json = json_schema is not None or json_mode
    header = [instructions.strip()]
    if schema_name:
        header.append(f"Schema name: {schema_name}")
    if json_schema is not None:
        header.append("JSON schema:\n" + json.dumps(json_schema, sort_keys=True, indent=2))
    parts: list[dict[str, Any]] = [{"type": "text", "text": "\n\n".join(header)}]
    parts.extend(_part(i, block) for i, block in enumerate(blocks))
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(p for p in (system_prompt or "", JSON_DIRECTIVE if wants_json else "") if p)
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": parts})
    extra: dict[str, Any] = {}
    if json_schema is not None:
        extra["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": schema_name or STRUCTURED_NAME,
                "schema": dict(json_schema),
                "strict": False,
            },
        }
    elif json_mode:
        extra["response_format"] = {"type": "json_object"}
    return messages, extra


def _part(i: int, block: Any) -> dict[str, Any]:
    if not isinstance(block, Mapping):
        raise ValueError(f"input block {i} must be a dict with a 'type' ('text' or 'image')")
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise ValueError(f"input block {i}: a text block needs 'text' (a string)")
        return {"type": "text", "text": text}
    if kind == "image":
        if block.get("data") is not None:
            data = block["data"]
            if not isinstance(data, (bytes, bytearray)):
                raise ValueError(f"input block {i}: an image's 'data' must be bytes")
            mime = block.get("mime_type") or "image/png"
            url = f"data:{mime};base64,{base64.b64encode(bytes(data)).decode('ascii')}"
        elif isinstance(block.get("url"), str) and block["url"]:
            url = block["url"]
        else:
            raise ValueError(f"input block {i}: an image block needs 'data' (bytes) or 'url'")
        return {"type": "image_url", "image_url": {"url": url}}
    raise ValueError(f"input block {i}: unknown type {kind!r} (use 'text' or 'image')")


def _parse(text: str, json_schema: Mapping[str, Any] | None) -> tuple[Any, str]:
    """``(parsed, "json")`` for valid JSON matching the schema, else ``(None, "text")``; never raises."""
    match = _FENCE.search(text or "")
    candidate = match.group(1) if match else (text or "")
    try:
        parsed = load_json(candidate, "the reply")  # bounded: a deep reply is text, never a RecursionError
    except ValueError:
        return None, "text"
    if json_schema is not None:
        try:
            import jsonschema

            jsonschema.validate(parsed, dict(json_schema))
        except Exception:  # a mismatch, or a schema jsonschema cannot use: no parsed object
            return None, "text"
    return parsed, "json"


# -- the llm service (see kernel.core.services) -------------------------------------


#: Each plugin context's ``ctx.llm``, made on first use (kept as long as the context is).
_plugin_llms: weakref.WeakKeyDictionary[Any, PluginLlm] = weakref.WeakKeyDictionary()


class Context(ServiceContext):
    """The ``ctx.llm`` member of this service."""

    @property
    def llm(self) -> PluginLlm:
        """The user's model for this plugin's own calls (see :mod:`kernel.llm`)."""
        llm = _plugin_llms.get(self)
        if llm is None:
            llm = _plugin_llms.setdefault(self, PluginLlm(kernel_of(self), record_of(self).name))
        return llm
