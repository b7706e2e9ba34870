"""Skills: ``SKILL.md`` files of the host (``<home>/skills``) and of plugins (``k.skills``)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base.safe_yaml import load_yaml, read_bounded
from .core.api import kernel_of, on_rollback, record_of
from .core.context import ServiceContext, live
from .core.services import serviceimpl

if TYPE_CHECKING:
    from .core.kernel import Kernel
    from .core.records import _Record

SKILL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
SKILL_FILE = "SKILL.md"
# A SKILL.md is read whole into a chat (skill_view): larger ones are refused, named.
MAX_SKILL_BYTES = 1024 * 1024

VIEW_SCHEMA = {
    "name": "skill_view",
    "description": (
        "Read a skill: step-by-step instructions for a task. Pass the skill's name: a bare name "
        "('my-workflow') for the user's own skills, 'plugin:skill' for a skill shipped by a plugin."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the skill's name, e.g. 'calculator:calculator'"}
        },
        "required": ["name"],
    },
}


@dataclass(frozen=True)
class Skill:
    """One skill.  ``plugin`` is ``None`` for the host's own skills."""

    name: str
    path: Path
    description: str = ""
    plugin: str | None = None

    @property
    def qualified_name(self) -> str:
        return f"{self.plugin}:{self.name}" if self.plugin else self.name


class SkillRegistry:
    """The host's skills (read from ``<home>/skills/<name>/SKILL.md``) and plugins' skills."""

    def __init__(self, home: Path) -> None:
        self._root = home / "skills"
        self._plugin_skills: dict[str, Skill] = {}
        self._lock = threading.Lock()

    def register(
        self, plugin: str, name: str, path: str | Path, description: str = "", root: Path | None = None
    ) -> Skill:
        """Add ``<plugin>:<name>``; raise ``ValueError`` / ``FileNotFoundError`` with the reason.

        ``path`` is a ``SKILL.md`` file or a directory holding one; when the
        plugin has a directory (``root``), a relative path must stay inside it
        (an absolute path may name a ``SKILL.md`` elsewhere, e.g. in the
        plugin's installed package).
        """
        if not isinstance(name, str) or not SKILL_NAME.match(name):
            raise ValueError(
                f"plugin '{plugin}': skill name {name!r} is invalid: use letters, digits, '-' and '_' only"
            )
        file = Path(path)
        if not file.is_absolute() and root is not None:
            file = root / file
        if file.is_dir():
            file = file / SKILL_FILE
        if not file.is_file():
            raise FileNotFoundError(f"plugin '{plugin}': SKILL.md not found at {file}")
        resolved = file.resolve()
        outside = root is not None and not resolved.is_relative_to(root.resolve())
        # A relative path must stay inside (catches ``../`` slips and symlinks out); an absolute
        # one may point at the SKILL.md an installed package ships, as Hermes plugins do.
        if outside and (not Path(path).is_absolute() or resolved.name != SKILL_FILE):
            raise ValueError(
                f"plugin '{plugin}': skill '{name}' points outside the plugin directory ({resolved}); "
                f"use a path inside it, or an absolute path to a {SKILL_FILE} file"
            )
        skill = Skill(name, resolved, description or _description(resolved), plugin)
        with self._lock:
            if skill.qualified_name in self._plugin_skills:
                raise ValueError(f"plugin '{plugin}' registered skill '{name}' twice")
            self._plugin_skills[skill.qualified_name] = skill
        return skill

    def unregister(self, qualified_name: str) -> None:
        with self._lock:
            self._plugin_skills.pop(qualified_name, None)

    def host_skills(self) -> list[Skill]:
        """The host's own skills: the index a system prompt lists (plugin skills are not in it)."""
        if not self._root.is_dir():
            return []
        out = []
        for child in sorted(self._root.iterdir()):
            file = child / SKILL_FILE
            if SKILL_NAME.match(child.name) and file.is_file():
                out.append(Skill(child.name, file, _description(file)))
        return out

    def all(self) -> list[Skill]:
        """Host skills, then plugin skills by qualified name."""
        with self._lock:
            plugin_skills = sorted(self._plugin_skills.values(), key=lambda s: s.qualified_name)
        return self.host_skills() + plugin_skills

    def get(self, name: str) -> Skill:
        """A skill by name: ``plugin:skill`` for plugins, a bare name for the host's own."""
        if ":" in name:
            skill = self._plugin_skills.get(name)
        else:
            skill = next((s for s in self.host_skills() if s.name == name), None)
        if skill is None:
            known = ", ".join(s.qualified_name for s in self.all()) or "none"
            raise KeyError(f"no skill named '{name}' (skills: {known})")
        return skill

    def view(self, name: str) -> str:
        """The text of a skill; a plugin skill starts with a banner naming its siblings."""
        skill = self.get(name)
        text = read_bounded(skill.path, MAX_SKILL_BYTES, SKILL_FILE)
        if skill.plugin is None:
            return text
        siblings = [s.qualified_name for s in self.all() if s.plugin == skill.plugin and s.name != skill.name]
        others = f" Other skills of this plugin: {', '.join(siblings)}." if siblings else ""
        banner = f"[Skill '{skill.qualified_name}' from plugin '{skill.plugin}' (read-only).{others}]"
        return f"{banner}\n\n{text}"

    def view_tool(self, args: dict[str, Any], **_context: Any) -> str:
        """Handler of the built-in ``skill_view`` tool."""
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            return json.dumps({"error": "skill_view needs a 'name'"})
        try:
            return json.dumps({"name": name, "content": self.view(name.strip())}, ensure_ascii=False)
        except KeyError as exc:
            return json.dumps({"error": exc.args[0]}, ensure_ascii=False)
        except (OSError, UnicodeDecodeError) as exc:
            return json.dumps({"error": f"cannot read skill '{name}': {exc}"}, ensure_ascii=False)


def _description(file: Path) -> str:
    """The ``description`` of a SKILL.md front matter, or ""."""
    try:
        text = read_bounded(file, MAX_SKILL_BYTES, SKILL_FILE)
    except (OSError, UnicodeDecodeError):
        return ""
    if not text.startswith("---"):
        return ""
    end = text.find("\n---", 3)
    if end < 0:
        return ""
    import yaml  # only once a skill has front matter: a start-up without skills never needs it

    try:
        meta = load_yaml(text[3:end])
    except (yaml.YAMLError, RecursionError):
        return ""
    value = meta.get("description") if isinstance(meta, dict) else None
    return value.strip() if isinstance(value, str) else ""


# -- the skills service (see kernel.core.services) --------------------------------

#: The owner of the kernel's own tools (``skill_view``) in the tool registry.
BUILTIN_PLUGIN = "builtin"


class Context(ServiceContext):
    """The ``ctx.register_skill`` member of this service."""

    @live
    def register_skill(
        self, name: str, path: str | Path, description: str = "", frontmatter: Any = None
    ) -> None:
        """Offer a read-only skill, addressed as ``<plugin>:<name>``.

        ``path`` is a ``SKILL.md`` file (or a directory holding one) inside the
        plugin's directory, or an absolute path to a ``SKILL.md`` elsewhere
        (noted as a warning).  A bad name raises ``ValueError``, a missing file
        ``FileNotFoundError``, a relative path leaving the plugin ``ValueError``.
        """
        kernel, record = kernel_of(self), record_of(self)
        skill = kernel.skills.register(record.name, name, path, description, root=record.path)
        if record.path is not None and not skill.path.is_relative_to(record.path.resolve()):
            record.warnings.append(f"skill '{name}' is read from outside the plugin directory: {skill.path}")
        record.skills.append(skill.name)
        on_rollback(self, lambda: kernel.skills.unregister(skill.qualified_name))
        on_rollback(self, lambda: record.skills.remove(skill.name))


def add_view_tool(kernel: Kernel) -> None:
    """The kernel's own tool ``skill_view``, once there is a skill to view."""
    if not kernel.skills.all() or "skill_view" in kernel.tools:
        return
    kernel.tools.register("skill_view", "skills", VIEW_SCHEMA, kernel.skills.view_tool, plugin=BUILTIN_PLUGIN)


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel.host.provide(skills=SkillRegistry(kernel.home))


@serviceimpl(tryfirst=True)
def service_load_finished(kernel: Kernel) -> None:
    add_view_tool(kernel)


@serviceimpl
def service_plugin_added(kernel: Kernel, name: str) -> None:
    add_view_tool(kernel)


@serviceimpl
def service_plugin_unloaded(kernel: Kernel, record: _Record) -> None:
    for skill in record.skills:
        kernel.skills.unregister(f"{record.name}:{skill}")
