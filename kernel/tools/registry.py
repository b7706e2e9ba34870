"""The tool registry and the tool-call pipeline (``k.tools``)."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import inspect
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack

from ..base.data import copy_data
from ..base.safe_yaml import DataRefused, data_problem, load_json
from ..core.api import contained, running_kernel
from ..core.hooks import (
    adapt_hermes_callback,
    describe,
    is_coroutine_function,
    plugin_order,
    propagates,
    safe_text,
)
from ..core.running import RUNNING
from .decisions import MAX_ARGS_CHARS, MAX_ARGS_DEPTH, MAX_ARGS_VALUES, decide_tool_call
from .middleware import OBSERVER_SCHEMA_VERSION, MiddlewareError
from .options import ToolOptions, tool_options

if TYPE_CHECKING:
    import asyncio

    from ..core.kernel import Kernel

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Context keys every tool hook receives ("" when the caller has none, as in Hermes; a handler gets None).
HOOK_CONTEXT_KEYS = ("task_id", "session_id", "tool_call_id", "turn_id", "api_request_id")
# Context for the handler alone: objects no hook (a shell hook's JSON) should be handed.
HANDLER_ONLY_KEYS = frozenset({"parent_agent"})
# Arguments the pipeline itself supplies; a context key of the same name is dropped.
PIPELINE_KEYS = frozenset(
    {"tool_name", "args", "result", "duration_ms", "status", "error_type", "error_message"}
)


# The context of the tool or command call in progress, inherited by nested dispatches.
_CALL_CONTEXT: ContextVar[dict[str, Any]] = ContextVar("hermes_kernel_call_context", default={})  # noqa: B039


class ToolRegistrationError(ValueError):
    """A tool that cannot be registered: bad name, bad schema or bad handler."""


@dataclass
class Tool:
    """A registered tool.  ``schema`` is the bare OpenAI function schema."""

    name: str
    toolset: str
    schema: dict[str, Any]
    handler: Callable[..., Any]
    plugin: str
    check_fn: Callable[[], Any] | None = None
    requires_env: tuple[str, ...] = ()
    is_async: bool = False
    description: str = ""
    emoji: str = ""
    # Registered with override=True; the tool it set aside, restored when it goes.
    override: bool = False
    # Registered by a bundled plugin: a plugin of the user's providing the same tool takes it over.
    bundled: bool = False
    replaced: Tool | None = field(default=None, repr=False)
    call: Callable[..., Any] = field(init=False, repr=False)
    # Why the kernel took it out of service (a handler that broke the rules), if it did.
    error: str | None = None

    def __post_init__(self) -> None:
        self.call = adapt_hermes_callback(self.handler)


def normalize_schema(name: str, schema: Any) -> tuple[dict[str, Any], list[str]]:
    """Validate an OpenAI function schema (bare or wrapped); return the bare form and warnings."""
    warnings: list[str] = []
    if not isinstance(schema, dict):
        raise ToolRegistrationError(f"tool '{name}': schema must be a dict, not {type(schema).__name__}")
    if schema.get("type") == "function" and "function" in schema:
        schema = schema["function"]
        if not isinstance(schema, dict):
            raise ToolRegistrationError(f"tool '{name}': schema['function'] must be a dict")
    # A copy the plugin cannot change later; also proves the schema is JSON.
    bare = _schema_copy(name, schema)
    declared = bare.get("name")
    if declared is None:
        bare["name"] = name
    elif declared != name:
        warnings.append(f"tool '{name}': schema name '{declared}' differs; the model will see '{name}'")
        bare["name"] = name
    description = bare.get("description", "")
    if not isinstance(description, str):
        raise ToolRegistrationError(f"tool '{name}': schema 'description' must be a string")
    params = bare.setdefault("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict):
        raise ToolRegistrationError(
            f"tool '{name}': schema 'parameters' must be a JSON Schema object (a dict)"
        )
    if params.get("type", "object") != "object":
        raise ToolRegistrationError(
            f"tool '{name}': schema 'parameters' must have type 'object', not {params.get('type')!r}"
        )
    params.setdefault("type", "object")
    properties = params.get("properties", {})
    if not isinstance(properties, dict):
        raise ToolRegistrationError(f"tool '{name}': 'parameters.properties' must be a mapping")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ToolRegistrationError(f"tool '{name}': 'parameters.required' must be a list of names")
    missing = [r for r in required if r not in properties]
    if missing:
        raise ToolRegistrationError(
            f"tool '{name}': 'parameters.required' names undefined properties: {', '.join(missing)}"
        )
    _check_json_schema(name, params)
    return bare, warnings


#: How deep a tool's schema may nest (a schema that refers to itself is refused by it too).
MAX_SCHEMA_DEPTH = 100
_JSON_ATOMS = frozenset({str, int, bool, type(None)})


class _NotPlain(Exception):
    """A value that is not a plain dict, list, str, int, float, bool or None: JSON decides."""


def _schema_copy(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON copy of ``schema``, as ``json.loads(json.dumps(schema, allow_nan=False))`` makes it.

    Plain dicts, lists and scalars (what schemas are) are copied directly, about three times
    faster than the round trip, which then reads anything else (tuples, subclasses, keys that are
    not strings) as JSON does.
    """
    try:
        try:
            return _plain_copy(schema, 0)
        except _NotPlain:
            # What JSON made of it is plain: copied once more, its depth is checked as any other's.
            return _plain_copy(json.loads(json.dumps(schema, allow_nan=False)), 0)
    except RecursionError:
        raise ToolRegistrationError(
            f"tool '{name}': schema nests deeper than {MAX_SCHEMA_DEPTH} levels, or contains itself"
        ) from None
    except (TypeError, ValueError) as exc:
        raise ToolRegistrationError(f"tool '{name}': schema is not JSON-serialisable: {exc}") from None


def _plain_copy(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind in _JSON_ATOMS:
        return value
    if depth >= MAX_SCHEMA_DEPTH:
        raise RecursionError
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain_copy(item, depth + 1)
        return out
    if kind is list:
        return [_plain_copy(item, depth + 1) for item in value]
    if kind is float:
        if value - value == 0:  # finite: JSON has no NaN or infinity
            return value
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    raise _NotPlain


JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "additionalItems")


def _check_json_schema(name: str, schema: Any, where: str = "parameters") -> None:
    """Check the JSON Schema keywords that tool parameters use, recursively.

    A light structural check instead of a full meta-schema validation: it runs
    at every tool registration, so it must not cost start-up time.
    """

    def fail(problem: str) -> None:
        raise ToolRegistrationError(f"tool '{name}': '{where}' is not a valid JSON Schema: {problem}")

    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        fail(f"expected an object, found {type(schema).__name__}")
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        bad = [k for k in kinds if k not in JSON_TYPES]
        if bad:
            fail(f"unknown type {bad[0]!r} (use one of {', '.join(sorted(JSON_TYPES))})")
    if "required" in schema and (
        not isinstance(schema["required"], list) or not all(isinstance(r, str) for r in schema["required"])
    ):
        fail("'required' must be a list of property names")
    if "enum" in schema and not isinstance(schema["enum"], list):
        fail("'enum' must be a list")
    for key in ("description", "title", "pattern", "format"):
        if key in schema and not isinstance(schema[key], str):
            fail(f"'{key}' must be a string")
    for key in _SUBSCHEMA_MAPS:
        if key in schema:
            if not isinstance(schema[key], dict):
                fail(f"'{key}' must map names to schemas")
            for prop, sub in schema[key].items():
                _check_json_schema(name, sub, f"{where}.{key}.{prop}")
    for key in _SUBSCHEMA_LISTS:
        if key in schema:
            if not isinstance(schema[key], list):
                fail(f"'{key}' must be a list of schemas")
            for i, sub in enumerate(schema[key]):
                _check_json_schema(name, sub, f"{where}.{key}[{i}]")
    for key in _SUBSCHEMA_ONE:
        if key in schema:
            _check_json_schema(name, schema[key], f"{where}.{key}")


# Tools of the kernel's own, registered on demand: no plugin may take their names.
RESERVED_TOOLS = {"skill_view": "builtin"}


def error_json(message: str, **extra: Any) -> str:
    return json.dumps({"error": message, **extra}, ensure_ascii=False, default=str)


def is_error_result(result: str) -> bool:
    """Whether a tool result (the pipeline's JSON string) is an error object, as :func:`error_json` makes
    and as handlers report failures: a JSON object with an ``"error"`` key."""
    if '"error"' not in result or not result.lstrip().startswith("{"):
        return False
    try:
        value = load_json(result, "a tool result")  # bounded: a handler's text may nest without end
    except ValueError:  # invalid JSON, or DataRefused
        return False
    return isinstance(value, dict) and "error" in value


# The event loop of the adispatch caller: a coroutine handler is awaited there, not on the kernel's loop.
_CALLER_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar(
    "hermes_kernel_caller_loop", default=None
)


def calling_kernel() -> Kernel | None:
    """The kernel running plugin code here (a tool call, an agent turn, a hook call), if any."""
    return running_kernel()


def current_call() -> dict[str, Any]:
    """The context of the call in progress (``session_id``, ``task_id``...): a turn or a tool call."""
    return dict(_CALL_CONTEXT.get())


class ToolRegistry:
    """Every tool of one kernel, and the pipeline that runs them."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._tools: dict[str, Tool] = {}
        self._lock = threading.RLock()
        self._check_warned: set[str] = set()

    # -- registry ----------------------------------------------------------

    def register(
        self,
        name: str,
        toolset: str,
        schema: Any,
        handler: Callable[..., Any],
        *,
        plugin: str,
        **options: Unpack[ToolOptions],
    ) -> tuple[Tool, list[str]]:
        """Validate and add a tool; raise :class:`ToolRegistrationError` when it cannot be.

        ``options`` are :class:`~kernel.tools.options.ToolOptions`, as ``ctx.register_tool`` takes them.

        With ``override``, a tool of the same name that another plugin registered is set aside
        (``tool.replaced``) and comes back when this one is unregistered; a tool registered while
        such an override holds its name is set aside the same way (``get(name)`` is then not it).
        """
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise ToolRegistrationError(
                f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
            )
        opts = tool_options("k.tools.register", options)
        check_fn, override = opts["check_fn"], opts["override"]
        if not callable(handler):
            raise ToolRegistrationError(f"tool '{name}': handler must be callable")
        if check_fn is not None and not callable(check_fn):
            raise ToolRegistrationError(f"tool '{name}': check_fn must be callable or None")
        envs = _env_names(name, opts["requires_env"])
        bare, warnings = normalize_schema(name, schema)
        owner = self._kernel.host.records.get(plugin)
        bundled = owner is not None and owner.source == "bundled"
        with self._lock:
            existing = self._tools.get(name)
            # A bundled plugin's tool yields to one of the user's (or an installed package's), and a tool
            # waits beneath one that took its name over (override=True), until it goes.
            takes_over = existing is not None and existing.bundled and not bundled
            beneath = (
                existing is not None
                and not override
                and (existing.override or (bundled and not existing.bundled))
            )
            if existing is not None and (
                existing.plugin == plugin or not (override or beneath or takes_over)
            ):
                raise ToolConflict(name, existing.plugin, plugin)
            keeper = RESERVED_TOOLS.get(name)
            if keeper is not None and plugin != keeper:
                raise ToolConflict(name, keeper, plugin)
            tool = Tool(
                name=name,
                toolset=str(toolset or plugin),
                schema=bare,
                handler=handler,
                plugin=plugin,
                check_fn=check_fn,
                requires_env=envs,
                is_async=bool(opts["is_async"]) or is_coroutine_function(handler),
                description=opts["description"] or bare.get("description", ""),
                emoji=opts["emoji"],
                override=bool(override),
                bundled=bundled,
            )
            if beneath and existing is not None:  # beneath implies an existing tool
                while existing.replaced is not None:
                    existing = existing.replaced
                existing.replaced = tool
            else:
                tool.replaced = existing
                self._tools[name] = tool
        return tool, warnings

    def unregister(self, name: str, plugin: str | None = None) -> None:
        """Remove tool ``name`` (only ``plugin``'s, when given): a tool it had overridden comes back,
        and a tool of ``plugin``'s that another had overridden is forgotten."""
        with self._lock:
            tool = self._tools.get(name)
            if tool is None:
                return
            if plugin is None or tool.plugin == plugin:
                if tool.replaced is not None:
                    self._tools[name] = tool.replaced
                else:
                    del self._tools[name]
                return
            while tool.replaced is not None:
                if tool.replaced.plugin == plugin:
                    tool.replaced = tool.replaced.replaced
                    return
                tool = tool.replaced

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def all(self) -> list[Tool]:
        """Every registered tool, available or not, in plugin order (then registration order)."""
        return sorted(self._tools.values(), key=lambda t: plugin_order(t.plugin))

    def names(self) -> list[str]:
        return [t.name for t in self.all()]

    def available(self, tool: Tool) -> tuple[bool, str]:
        """Whether the model may use ``tool`` now, and why not."""
        if tool.error is not None:
            return False, f"disabled: {tool.error}"
        missing = [v for v in tool.requires_env if not self._kernel.environ.get(v)]
        if missing:
            return False, f"missing environment variable(s): {', '.join(missing)}"
        if tool.check_fn is None:
            return True, ""
        with contained() as checking:
            ok = tool.check_fn()
            if ok is not None and type(ok) is not bool and inspect.isawaitable(ok):
                ok = self._kernel.host.run_sync(ok)
            ok = bool(ok)
        if checking.failed:
            reason = f"check_fn raised {checking.error}"
            if tool.name not in self._check_warned:
                self._check_warned.add(tool.name)
                self._kernel.log.warning(
                    "tool_check_failed", tool=tool.name, plugin=tool.plugin, error=reason
                )
                self._kernel.host.note_failure(tool.plugin, f"tool '{tool.name}' is unavailable: {reason}")
            return False, reason
        return (True, "") if ok else (False, "its check_fn returned False")

    def disable(self, tool: Tool, reason: str) -> None:
        """Take ``tool`` out of service for the life of the kernel (it broke the rules)."""
        if tool.error is None:
            tool.error = reason
            self._kernel.log.warning("tool_disabled", tool=tool.name, plugin=tool.plugin, error=reason)
            self._kernel.host.note_failure(tool.plugin, f"tool '{tool.name}' disabled: {reason}")

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of the tools available now, in plugin order."""
        return [
            {"type": "function", "function": copy_data(t.schema)} for t in self.all() if self.available(t)[0]
        ]

    # -- dispatch ----------------------------------------------------------

    @contextlib.contextmanager
    def call_context(self, **context: Any) -> Iterator[dict[str, Any]]:
        """Make ``context`` (``session_id``, ``task_id``, ...) what nested dispatches inherit."""
        merged = {**_CALL_CONTEXT.get(), **{k: v for k, v in context.items() if v is not None}}
        token = _CALL_CONTEXT.set(merged)
        kernel_token = RUNNING.set(self._kernel)
        try:
            yield merged
        finally:
            RUNNING.reset(kernel_token)
            _CALL_CONTEXT.reset(token)

    def dispatch(self, name: str, args: Any = None, **context: Any) -> str:
        """Run tool ``name`` through the whole pipeline; always return a JSON string.

        ``context`` (``task_id``, ``session_id``, ``tool_call_id``, ...) is
        passed to the hooks and to the handler as keyword arguments; what is
        not given is inherited from the call in progress (a tool or command
        handler that dispatches another tool).
        """
        tool = self._tools.get(name)
        if tool is None:
            return error_json(self._unknown(name))
        parsed, problem = _coerce_args(args)
        if problem:
            return error_json(f"tool '{name}': {problem}")
        ok, reason = self.available(tool)
        if not ok:
            return error_json(f"tool '{name}' is not available: {reason}")

        kernel = self._kernel
        given = {k: v for k, v in context.items() if k not in PIPELINE_KEYS}
        with self.call_context(**given) as inherited:
            context = {**dict.fromkeys(HOOK_CONTEXT_KEYS), **inherited, **given}
            trace: list[dict[str, str]] = []
            if kernel.middleware.has("tool_request"):
                parsed, trace = kernel.middleware.rewrite_args(name, parsed, context)
            observed = observer_context(context, trace)
            verdict = decide_tool_call(kernel, name, parsed, observed)
            if verdict.blocked is not None:
                result = error_json(verdict.blocked)
                # Observers hear of a blocked call too, as in Hermes (no transform: nothing ran).
                kernel.invoke_hook(
                    "post_tool_call",
                    **observed,
                    tool_name=name,
                    args=copy.deepcopy(parsed),
                    result=result,
                    duration_ms=0,
                    status="blocked",
                    error_type="plugin_block",
                    error_message=verdict.blocked,
                )
                return result
            parsed = verdict.args
            start = time.perf_counter()
            result, status, error_type, error_message = self._run_handler(tool, parsed, context)
            outcome = {
                **observed,
                "tool_name": name,
                "status": status,
                "error_type": error_type,
                "error_message": error_message,
                "duration_ms": int((time.perf_counter() - start) * 1000),
            }
            if kernel.has_callbacks("post_tool_call"):
                kernel.invoke_hook("post_tool_call", **outcome, args=copy.deepcopy(parsed), result=result)
            if kernel.has_callbacks("transform_tool_result"):
                replacement = kernel.first_text(
                    "transform_tool_result",
                    allow_empty=True,
                    **outcome,
                    args=copy.deepcopy(parsed),
                    result=result,
                )
                if replacement is not None:
                    result = _as_json_text(replacement)
        return result

    async def adispatch(self, name: str, args: Any = None, **context: Any) -> str:
        """:meth:`dispatch` for async hosts: the caller's event loop keeps running meanwhile.

        The pipeline (guards, middleware, hooks, a sync handler) runs on a
        worker thread with the caller's context variables; a coroutine handler
        is awaited on the caller's loop. Cancelling the awaiting task does not
        stop a handler already running.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        ctx.run(_CALLER_LOOP.set, loop)
        return await loop.run_in_executor(None, lambda: ctx.run(self.dispatch, name, args, **context))

    def _run_handler(
        self, tool: Tool, args: dict[str, Any], context: dict[str, Any]
    ) -> tuple[str, str, str | None, str | None]:
        def handler(call_args: dict[str, Any]) -> Any:
            value = tool.call(call_args, **context)
            if inspect.isawaitable(value):
                loop = _CALLER_LOOP.get()
                import asyncio

                if loop is not None and loop.is_running() and asyncio._get_running_loop() is not loop:
                    value = asyncio.run_coroutine_threadsafe(_awaited(value), loop).result()
                else:
                    value = self._kernel.host.run_sync(value)
            return value

        try:
            wrapped = self._kernel.middleware.wrap(
                "tool_execution", handler, "args", tool_name=tool.name, **context
            )
            value = wrapped(args)
        except MiddlewareError as exc:
            text = safe_text(str, exc)
            return error_json(f"tool '{tool.name}': {text}"), "error", "MiddlewareError", text
        except BaseException as exc:
            if propagates(exc):
                raise
            kind, detail = type(exc).__name__, describe(exc)
            if not isinstance(exc, Exception):
                # Not an error a tool may report: it would have ended a host that does not contain it.
                self.disable(tool, f"its handler raised {detail}")
            message = f"tool '{tool.name}' (plugin {tool.plugin}) failed: {detail}"
            self._kernel.log.warning("tool_failed", tool=tool.name, plugin=tool.plugin, error=detail)
            return error_json(message), "error", kind, detail.partition(": ")[2] or detail
        if issubclass(type(value), str):
            return _as_json_text(str.__str__(value)), "ok", None, None
        envelope = multimodal_text(value)
        if envelope is not None:
            return envelope, "ok", None, None
        kind = type(value).__name__
        message = f"tool '{tool.name}' (plugin {tool.plugin}) returned {kind}, expected a JSON string"
        self._kernel.log.warning("tool_bad_result", tool=tool.name, plugin=tool.plugin, type=kind)
        extra: dict[str, Any] = {}
        with contained() as converting:
            extra["returned"] = json.loads(json.dumps(value, allow_nan=False))
        if converting.failed:
            shown = safe_text(repr, value, 2000)
            if shown.startswith("<repr() of"):
                self.disable(tool, f"its handler returned a {kind} that cannot be shown")
            extra["returned"] = shown
        return error_json(message, **extra), "error", "InvalidToolResult", message

    def _unknown(self, name: str) -> str:
        import difflib  # only for a name nobody registered

        close = difflib.get_close_matches(str(name), list(self._tools), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown tool {name!r}{hint}"


class PluginToolOverrideError(ToolRegistrationError, PermissionError):
    """``register_tool(..., override=True)`` from a plugin that config.yaml does not allow to override
    tools (a ``PermissionError``, as Hermes raises it)."""


class ToolConflict(ToolRegistrationError):
    """A tool name that another plugin already owns (or that the kernel keeps for its own tool)."""

    def __init__(self, name: str, owner: str, plugin: str) -> None:
        self.name, self.owner, self.plugin = name, owner, plugin
        reason = (
            "the kernel keeps that name for its own tool"
            if owner == RESERVED_TOOLS.get(name)
            else f"plugin '{owner}' already registered it"
        )
        super().__init__(f"tool '{name}' of plugin '{plugin}' was refused: {reason}")


def _env_names(name: str, requires_env: Iterable[str] | None) -> tuple[str, ...]:
    if requires_env is None:
        return ()
    if isinstance(requires_env, str):
        requires_env = [requires_env]
    out = []
    for item in requires_env:
        if isinstance(item, dict):
            item = item.get("name")
        if not isinstance(item, str) or not item:
            raise ToolRegistrationError(f"tool '{name}': requires_env must list variable names")
        out.append(item)
    return tuple(out)


def _coerce_args(args: Any) -> tuple[dict[str, Any], str | None]:
    if args is None:
        return {}, None
    if isinstance(args, str):
        if not args.strip():
            return {}, None
        if len(args) > MAX_ARGS_CHARS:
            return {}, f"arguments are {len(args):,} characters of JSON; at most {MAX_ARGS_CHARS:,} are read"
        try:
            parsed = load_json(args, "arguments", MAX_ARGS_DEPTH, MAX_ARGS_VALUES)
        except DataRefused as exc:
            return {}, str(exc)
        except ValueError as exc:
            return {}, f"arguments are not valid JSON: {exc}"
        if not isinstance(parsed, dict):
            return {}, f"arguments must be a JSON object, not {type(parsed).__name__}"
        return parsed, None
    if not isinstance(args, dict):
        return {}, f"arguments must be a JSON object, not {type(args).__name__}"
    problem = data_problem(args, MAX_ARGS_VALUES, MAX_ARGS_DEPTH, shared_ok=True)
    return args, None if problem is None else f"arguments: {problem}"


def observer_context(context: dict[str, Any], trace: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """What the tool hooks receive besides the call itself: ``context`` as Hermes shapes it.

    The ids a caller did not give are ``""``; ``telemetry_schema_version`` and ``middleware_trace``
    (what ``tool_request`` middleware changed) are added; handler-only objects are left out.
    """
    observed = {k: v for k, v in context.items() if k not in HANDLER_ONLY_KEYS}
    for key in HOOK_CONTEXT_KEYS:
        if observed.get(key) is None:
            observed[key] = ""
    observed["telemetry_schema_version"] = OBSERVER_SCHEMA_VERSION
    observed["middleware_trace"] = list(trace or ())
    return observed


# A multimodal tool result (Hermes' envelope): at most this many parts, this much JSON.
MAX_MULTIMODAL_PARTS = 64
MAX_MULTIMODAL_CHARS = 50_000_000


def multimodal_text(value: Any) -> str | None:
    """The JSON text of a Hermes multimodal result (``{"_multimodal": True, "content": [...]}``), or
    ``None`` when ``value`` is not one (or is one too big or too odd to pass on)."""
    if type(value) is not dict or value.get("_multimodal") is not True:
        return None
    content = value.get("content")
    if type(content) is not list or len(content) > MAX_MULTIMODAL_PARTS:
        return None
    if not all(type(part) is dict and isinstance(part.get("type"), str) for part in content):
        return None
    if data_problem(value, MAX_ARGS_VALUES, MAX_ARGS_DEPTH) is not None:
        return None
    try:
        text = json.dumps({"_multimodal": True, **value}, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= MAX_MULTIMODAL_CHARS else None


def multimodal_content(result: str) -> list[dict[str, Any]] | None:
    """The content parts of a tool result that is a multimodal envelope's JSON text, else ``None``."""
    if not result.startswith('{"_multimodal"'):
        return None
    try:
        value = json.loads(result)
    except ValueError:
        return None
    return value["content"] if multimodal_text(value) is not None else None


def _as_json_text(text: str) -> str:
    """``text`` when it is JSON already, else ``{"result": text}``."""
    try:
        json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return json.dumps({"result": text}, ensure_ascii=False)
    return text


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
