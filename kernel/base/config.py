"""The kernel's home directory, ``config.yaml`` and ``.env``."""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .safe_yaml import MAX_CONFIG_BYTES, MAX_DOTENV_BYTES, load_json, load_yaml, read_bounded, yaml_problem

TRUTHY = frozenset({"1", "true", "yes", "on"})


def truthy(value: str | None) -> bool:
    """``1``, ``true``, ``yes`` and ``on`` (any case) are true; anything else is false."""
    return value is not None and value.strip().lower() in TRUTHY


def resolve_home(home: str | os.PathLike[str] | None) -> Path:
    """The explicit ``home``, else ``$HERMES_HOME``, else ``~/.hermes``."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get("HERMES_HOME", "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".hermes"


def load_config(
    home: Path,
    override: Mapping[str, Any] | None,
    later: list[Callable[[], object]] | None = None,
    *,
    check: ConfigSchema | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Read ``<home>/config.yaml`` and deep-merge ``override`` over it.

    Never raises: a missing file is an empty config; an unreadable or malformed
    one is reported in the returned problem list and ignored.  With ``check``, the
    file is also checked against that schema (:mod:`kernel.base.schema`):
    each unknown key or wrong value is a :class:`ConfigNote` in the problem list.
    A parse or a check that could not be remembered yet (no cache folder) leaves in
    ``later`` the call that remembers it, for when the kernel writes its caches.
    """
    problems: list[str] = []
    data: dict[str, Any] = {}
    path = home / "config.yaml"
    if path.is_file():
        try:
            loaded, notes = _read_config(home, path, later, check)
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: cannot read the file ({exc}); using defaults")
        except ConfigYamlError as exc:
            problems.append(f"{path}: not valid YAML ({exc}); using defaults")
        else:
            if isinstance(loaded, dict):
                data = loaded
                problems.extend(notes)
            elif loaded is not None:
                problems.append(
                    f"{path}: the top level must be a mapping, not {type(loaded).__name__}; using defaults"
                )
    dotenv = home / ".env"
    with contextlib.suppress(OSError):
        if dotenv.is_file() and dotenv.stat().st_size > MAX_DOTENV_BYTES:
            problems.append(
                f"{dotenv}: {dotenv.stat().st_size:,} bytes; .env files are read up to "
                f"{MAX_DOTENV_BYTES:,} bytes, so none of its variables is set (make it smaller)"
            )
    if override:
        data = deep_merge(data, override)
    return data, problems


class ConfigYamlError(ValueError):
    """``config.yaml`` is not valid YAML (the message says where)."""


class ConfigNote(str):
    """A problem of ``config.yaml`` that its schema found: the message (this string), ``fix`` (what to
    do, for ``doctor``) and ``level`` (``warning``: an unknown key; ``error``: a wrong value)."""

    fix: str
    level: str

    def __new__(cls, message: str, fix: str = "", level: str = "warning") -> ConfigNote:
        note = super().__new__(cls, message)
        note.fix, note.level = fix, level
        return note


@dataclass(frozen=True)
class ConfigSchema:
    """Where the schema of ``config.yaml`` comes from: the modules of the sections' owners (each with
    ``CONFIG_SCHEMA``, its top-level keys and their schemas, and optionally ``MOVED``, a key written at
    the top level that belongs elsewhere: its place), and the top-level keys a service reads and checks
    itself (known, never flagged).  Nothing is imported until a file must be checked."""

    modules: tuple[str, ...] = ()
    owned: tuple[str, ...] = ()
    #: ``(dotted section, JSON file)``: a section a bundled plugin owns, its schema in a file beside it.
    files: tuple[tuple[str, str], ...] = ()

    def stamp(self) -> str:
        """What the schema depends on, read without importing it: the size and time of each file."""
        files = [
            Path(__file__).with_name("schema.py"),
            *map(_module_file, self.modules),
            *(Path(file) for _, file in self.files),
        ]
        marks = []
        for file in files:
            try:
                info = file.stat() if file is not None else None
            except OSError:
                info = None
            marks.append(f"{info.st_size}-{info.st_mtime_ns}" if info else "?")
        return ",".join(marks)

    def build(self) -> dict[str, Any]:
        """The whole schema (built once per process for equal declarations)."""
        with _schemas_lock:
            built = _schemas.get(self)
            if built is None:
                from .schema import OWNED, config_schema

                sections: dict[str, dict[str, Any]] = dict.fromkeys(self.owned, OWNED)
                moved: dict[str, str] = {}
                for name in self.modules:
                    module = importlib.import_module(name)
                    # A copy: grafting a plugin's section must not change the owner's module-level schema.
                    sections.update(copy.deepcopy(module.CONFIG_SCHEMA))
                    moved.update(getattr(module, "MOVED", {}))
                built = config_schema(sections, moved)
                for dotted, file in self.files:
                    _graft(built, dotted.split("."), file)
                _schemas[self] = built
            return built


_schemas: dict[ConfigSchema, dict[str, Any]] = {}
_schemas_lock = threading.Lock()
#: A bundled plugin's schema file is read up to this size and this depth (the folder may be the user's).
MAX_SCHEMA_FILE_BYTES = 256 * 1024
MAX_SCHEMA_FILE_DEPTH = 32


def _graft(schema: dict[str, Any], path: list[str], file: str) -> None:
    """Put the schema in ``file`` (JSON) at ``path`` of ``schema``, under mappings it already has; a file
    that is missing, too big or deep, or not JSON leaves that section unchecked (its plugin still checks
    its values)."""
    try:
        text = read_bounded(Path(file), MAX_SCHEMA_FILE_BYTES, "schema")
        fragment = load_json(text, file, max_depth=MAX_SCHEMA_FILE_DEPTH, max_values=20_000)
    except (OSError, UnicodeDecodeError, ValueError):  # FileTooLarge is an OSError, DataRefused a ValueError
        return
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(fragment)
    except SchemaError:
        return
    node = schema
    for key in path[:-1]:
        node = node.get("properties", {}).get(key)
        if not isinstance(node, dict):
            return
    if isinstance(fragment, dict):
        node.setdefault("properties", {})[path[-1]] = fragment


def _module_file(name: str) -> Path | None:
    """The file of module ``name``, found without importing it or its packages (from the nearest
    package already imported)."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return Path(file) if file else None
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        package = sys.modules.get(".".join(parts[:i]))
        folders = list(getattr(package, "__path__", None) or [])
        if folders:
            base = Path(folders[0]).joinpath(*parts[i:])
            return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
    return None


def _read_config(
    home: Path, path: Path, later: list[Callable[[], object]] | None, check: ConfigSchema | None = None
) -> tuple[Any, list[ConfigNote]]:
    """The parsed ``config.yaml`` (the same text as last time is answered from the cache), and what
    its schema check found (also cached by content, so an unchanged file never imports jsonschema)."""
    text = read_bounded(path, MAX_CONFIG_BYTES, "config.yaml")
    from . import state  # with the first config.yaml read: `import kernel` reads no cache

    digest = state.text_digest(text)
    hit, data = state.cached_config(home, digest)
    if not hit:
        import yaml

        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:
            raise ConfigYamlError(yaml_problem(exc)) from None
        if not state.remember_config(home, digest, data) and later is not None:
            later.append(lambda: state.remember_config(home, digest, data))
    if check is None or not isinstance(data, dict):
        return data, []
    return data, _checked(home, path, digest, data, later, check)


def _checked(
    home: Path,
    path: Path,
    digest: str,
    data: dict[str, Any],
    later: list[Callable[[], object]] | None,
    schema: ConfigSchema,
) -> list[ConfigNote]:
    from . import state

    # The result depends on the text, on where the file is (the fixes name it) and on the schema.
    declared = state.text_digest(repr((schema.modules, schema.owned)))
    key = f"{digest}:{schema.stamp()}:{declared}:{path}"
    found = state.cached_check(home, key)
    if found is None:
        try:
            from .schema import check_config

            found = check_config(data, str(path), schema=schema.build())
        except Exception as exc:  # the check must never stop a start
            return [ConfigNote(f"config.yaml: could not be checked against its schema ({exc!r:.200})")]
        if not state.remember_check(home, key, found) and later is not None:
            later.append(lambda: state.remember_check(home, key, found))
    return [ConfigNote(message, fix, level) for message, fix, level in found]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``base`` with ``override`` merged in, mappings merged key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def plugin_names(
    value: Any, key: str, where: str = "config.yaml"
) -> tuple[list[str] | None, ConfigNote | None]:
    """``plugins.<key>`` (``disabled`` or ``enabled``) as a list of plugin names, and what is wrong with it.

    A list of strings is taken as it is.  A string is what the user meant as a list of its
    comma-separated names (``disabled: calculator`` is ``[calculator]``): it is read so, with a
    warning.  A list's entries that are not strings are left out, with a warning.  Anything else is
    ignored (``None``), with an error.  ``where`` is the file named in the fix.
    """
    if isinstance(value, list):
        bad = [v for v in value if not isinstance(v, str)]
        names = [v for v in value if isinstance(v, str)]
        if not bad:
            return names, None
        return names, ConfigNote(
            f"config.yaml: 'plugins.{key}' must be a list of plugin names; {len(bad)} of its entries "
            "are not names (a number, a mapping, ...) and are ignored",
            f"write each entry of 'plugins.{key}' in {where} as a plugin name",
        )
    if isinstance(value, str):
        names = [name.strip() for name in value.split(",") if name.strip()]
        written = f"`{key}: [{', '.join(names)}]`"
        return names, ConfigNote(
            f"config.yaml: 'plugins.{key}' must be a list of plugin names, not a string (write it as "
            f"{written}); it is read as that list",
            f"write it as {written} in {where}",
        )
    kind = "a mapping" if isinstance(value, dict) else type(value).__name__
    return None, ConfigNote(
        f"config.yaml: 'plugins.{key}' must be a list of plugin names, not {kind}; ignored",
        f"write it as a list in {where}, e.g. `{key}: [calculator]`",
        "error",
    )


def read_dotenv(home: Path) -> dict[str, str]:
    """The variables set in ``<home>/.env`` (empty when there is none)."""
    path = home / ".env"
    if not path.is_file():
        return {}
    try:
        if path.stat().st_size > MAX_DOTENV_BYTES:
            return {}  # reported once by load_config
        from dotenv import dotenv_values

        values = dotenv_values(path, interpolate=False)
    except (OSError, UnicodeDecodeError):
        return {}
    return {k: v for k, v in values.items() if v is not None}


#: What Hermes Agent leaves in a home it has used and the kernel never writes: files and folders.
HERMES_FILES = ("SOUL.md", "state.db")
HERMES_FOLDERS = ("sessions",)


def hermes_marker(home: Path, config: Mapping[str, Any]) -> str | None:
    """What shows that Hermes Agent has used ``home``, or ``None`` for a home the kernel made.

    The markers, checked in this order: ``_config_version`` at the top of ``config`` (the home's
    config.yaml as read), the files ``SOUL.md`` and ``state.db``, the folder ``sessions/``.  In such a
    home, plugins other than the bundled ones run only when ``plugins.enabled`` lists them, as in
    Hermes.  Costs a few ``stat`` calls; reads no file.
    """
    if isinstance(config, Mapping) and "_config_version" in config:
        return "config.yaml has _config_version"
    for name in HERMES_FILES:
        if os.path.isfile(home / name):
            return f"{name} is there"
    for name in HERMES_FOLDERS:
        if os.path.isdir(home / name):
            return f"{name}/ is there"
    return None


def section(config: Mapping[str, Any], *keys: str) -> Any:
    """``config[k1][k2]...`` or ``None`` when any level is missing or not a mapping."""
    node: Any = config
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def profile_name(home: Path) -> str:
    """The Hermes profile a home stands for: ``default`` (``~/.hermes``), ``<name>``
    (``<root>/profiles/<name>``), else ``custom``."""
    path = Path(home).expanduser()
    if path.parent.name == "profiles" and path.name:
        return path.name
    default = Path.home() / ".hermes"
    same = os.path.normcase(str(path.resolve(strict=False))) == os.path.normcase(
        str(default.resolve(strict=False))
    )
    return "default" if same else "custom"
