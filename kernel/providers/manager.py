"""``k.providers``: every slot's providers, the config's choice, and the active model client."""

from __future__ import annotations

import json
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.config import ConfigNote, section
from ..core.api import contained
from ..core.watchdog import SharedRLock
from ..tools import ToolRegistrationError
from .context_engine import ContextEngine
from .hermes_config import BUILT_IN, model_name, model_section, shown_name
from .image_gen import ImageGenProvider, error_response, resolve_aspect_ratio
from .memory import MemoryProvider
from .profile import ProviderProfile
from .registry import ProviderCatalog, ProviderLookupError
from .slots import SLOTS as ALL_SLOTS
from .video_gen import VideoGenProvider
from .web_search import WebSearchProvider

if TYPE_CHECKING:
    from ..core.kernel import Kernel
    from .results import ChatTransport

# slot -> (config section, key, default, base class)
SLOTS: dict[str, tuple[str, str, str | None, type | None]] = {
    "model_provider": ("model", "provider", None, None),
    "memory": ("memory", "provider", None, MemoryProvider),
    "context_engine": ("context", "engine", "compressor", ContextEngine),
    "image_gen": ("image_gen", "provider", None, ImageGenProvider),
    "web_search": ("web_search", "provider", None, WebSearchProvider),
    "video_gen": ("video_gen", "provider", None, VideoGenProvider),
}
# The slots whose provider config.yaml chooses by name (the model's is chosen from the catalog).
CHOSEN_SLOTS = tuple(slot for slot in SLOTS if slot != "model_provider")
# The slots whose only available provider is chosen when config.yaml names none.
AUTO_SLOTS = frozenset({"image_gen"})

GENERATE_IMAGE_SCHEMA = {
    "name": "generate_image",
    "description": (
        "Generate an image from a text prompt with the configured image backend; returns the file path."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "what the image should show"},
            "aspect_ratio": {
                "type": "string",
                "enum": ["landscape", "square", "portrait"],
                "description": "the image's shape (default landscape)",
            },
        },
        "required": ["prompt"],
    },
}


class ProviderSelectionError(ValueError):
    """The configured provider cannot be used: unknown name or unavailable."""


@dataclass(frozen=True)
class ProviderStatus:
    """One row of ``hermes-kernel providers list``."""

    slot: str
    name: str
    plugin: str | None
    active: bool
    available: bool
    reason: str = ""
    endpoint: str = ""  # a model provider's base URL as resolved now (credentials in it masked)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProviderManager:
    """The providers of one kernel, and which one of each slot the config selects."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self.catalog = ProviderCatalog(loader=kernel.host.load_deferred)
        #: Slot-hook callbacks already asked for their providers (each is asked once).
        self.slots_asked: weakref.WeakSet[Any] = weakref.WeakSet()
        self._client: Any = None
        self._client_key: Any = None
        self._host_model: Any = None  # a host's model (use_model), in place of config.yaml's
        self._lock = SharedRLock()

    # -- model providers ---------------------------------------------------------

    def get_provider_profile(self, name: str) -> ProviderProfile:
        """A model provider profile by name or alias (loads provider plugins on first use)."""
        return self.catalog.get(name)

    def list_providers(self) -> list[ProviderProfile]:
        """Every model provider profile, by name."""
        return self.catalog.profiles()

    def model_config(self) -> dict[str, Any]:
        """config.yaml's ``model:`` section, its model name under ``model`` whichever key held it
        (``model.model``, Hermes' ``model.default`` or ``model.name``: see
        :func:`~kernel.providers.hermes_config.model_name`)."""
        return model_section(section(self._kernel.config, "model"))

    def _config_file(self) -> str:
        return str(self._kernel.home / "config.yaml")

    def _profile_for(self, name: Any, key: str = "model.provider") -> ProviderProfile:
        """The profile config.yaml's provider ``name`` selects, or a :class:`ProviderSelectionError`
        naming the key, the file and the fix."""
        if not isinstance(name, str):
            raise ProviderSelectionError(
                f"{key} in {self._config_file()} must be a provider name (text), not {shown_name(name)}"
            )
        try:
            return self.catalog.get(name)
        except ProviderLookupError as exc:
            raise ProviderSelectionError(f"{key}: {exc} ({key} is set in {self._config_file()})") from None

    def use_model(self, transport: ChatTransport | None) -> Any:
        """Make a host's ``transport`` the active model, in place of ``model.provider``'s.

        What the reference loop and ``ctx.llm`` (with no override) call from then
        on; it still goes through the kernel's model middleware and fires the
        api hooks, and a plugin's override of provider or model still needs the
        same permission (``plugins.entries.<id>.llm``).  The kernel never closes
        it.  ``None`` goes back to config.yaml's.  Returns the wrapped model
        (see :class:`~kernel.providers.host_model.HostModel`).
        """
        from .host_model import HostModel

        model = None if transport is None else HostModel(transport, hooks=self._kernel)
        with self._lock:
            self._host_model = model
        return model

    @property
    def host_model(self) -> Any:
        """The host's model :meth:`use_model` installed (``None`` while config.yaml's is in use)."""
        return self._host_model

    def model(self) -> Any:
        """The client of the active model: the host's (:meth:`use_model`), else the configured one
        (``model.provider``), built on first use.

        Raises :class:`ProviderSelectionError` when no provider is configured,
        the name is unknown, or the provider is unavailable (with the reason).
        """
        host = self._host_model
        if host is not None:
            return host
        config = self.model_config()
        name = config.get("provider")
        if not name:
            raise ProviderSelectionError("no model provider configured: set model.provider in config.yaml")
        with self._lock:
            key = json.dumps(config, sort_keys=True, default=str)
            if self._client is not None and self._client_key == key:
                return self._client
            profile = self._profile_for(name)
            ok, reason = profile.availability(config, self._kernel.environ)
            if not ok:
                raise ProviderSelectionError(f"model provider '{profile.name}' is not available: {reason}")
            from .transport import ProviderError

            try:
                problem = model_name(section(self._kernel.config, "model"))[1]
                self._client = self._make_client(profile, config, problem)
            except ProviderError as exc:  # e.g. a scripted model whose script cannot be read
                raise ProviderSelectionError(f"model provider '{profile.name}': {exc}") from None
            self._client_key = key
            return self._client

    def client(self, config: dict[str, Any] | None = None) -> Any:
        """A model client for ``config`` (a ``model:`` section); ``None`` means the user's, cached.

        Other configurations (a plugin's allowed override) get a fresh client.
        """
        if config is None or config == self.model_config():
            return self.model()
        name = config.get("provider")
        if not name:
            raise ProviderSelectionError("no model provider configured: set model.provider in config.yaml")
        profile = self._profile_for(name, "provider")
        ok, reason = profile.availability(config, self._kernel.environ)
        if not ok:
            raise ProviderSelectionError(f"model provider '{profile.name}' is not available: {reason}")
        from .transport import ProviderError

        try:
            return self._make_client(profile, config)
        except ProviderError as exc:
            raise ProviderSelectionError(f"model provider '{profile.name}': {exc}") from None

    def _make_client(
        self, profile: ProviderProfile, config: dict[str, Any], problem: str | None = None
    ) -> Any:
        model = model_name(config)[0] or profile.default_model or ""
        if profile.api_mode == "scripted":
            from .scripted import ScriptedTransport

            script = config.get("script")
            if not script:
                raise ProviderSelectionError(
                    "the scripted provider needs model.script (a YAML file of turns)"
                )
            path = Path(str(script)).expanduser()
            if not path.is_absolute():
                path = self._kernel.home / path
            return ScriptedTransport(
                path, provider=profile.name, model=model or "scripted", hooks=self._kernel
            )
        from .transport import ChatCompletionsTransport

        if not model:
            raise ProviderSelectionError(
                f"model provider '{profile.name}' needs a model name: "
                + (f"{problem}; " if problem else "")
                + f"set model.default (or model.model) in {self._config_file()}"
            )
        api_key, base_url = profile.credentials(config, self._kernel.environ)
        withheld = profile.withheld_key(config, self._kernel.environ) if api_key is None else None
        if withheld:
            self._kernel.log.warning("model_key_withheld", provider=profile.name, detail=withheld)
        return ChatCompletionsTransport(
            profile,
            model=model,
            api_key=api_key,
            base_url=base_url,
            hooks=self._kernel,
            timeout=float(config.get("timeout", 60.0)),
            max_retries=int(config.get("max_retries", 3)),
        )

    def close(self) -> None:
        """Close the model client (its HTTP connections) and shut the slot providers down."""
        with self._lock:
            client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close):
            close()
        for slot in ALL_SLOTS:
            if slot == "model_provider":
                continue
            for provider in self._kernel.slots.providers(slot).values():
                shutdown = getattr(provider.obj, "shutdown", None)
                if callable(shutdown):
                    try:
                        shutdown()
                    except Exception as exc:
                        self._kernel.log.warning(
                            "provider_shutdown_failed", slot=slot, provider=provider.name, error=str(exc)
                        )

    def _memory_cli_module(self) -> tuple[Any, Any]:
        """The active memory provider and its plugin's ``cli`` module (``None`` for either it lacks)."""
        try:
            memory = self.memory()
        except ProviderSelectionError:
            return None, None
        if memory is None:
            return None, None
        plugin = self._kernel.slots.get("memory", memory.name).plugin
        return memory, self._kernel.host.plugin_submodule(plugin, "cli")

    def memory_cli(self) -> tuple[str, Any] | None:
        """``(name, register_cli)`` from the active memory provider's ``cli.py``, if it has one."""
        memory, module = self._memory_cli_module()
        register_cli = getattr(module, "register_cli", None) if module is not None else None
        return (memory.name, register_cli) if callable(register_cli) else None

    def memory_cli_handler(self) -> Any:
        """What runs the active memory provider's command, as Hermes finds it: ``<name>_command`` in
        its ``cli.py`` (the configured name, else the provider's), else ``honcho_command``; or ``None``.

        It is the command's default ``func``: an action whose parser sets its own ``func`` still wins.
        """
        memory, module = self._memory_cli_module()
        if memory is None or module is None:
            return None
        for name in dict.fromkeys((self.selected("memory") or "", memory.name, "honcho")):
            handler = getattr(module, f"{name}_command", None) if name.isidentifier() else None
            if callable(handler):
                return handler
        return None

    # -- setting a memory provider up, backing it up ------------------------------------

    def memory_provider(self, name: str | None = None) -> MemoryProvider:
        """The memory provider ``name`` (default: the one ``memory.provider`` selects), available or not.

        Raises :class:`ProviderSelectionError` when none is configured or the name is unknown.
        """
        wanted = name or self.selected("memory")
        if not wanted:
            raise ProviderSelectionError("no memory provider configured: set memory.provider in config.yaml")
        providers = self._kernel.slots.providers("memory")
        found = _find(providers, wanted)
        if found is None:
            known = ", ".join(sorted(providers)) or "none"
            raise ProviderSelectionError(f"no memory provider named '{wanted}' (available: {known})")
        return found.obj

    def memory_config_schema(self, name: str | None = None) -> list[dict[str, Any]]:
        """The setup fields of a memory provider (its ``get_config_schema()``), each a dict with a ``key``.

        A provider whose method raises or answers something else than a list
        of such dicts is logged and has none.
        """
        provider = self.memory_provider(name)
        with contained(self._kernel.log, "memory_config_schema_failed", provider=provider.name) as call:
            fields = provider.get_config_schema()
        if call.failed:
            return []
        if not isinstance(fields, list | tuple):
            self._kernel.log.warning(
                "memory_config_schema_invalid", provider=provider.name, value=repr(fields)[:200]
            )
            return []
        return [dict(f) for f in fields if isinstance(f, dict) and isinstance(f.get("key"), str)]

    def save_memory_config(self, values: dict[str, Any], name: str | None = None) -> None:
        """Hand a setup's non-secret ``values`` to a memory provider's ``save_config`` (with the home).

        Secrets belong in ``<home>/.env``, not here.  The provider's errors propagate.
        """
        self.memory_provider(name).save_config(dict(values), str(self._kernel.home))

    def memory_backup_paths(self) -> list[Path]:
        """The existing paths outside the home where the active memory provider keeps state
        (its ``backup_paths()``), for a backup to include; none when no provider is configured."""
        try:
            provider = self.memory_provider()
        except ProviderSelectionError:
            return []
        # A backup must not fail because of a provider.
        with contained(self._kernel.log, "memory_backup_paths_failed", provider=provider.name) as call:
            declared = provider.backup_paths()
        if call.failed:
            return []
        if not isinstance(declared, list | tuple):
            self._kernel.log.warning(
                "memory_backup_paths_invalid", provider=provider.name, value=repr(declared)[:200]
            )
            return []
        out: list[Path] = []
        for raw in declared:
            if not isinstance(raw, str | Path) or not str(raw).strip():
                continue
            try:
                path = Path(raw).expanduser()
                if path.is_absolute() and path.exists() and path not in out:
                    out.append(path)
            except (OSError, RuntimeError, ValueError):  # "~nobody", or a path the system refuses
                continue
        return out

    # -- the other slots ---------------------------------------------------------

    def selected(self, slot: str) -> str | None:
        """The name the config selects for ``slot`` (or the slot's default).

        An image generator is chosen as Hermes chooses it when config.yaml names none, or names
        one that is not installed: the only available one, else ``fal`` when it is available.
        """
        group, key, default, _base = SLOTS[slot]
        value = section(self._kernel.config, group, key)
        if value and (slot not in AUTO_SLOTS or _find(self._kernel.slots.providers(slot), str(value))):
            return str(value)
        if slot in AUTO_SLOTS:
            return self._fallback(slot) or (str(value) if value else default)
        return default

    def _fallback(self, slot: str) -> str | None:
        ready = [n for n, p in self._kernel.slots.providers(slot).items() if _availability(p.obj)[0]]
        if len(ready) == 1:
            return ready[0]
        return "fal" if "fal" in ready else None

    def fallback_note(self, slot: str) -> str | None:
        """What to tell the user when ``slot``'s configured provider is missing and another answers."""
        group, key, _default, _base = SLOTS[slot]
        value = section(self._kernel.config, group, key)
        chosen = self.selected(slot)
        if not value or slot not in AUTO_SLOTS or chosen == str(value):
            return None
        known = ", ".join(sorted(self._kernel.slots.providers(slot))) or "none"
        return (
            f"{group}.{key}: no {slot} provider named '{value}' is installed (available: {known}); "
            f"'{chosen}' is used in its place: install '{value}' or set {group}.{key} to '{chosen}'"
        )

    def active(self, slot: str) -> Any:
        """The configured provider of ``slot``, or ``None`` when none is configured.

        Raises :class:`ProviderSelectionError` for an unknown name (listing the
        available ones) or an unavailable provider (with the reason).
        """
        name = self.selected(slot)
        if not name:
            return None
        group, key, default, _base = SLOTS[slot]
        providers = self._kernel.slots.providers(slot)
        found = _find(providers, name)
        if found is None:
            if name == default and not section(self._kernel.config, group, key):
                return None  # the default is not installed; nothing was asked for
            known = ", ".join(sorted(providers)) or "none"
            raise ProviderSelectionError(
                f"{group}.{key}: no {slot} provider named '{name}' (available: {known})"
            )
        name, provider = found.name, found.obj
        ok, reason = _availability(provider)
        if not ok:
            raise ProviderSelectionError(f"{slot} provider '{name}' is not available: {reason}")
        return provider

    def memory(self) -> MemoryProvider | None:
        return self.active("memory")

    def context_engine(self) -> ContextEngine | None:
        return self.active("context_engine")

    def image_gen(self) -> ImageGenProvider | None:
        return self.active("image_gen")

    def status(self) -> list[ProviderStatus]:
        """Every provider of every slot, with what the config selects and why one is unavailable."""
        rows: list[ProviderStatus] = []
        wanted = self.model_config().get("provider")
        wanted = wanted.casefold() if isinstance(wanted, str) else ""
        entries = self.catalog.entries()
        try:  # Hermes' provider names reach a built-in endpoint: listed when config.yaml selects one
            chosen = self.catalog.entry(wanted) if wanted else None
        except ProviderLookupError:
            chosen = None
        if chosen is not None and chosen.plugin == BUILT_IN:
            entries.append(chosen)
        for entry in entries:
            rows.append(self._model_row(entry.profile, entry.plugin, _is(entry.profile, wanted)))
        for slot in CHOSEN_SLOTS:
            providers = self._kernel.slots.providers(slot)
            chosen = _find(providers, self.selected(slot) or "")
            for name, provider in sorted(providers.items()):
                ok, reason = _availability(provider.obj)
                rows.append(ProviderStatus(slot, name, provider.plugin, provider is chosen, ok, reason))
        for problem_slot, problem in self.problems():
            rows.append(
                ProviderStatus(
                    problem_slot, shown_name(self.selected(problem_slot) or ""), None, True, False, problem
                )
            )
        return rows

    def _model_row(self, profile: ProviderProfile, plugin: str, active: bool) -> ProviderStatus:
        config = self.model_config() if active else {}
        ok, reason = profile.availability(config, self._kernel.environ)
        endpoint = ""
        if profile.api_mode != "scripted":
            from ..base.redact import mask_urls

            endpoint = mask_urls(str(profile.credentials(config, self._kernel.environ)[1] or ""))
        return ProviderStatus("model_provider", profile.name, plugin, active, ok, reason, endpoint)

    def problems(self) -> list[tuple[str, str]]:
        """``(slot, message)`` for each configured choice that cannot be used."""
        out: list[tuple[str, str]] = []
        if self.model_config().get("provider"):
            try:
                self._profile_for(self.model_config()["provider"])
            except ProviderSelectionError as exc:
                out.append(("model_provider", str(exc)))
        for slot in CHOSEN_SLOTS:
            name = self.selected(slot)
            group, key, default, _base = SLOTS[slot]
            if name and _find(self._kernel.slots.providers(slot), name) is None:
                if name == default and not section(self._kernel.config, group, key):
                    continue
                known = ", ".join(sorted(self._kernel.slots.providers(slot))) or "none"
                out.append((slot, f"{group}.{key}: no {slot} provider named '{name}' (available: {known})"))
        return out

    # -- tools of the active providers -----------------------------------------------

    def register_tools(self) -> None:
        """Offer the tools of the active memory provider and ``generate_image``; report problems."""
        kernel = self._kernel
        for _slot, problem in self.problems():
            kernel.host.config_problem(problem)
        for slot in CHOSEN_SLOTS:
            try:
                self.active(slot)
            except ProviderSelectionError as exc:
                if "not available" in str(exc):
                    kernel.log.warning("provider_unavailable", slot=slot, detail=str(exc))
            note = self.fallback_note(slot) if slot in AUTO_SLOTS else None
            if note is not None:
                kernel.host.config_problem(ConfigNote(note, f"edit {kernel.home / 'config.yaml'}"))
        self._register_memory_tools()
        self._register_image_tool()

    def _register_memory_tools(self) -> None:
        """The tools of the active memory provider and of the active context engine (if it has any)."""
        kernel = self._kernel
        for slot, prefix in (("memory", "memory"), ("context_engine", "context")):
            try:
                provider = self.active(slot)
            except ProviderSelectionError:
                continue
            get_schemas = getattr(provider, "get_tool_schemas", None)
            if provider is None or not callable(get_schemas):
                continue
            plugin = kernel.slots.get(slot, provider.name).plugin
            try:
                schemas = list(get_schemas() or [])
            except Exception as exc:
                kernel.log.warning(
                    f"{prefix}_tools_failed", provider=provider.name, error=f"{type(exc).__name__}: {exc}"
                )
                continue
            for schema in schemas:
                body = schema.get("function", schema) if isinstance(schema, dict) else {}
                name = body.get("name") if isinstance(body, dict) else None
                if not isinstance(name, str):
                    kernel.log.warning(
                        f"{prefix}_tool_invalid", provider=provider.name, schema=repr(schema)[:200]
                    )
                    continue
                _add_provider_tool(
                    kernel,
                    plugin,
                    name,
                    f"{prefix}-{provider.name}",
                    schema,
                    _provider_handler(provider, name),
                )

    def _register_image_tool(self) -> None:
        """``generate_image`` for the chosen image generator, even an unavailable one: its calls then
        answer with an error naming the provider and what it lacks (as in Hermes)."""
        found = _find(self._kernel.slots.providers("image_gen"), self.selected("image_gen") or "")
        if found is None:
            return
        provider, plugin = found.obj, found.plugin
        _add_provider_tool(
            self._kernel,
            plugin,
            "generate_image",
            "image_gen",
            GENERATE_IMAGE_SCHEMA,
            _image_handler(provider),
        )


def _availability(provider: Any) -> tuple[bool, str]:
    try:
        ok = bool(provider.is_available())
    except Exception as exc:
        return False, f"is_available() raised {type(exc).__name__}: {exc}"
    if ok:
        return True, ""
    reason_fn = getattr(provider, "unavailable_reason", None)
    try:
        reason = reason_fn() if callable(reason_fn) else ""
    except Exception:
        reason = ""
    return False, reason or "is_available() returned False"


def _is(profile: ProviderProfile, wanted: str) -> bool:
    return bool(wanted) and wanted in {profile.name.casefold(), *(a.casefold() for a in profile.aliases)}


def _provider_handler(provider: Any, name: str) -> Any:
    """A tool handler that hands the call to the provider's ``handle_tool_call``."""

    def handler(args: dict[str, Any], **context: Any) -> str:
        return provider.handle_tool_call(name, args, **context)

    return handler


def _image_handler(provider: ImageGenProvider) -> Any:
    def handler(args: dict[str, Any], **context: Any) -> str:
        prompt = args.get("prompt")
        aspect = resolve_aspect_ratio(args.get("aspect_ratio"))
        if not isinstance(prompt, str) or not prompt.strip():
            return json.dumps(
                error_response(error="generate_image needs a non-empty 'prompt'", error_type="bad_input")
            )
        extra = {k: v for k, v in args.items() if k not in ("prompt", "aspect_ratio")}
        ok, reason = _availability(provider)
        if not ok:
            return json.dumps(
                error_response(
                    error=f"image generator '{provider.name}' is not available: {reason}",
                    error_type="provider_unavailable",
                    provider=provider.name,
                    prompt=prompt,
                    aspect_ratio=aspect,
                ),
                ensure_ascii=False,
            )
        try:
            result = provider.generate(prompt, aspect, **extra)
        except Exception as exc:
            result = error_response(
                error=f"{type(exc).__name__}: {exc}",
                provider=provider.name,
                prompt=prompt,
                aspect_ratio=aspect,
            )
        return json.dumps(result, ensure_ascii=False, default=str)

    return handler


def _find(providers: dict[str, Any], name: str) -> Any:
    """The provider called ``name``; else the only one offered by a plugin called ``name``.

    Hermes users select some providers by their plugin's name (``local_memory``)
    where the provider calls itself something shorter (``local``).
    """
    if name in providers:
        return providers[name]
    by_plugin = [p for p in providers.values() if p.plugin == name or p.plugin.rsplit("/", 1)[-1] == name]
    return by_plugin[0] if len(by_plugin) == 1 else None


def _add_provider_tool(
    kernel: Kernel, plugin: str, name: str, toolset: str, schema: Any, handler: Any
) -> None:
    """Register a tool of an active provider, attributed to the provider's plugin."""
    record = kernel.host.records.get(plugin)
    try:
        tool, _warnings = kernel.tools.register(name, toolset, schema, handler, plugin=plugin)
    except ToolRegistrationError as exc:
        if record is not None:
            record.warnings.append(str(exc))
        kernel.log.warning("provider_tool_refused", plugin=plugin, tool=name, error=str(exc))
        return
    from ..tools.service import note_shadowing

    note_shadowing(kernel, tool)
    if record is not None:
        record.tools.append(tool.name)
