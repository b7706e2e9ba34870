"""What the kernel knows of each plugin: :class:`PluginInfo` (public data) and its mutable record."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.data import frozen_made
from .hooks import Callback

if TYPE_CHECKING:
    from .sources.discovery import Candidate
    from .sources.manifest import Manifest

#: The order in which sources are loaded where it matters (deferred model providers: bundled first).
SOURCE_RANK = {"bundled": 0, "user": 1, "project": 2, "entrypoint": 3, "runtime": 4, "pluggy": 4}
#: The error of a plugin whose name is blocked on k.pm.
BLOCKED = "blocked (k.pm.set_blocked): nothing of it is loaded"
# The start of the error of a plugin that ``plugins.enabled`` (Hermes' allow-list) does not list.
NOT_ENABLED = "not enabled in config"
#: The sources whose plugins are off in a home Hermes has used until ``plugins.enabled`` lists them.
OPT_IN_SOURCES = frozenset({"user", "project", "entrypoint"})


@dataclass
class Choice:
    """What config.yaml says about which plugins load: ``plugins.disabled``, and ``plugins.enabled``
    (``None`` when absent: every plugin not disabled loads)."""

    disabled: set[str]
    enabled: set[str] | None
    # Off for this run only: ``HERMES_DISABLE_PLUGINS`` (the CLI's ``--disable``), ``HERMES_NO_PLUGINS``.
    for_run: set[str] = field(default_factory=set)
    none: bool = False
    # Set when the home is one Hermes Agent has used (what shows it: see config.hermes_marker) and
    # config.yaml has no ``plugins.enabled``: then user, project and entry-point plugins need listing.
    opt_in: str | None = None

    def unlisted(self, record: _Record) -> bool:
        """Whether an allow-list applies to ``record``'s plugin and does not list it (by key or
        manifest name).

        The allow-list is ``plugins.enabled``; in a home Hermes has used and that has none (see
        :attr:`opt_in`), an empty one for the plugins that are not bundled.  As in Hermes, plugins
        that another setting chooses are exempt: model providers, memory and context-engine plugins
        (``memory.provider``, ``context.engine``), and the bundled backends and platform adapters.
        """
        listed = self.enabled
        if listed is None:
            if self.opt_in is None or record.source not in OPT_IN_SOURCES:
                return False
            listed = set()
        names = {record.name} | ({record.manifest.name} if record.manifest else set())
        if names & listed or record.is_model_provider:
            return False
        if record.kind == "exclusive" or record.name.startswith(("memory/", "context_engine/")):
            return False
        bundled_service = record.kind in ("backend", "platform") or record.name.startswith(
            ("image_gen/", "platforms/")
        )
        return not (record.source == "bundled" and bundled_service)

    def __contains__(self, name: object) -> bool:
        return name in self.disabled

    def off_for_run(self, record: _Record) -> str | None:
        """The name given to ``--disable`` / ``HERMES_DISABLE_PLUGINS`` that switches ``record``'s
        plugin off for this run (see :func:`matches_for_run`), or ``None``."""
        return matches_for_run(self.for_run, record)


# The variables that switch plugins off for one run (the CLI's --disable NAME and --no-plugins set them).
DISABLE_VARIABLE = "HERMES_DISABLE_PLUGINS"
NO_PLUGINS_VARIABLE = "HERMES_NO_PLUGINS"
RUN_CHOICE_VARIABLES = (DISABLE_VARIABLE, NO_PLUGINS_VARIABLE)
DISABLED_FOR_RUN = "disabled for this run"


def run_choice(environ: Any) -> tuple[set[str], bool]:
    """The plugins switched off for this run (``HERMES_DISABLE_PLUGINS=a,b``) and whether all are
    (``HERMES_NO_PLUGINS`` set to anything but ``""``/``0``/``false``/``no``/``off``)."""
    names = {n.strip() for n in str(environ.get(DISABLE_VARIABLE) or "").split(",") if n.strip()}
    flag = str(environ.get(NO_PLUGINS_VARIABLE) or "").strip().lower()
    return names, flag not in ("", "0", "false", "no", "off")


def run_names(plugin: Any) -> set[str]:
    """The names ``--disable`` knows ``plugin`` (a record or a discovery candidate) by, case-folded:
    its name (key), its manifest's name, its folder, its entry point's name; a plugin of a category
    folder is keyed by its category path (``platforms/irc``)."""
    key = getattr(plugin, "name", None) if isinstance(plugin, _Record) else getattr(plugin, "key", None)
    manifest = getattr(plugin, "manifest", None)
    path = getattr(plugin, "path", None)
    entry_point = getattr(plugin, "entry_point", None)
    names = {key, manifest.name if manifest is not None else None, path.name if path is not None else None}
    names.add(getattr(entry_point, "name", None))
    return {name.casefold() for name in names if isinstance(name, str) and name}


def matches_for_run(given: set[str], plugin: Any) -> str | None:
    """The first (in sorted order) of the ``given`` names that names ``plugin`` (see :func:`run_names`)."""
    if not given:
        return None
    names = run_names(plugin)
    return next((name for name in sorted(given) if name.strip().casefold() in names), None)


def not_enabled_error(key: str, opt_in: str | None = None) -> str:
    """Why ``key`` is not loaded when an allow-list leaves it out; ``opt_in`` is what shows that
    Hermes used the home when there is no ``plugins.enabled`` (see :class:`Choice`)."""
    if opt_in is None:
        why = "plugins.enabled does not list it"
    else:
        why = (
            f"Hermes Agent has used this home: {opt_in}; without plugins.enabled in config.yaml only "
            "bundled plugins run, as in Hermes"
        )
    return f"{NOT_ENABLED} ({why}): run `hermes-kernel plugins enable {key}`"


class SurfaceError(Exception):
    """A surface (a pseudo-plugin from config) that cannot be set up; the message is shown as is
    (it names the file and the fix)."""


@dataclass(frozen=True)
class PluginInfo:
    """What the kernel knows of one plugin (plain data, safe to serialise)."""

    name: str
    version: str
    kind: str
    source: str
    path: str | None
    enabled: bool
    error: str | None
    tools: list[str]
    hooks: list[str]
    commands: list[str]
    disabled_hooks: list[str]
    description: str = ""
    warnings: list[str] = field(default_factory=list)
    hook_errors: dict[str, str] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    cli_commands: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    deferred: bool = False
    middleware: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    # What else it registered, by kind (``auxiliary_tasks``, ``secret_sources``, ...): names only.
    registrations: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(eq=False)
class _Record:
    """The kernel's mutable state for one plugin."""

    name: str
    source: str
    path: Path | None = None
    manifest: Manifest | None = None
    version: str = ""
    kind: str = "standalone"
    description: str = ""
    enabled: bool = False
    error: str | None = None
    tools: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    cli_commands: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    middleware: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    registrations: dict[str, list[str]] = field(default_factory=dict)
    callbacks: list[Callback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    module_name: str | None = None
    # The object registered for this plugin in ``k.pm`` while it is active.
    obj: Any = None
    deferred: bool = False
    entry_point: Any = None

    @property
    def is_model_provider(self) -> bool:
        """A model provider plugin: imported on the first provider lookup, may self-register."""
        return self.kind == "model-provider" or self.name.startswith("model-providers/")

    # The module-name part the kernel gave it (unique in its kernel); see :meth:`Kernel._claim_slug`.
    claimed_slug: str | None = None

    @property
    def slug(self) -> str:
        if self.claimed_slug is not None:
            return self.claimed_slug
        if self.name.isascii() and self.name.isidentifier():
            return self.name  # what the substitutions below would leave as it is
        slug = re.sub(r"\W", "_", self.name.replace("/", "__").replace("-", "_"))
        return f"_{slug}" if slug[:1].isdigit() else slug

    @classmethod
    def from_candidate(cls, cand: Candidate) -> _Record:
        manifest = cand.manifest
        return cls(
            name=cand.key,
            source=cand.source,
            path=cand.path,
            manifest=manifest,
            version=cand.version,
            kind=manifest.kind if manifest else (cand.kind or "standalone"),
            description=cand.description,
            error=cand.error,
            overrides=list(cand.overrides),
            warnings=list(manifest.warnings) if manifest else [],
            entry_point=cand.entry_point,
        )

    def info(self) -> PluginInfo:
        hooks: dict[str, None] = {}
        hook_errors: dict[str, str] = {}
        for cb in self.callbacks:
            hooks[cb.hook] = None
            if cb.error is not None:
                hook_errors.setdefault(cb.hook, cb.error)
        registrations = self.registrations
        return frozen_made(
            PluginInfo,
            dict(
                name=self.name,
                version=self.version,
                kind=self.kind,
                source=self.source,
                path=str(self.path) if self.path is not None else None,
                enabled=self.enabled,
                error=self.error,
                tools=list(self.tools),
                hooks=list(hooks),
                commands=list(self.commands),
                disabled_hooks=list(hook_errors),
                description=self.description,
                warnings=list(self.warnings),
                hook_errors=hook_errors,
                overrides=list(self.overrides),
                cli_commands=list(self.cli_commands),
                skills=list(self.skills),
                deferred=self.deferred,
                middleware=list(self.middleware),
                platforms=list(self.platforms),
                registrations={kind: list(names) for kind, names in registrations.items() if names}
                if registrations
                else {},
            ),
        )


# What only a load tells about a plugin.
_OUTCOME = (
    "enabled",
    "error",
    "tools",
    "hooks",
    "commands",
    "disabled_hooks",
    "warnings",
    "hook_errors",
    "cli_commands",
    "skills",
    "middleware",
    "platforms",
    "registrations",
)


def _same_plugin(old: dict[str, Any], record: _Record) -> bool:
    """Whether a saved record is of the plugin ``record`` stands for (same source and place)."""
    return old.get("source") == record.source and old.get("path") == (
        str(record.path) if record.path else None
    )


def _was_skipped(old: dict[str, Any]) -> bool:
    """Whether the last load did not import the plugin (disabled, not enabled, blocked, missing
    variables): that says nothing of what importing it does."""
    error = old.get("error")
    if not isinstance(error, str) or old.get("enabled"):
        return False
    return error.startswith(("disabled", NOT_ENABLED, BLOCKED)) or "(missing: " in error


def info_from_last_load(old: dict[str, Any], record: _Record) -> PluginInfo | None:
    """``record``'s info (from its manifest, now) with the outcome of the last load (state and counts)
    saved as ``old``; ``None`` when ``old`` is of another plugin or the last load did not import it."""
    if not _same_plugin(old, record) or _was_skipped(old):
        return None
    info = record.info()
    try:
        last = PluginInfo(**old)
    except TypeError:
        return info
    return replace(info, **{name: getattr(last, name) for name in _OUTCOME})
