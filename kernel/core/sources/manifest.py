"""Plugin manifests (``plugin.yaml``): parsing and validation without importing code."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from ...base.data import frozen_made
from ...base.safe_yaml import MAX_MANIFEST_BYTES, load_yaml, read_bounded, yaml_problem

if TYPE_CHECKING:
    pass

MANIFEST_NAMES = ("plugin.yaml", "plugin.yml")

KINDS = ("standalone", "backend", "exclusive", "platform", "model-provider")

KNOWN_FIELDS = frozenset(
    {
        "name",
        "version",
        "description",
        "author",
        "kind",
        "provides_tools",
        "provides_hooks",
        "requires_env",
        "optional_env",
        "label",
    }
)


class ManifestError(ValueError):
    """A manifest that cannot be used; names the file and, when known, the field."""

    def __init__(self, path: Path | str, message: str, field: str | None = None) -> None:
        self.path = Path(path)
        self.field = field
        where = f"{self.path}: field '{field}'" if field else str(self.path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class EnvVar:
    """One entry of ``requires_env`` / ``optional_env``."""

    name: str
    description: str = ""
    url: str = ""
    secret: bool = False
    prompt: str = ""


@dataclass(frozen=True)
class Manifest:
    """A validated plugin manifest.  ``extra`` keeps the fields the kernel does not know."""

    name: str
    version: str = ""
    description: str = ""
    author: str = ""
    kind: str = "standalone"
    provides_tools: tuple[str, ...] = ()
    provides_hooks: tuple[str, ...] = ()
    requires_env: tuple[EnvVar, ...] = ()
    optional_env: tuple[EnvVar, ...] = ()
    label: str = ""
    path: Path | None = None
    declares_tools: bool = False
    declares_hooks: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def find_manifest(directory: Path) -> Path | None:
    """Return the manifest file of a plugin directory, or ``None``."""
    found = find_manifest_stat(directory)
    return found[0] if found is not None else None


def find_manifest_stat(directory: Path) -> tuple[Path, os.stat_result] | None:
    """As :func:`find_manifest`, with the file's ``os.stat`` (for :func:`load_manifest`'s cache)."""
    base = os.fspath(directory)
    for name in MANIFEST_NAMES:
        try:
            stat = os.stat(os.path.join(base, name))
        except (OSError, ValueError):
            continue
        if S_ISREG(stat.st_mode):
            return directory / name, stat
    return None


def load_manifest(
    path: Path, default_name: str, cache: Any = None, stat: os.stat_result | None = None
) -> Manifest:
    """Read and validate ``path``; raise :class:`ManifestError` on any problem.

    ``cache`` (a :class:`~kernel.base.state.ManifestCache`) answers for a file
    that has not changed since it was last parsed (``stat``: its ``os.stat``, when the caller has it).
    """
    if cache is not None and stat is None:
        try:
            stat = path.stat()
        except OSError as exc:
            raise ManifestError(path, f"cannot read the file: {exc}") from None
    if cache is not None and stat is not None:
        hit, data = cache.get(path, stat)
        if hit:
            return parse_manifest(data, path, default_name)
    try:
        text = read_bounded(path, MAX_MANIFEST_BYTES, "plugin.yaml")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, f"cannot read the file: {exc}") from None
    import yaml

    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ManifestError(path, f"not valid YAML: {yaml_problem(exc)}") from None
    if cache is not None and stat is not None:
        cache.put(path, stat, data)
    return parse_manifest(data, path, default_name)


def parse_manifest(data: Any, path: Path, default_name: str) -> Manifest:
    """Validate already-parsed manifest data."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ManifestError(path, f"the manifest must be a mapping, not {_type(data)}")
    warnings: list[str] = []

    name = _string(data, "name", path, default=default_name)
    if not name.strip():
        raise ManifestError(path, "must not be empty", "name")
    kind = _string(data, "kind", path, default="standalone")
    if kind not in KINDS:
        warnings.append(f"unknown kind '{kind}' (known: {', '.join(KINDS)}); treated as standalone")
        kind = "standalone"

    return frozen_made(
        Manifest,
        dict(
            name=name.strip(),
            version=_version(data, path),
            description=_string(data, "description", path),
            author=_author(data, path),
            kind=kind,
            provides_tools=_names(data, "provides_tools", path),
            provides_hooks=_names(data, "provides_hooks", path) + _other_hook_lists(data),
            requires_env=_env_list(data, "requires_env", path),
            optional_env=_env_list(data, "optional_env", path),
            label=_string(data, "label", path),
            path=path,
            declares_tools="provides_tools" in data,
            declares_hooks="provides_hooks" in data or bool(_other_hook_lists(data)),
            extra={k: copy.deepcopy(v) for k, v in data.items() if k not in KNOWN_FIELDS},
            warnings=tuple(warnings),
        ),
    )


def declared_commands(manifest: Manifest) -> tuple[str, ...] | None:
    """The slash commands ``provides_commands`` declares (a leading ``/`` dropped), or ``None`` when the
    manifest has no such list.  Advisory like ``provides_tools``: what is not a name is left out."""
    value = manifest.extra.get("provides_commands")
    if not isinstance(value, list):
        return None
    names = (item.strip().removeprefix("/") for item in value if isinstance(item, str))
    return tuple(name for name in names if name)


def _other_hook_lists(data: dict[str, Any]) -> tuple[str, ...]:
    """Hooks declared the other ways published manifests do: ``provides: {hooks}`` and ``hooks``."""
    provides = data.get("provides")
    lists = [provides.get("hooks") if isinstance(provides, dict) else None, data.get("hooks")]
    return tuple(h for value in lists if isinstance(value, list) for h in value if isinstance(h, str))


def _string(data: dict[str, Any], key: str, path: Path, default: str = "") -> str:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ManifestError(path, f"must be a string, not {_type(value)}", key)
    return value


def _version(data: dict[str, Any], path: Path) -> str:
    value = data.get("version")
    if value is None:
        return ""
    # `version: 1.0` reads as a float in YAML; accept numbers as their text.
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ManifestError(path, f"must be a string such as '1.0.0', not {_type(value)}", "version")
    return str(value)


def _author(data: dict[str, Any], path: Path) -> str:
    value = data.get("author")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        parts = [str(value[k]) for k in ("name", "email", "url") if value.get(k)]
        return " ".join(parts)
    raise ManifestError(
        path, f"must be a string or a mapping with name/email/url, not {_type(value)}", "author"
    )


def _names(data: dict[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(path, f"must be a list of names, not {_type(value)}", key)
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ManifestError(path, f"item {i} must be a non-empty string, not {_type(item)}", key)
    return tuple(value)


def _env_list(data: dict[str, Any], key: str, path: Path) -> tuple[EnvVar, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(path, f"must be a list of variable names or mappings, not {_type(value)}", key)
    out: list[EnvVar] = []
    for i, item in enumerate(value):
        if isinstance(item, str) and item.strip():
            out.append(EnvVar(name=item.strip()))
            continue
        if not isinstance(item, dict):
            raise ManifestError(
                path, f"item {i} must be a name or a mapping with 'name', not {_type(item)}", key
            )
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ManifestError(path, f"item {i} needs a non-empty string 'name'", key)
        for text_key in ("description", "url", "prompt"):
            if item.get(text_key) is not None and not isinstance(item[text_key], str):
                raise ManifestError(path, f"item {i} ({name}): '{text_key}' must be a string", key)
        secret = item.get("secret", item.get("password", False))
        if not isinstance(secret, bool):
            raise ManifestError(path, f"item {i} ({name}): 'secret' must be true or false", key)
        out.append(
            EnvVar(
                name=name.strip(),
                description=item.get("description") or "",
                url=item.get("url") or "",
                secret=secret,
                prompt=item.get("prompt") or "",
            )
        )
    return tuple(out)


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__
