"""Skills: ``ctx.register_skill``, host skills in ``<home>/skills``, the built-in ``skill_view`` tool.

Every plugin here is a real directory under ``<home>/plugins`` loaded by ``Kernel.load()``; skill files
are real ``SKILL.md`` files on disk, and symlinks are real symlinks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_json

from kernel import Kernel

HOWTO = """\
---
name: howto
description: How to do the thing, step by step.
---

# How to

1. Do the first step.
2. Do the second step.
"""

PLAIN = "# Plain skill\n\nNo front matter here.\n"


def skill_plugin(plugin_dir: Any, dirname: str, body: str, files: dict[str, str] | None = None) -> Path:
    """A plugin whose ``register(ctx)`` runs ``body`` (one statement a line)."""
    lines = body.strip("\n").splitlines()
    code = "from pathlib import Path\n\nHERE = Path(__file__).parent\n\n\ndef register(ctx):\n"
    code += "\n".join("    " + line for line in lines) + "\n"
    return plugin_dir(dirname, code, files=files)


def host_skill(home: Path, name: str, text: str) -> Path:
    path = home / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def view(k: Kernel, args: Any) -> dict[str, Any]:
    return run_json(k.tools.dispatch("skill_view", args))


def assert_refused(k: Kernel, plugin: str, *fragments: str) -> str:
    """The plugin failed in register() and its error names every fragment."""
    info = k.plugin(plugin)
    assert not info.enabled, info
    assert info.error is not None and info.error.startswith("register() failed: "), info.error
    for fragment in fragments:
        assert fragment in info.error, (fragment, info.error)
    assert info.skills == []
    assert not [s for s in k.skills.all() if s.plugin == plugin]
    return info.error


# --------------------------------------------------------------------------- registering


def test_a_skill_md_file_path_relative_to_the_plugin(plugin_dir, make_kernel, home):
    path = skill_plugin(
        plugin_dir,
        "demo",
        'ctx.register_skill("howto", "skills/howto/SKILL.md")',
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    info = k.plugin("demo")
    assert info.enabled and info.error is None, info
    assert info.skills == ["howto"]
    skill = k.skills.get("demo:howto")
    assert skill.qualified_name == "demo:howto"
    assert (skill.name, skill.plugin) == ("howto", "demo")
    assert skill.path == (path / "skills" / "howto" / "SKILL.md").resolve()
    assert skill.description == "How to do the thing, step by step."


def test_a_directory_path_holding_skill_md(plugin_dir, make_kernel):
    path = skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    assert k.plugin("demo").skills == ["howto"]
    assert k.skills.get("demo:howto").path == (path / "skills" / "howto" / "SKILL.md").resolve()


def test_an_absolute_path_inside_the_plugin_directory(plugin_dir, make_kernel):
    path = skill_plugin(
        plugin_dir,
        "demo",
        'ctx.register_skill("howto", HERE / "skills" / "howto" / "SKILL.md")',
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    assert k.skills.get("demo:howto").path == (path / "skills" / "howto" / "SKILL.md").resolve()


def test_a_relative_path_is_resolved_against_the_plugin_directory_not_the_cwd(plugin_dir, make_kernel):
    decoy = Path.cwd() / "skills" / "howto" / "SKILL.md"
    decoy.parent.mkdir(parents=True)
    decoy.write_text("# decoy in the working directory\n", encoding="utf-8")
    path = skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    assert k.skills.get("demo:howto").path == (path / "skills" / "howto" / "SKILL.md").resolve()
    assert view(k, {"name": "demo:howto"})["content"].endswith(HOWTO)


def test_description_from_the_argument_wins_over_the_front_matter(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "demo",
        """
ctx.register_skill("howto", "skills/howto", description="Given by the plugin.")
ctx.register_skill("plain", "skills/plain")
ctx.register_skill("fromfile", "skills/fromfile")
""",
        {"skills/howto/SKILL.md": HOWTO, "skills/plain/SKILL.md": PLAIN, "skills/fromfile/SKILL.md": HOWTO},
    )
    k = make_kernel()
    assert k.plugin("demo").skills == ["howto", "plain", "fromfile"]
    assert k.skills.get("demo:howto").description == "Given by the plugin."
    assert k.skills.get("demo:fromfile").description == "How to do the thing, step by step."
    assert k.skills.get("demo:plain").description == ""


def test_skills_of_a_category_plugin_are_qualified_by_its_key(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "image_gen/painter",
        'ctx.register_skill("paint", "skills/paint")',
        {"skills/paint/SKILL.md": PLAIN},
    )
    k = make_kernel()
    assert k.plugin("image_gen/painter").skills == ["paint"]
    assert k.skills.get("image_gen/painter:paint").plugin == "image_gen/painter"
    assert view(k, {"name": "image_gen/painter:paint"})["content"].endswith(PLAIN)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("name", ["a:b", "two words", "a/b", "", "dots.here", "-ok-but:no"])
def test_bad_skill_names_fail_register_with_a_clear_error(plugin_dir, make_kernel, name):
    skill_plugin(
        plugin_dir,
        "demo",
        f'ctx.register_skill({name!r}, "skills/howto")',
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", repr(name), "invalid", "plugin 'demo'")
    assert "skill_view" not in k.tools


def test_a_non_string_skill_name_is_refused(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill(42, "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", "42")


def test_good_names_with_dash_underscore_and_digits_are_accepted(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "demo",
        'ctx.register_skill("My_skill-2", "skills/howto")',
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    assert k.plugin("demo").skills == ["My_skill-2"]
    assert k.skills.get("demo:My_skill-2").name == "My_skill-2"


def test_a_missing_skill_file_is_refused_naming_the_path(plugin_dir, make_kernel):
    path = skill_plugin(plugin_dir, "demo", 'ctx.register_skill("ghost", "skills/ghost/SKILL.md")')
    k = make_kernel()
    error = assert_refused(k, "demo", "FileNotFoundError", "SKILL.md not found at ")
    assert str(path / "skills" / "ghost" / "SKILL.md") in error


def test_a_directory_without_skill_md_is_refused(plugin_dir, make_kernel):
    path = skill_plugin(
        plugin_dir,
        "demo",
        'ctx.register_skill("empty", "skills/empty")',
        {"skills/empty/README.txt": "no skill\n"},
    )
    k = make_kernel()
    error = assert_refused(k, "demo", "FileNotFoundError", "SKILL.md not found at ")
    assert str(path / "skills" / "empty" / "SKILL.md") in error


def test_a_relative_path_leaving_the_plugin_directory_is_refused(plugin_dir, make_kernel):
    # The target exists (it belongs to another plugin), so only the containment rule can refuse it.
    skill_plugin(plugin_dir, "other", 'ctx.register_skill("howto", "SKILL.md")', {"SKILL.md": HOWTO})
    skill_plugin(plugin_dir, "demo", 'ctx.register_skill("stolen", "../other/SKILL.md")')
    k = make_kernel()
    assert k.plugin("other").enabled
    assert_refused(k, "demo", "ValueError", "'stolen'", "outside the plugin directory")
    assert [s.qualified_name for s in k.skills.all()] == ["other:howto"]


def test_an_absolute_path_to_a_skill_file_elsewhere_is_accepted_with_a_warning(
    plugin_dir, make_kernel, tmp_path
):
    # How installed Hermes packages point at the SKILL.md they ship (hermes-local-memory does).
    outside = tmp_path / "elsewhere" / "SKILL.md"
    outside.parent.mkdir()
    outside.write_text(HOWTO, encoding="utf-8")
    skill_plugin(plugin_dir, "demo", f'ctx.register_skill("far", {str(outside)!r})')
    k = make_kernel()
    info = k.plugin("demo")
    assert info.enabled and info.skills == ["far"]
    assert any("outside the plugin directory" in w and str(outside) in w for w in info.warnings)
    assert "How to do the thing" in k.skills.view("demo:far")


def test_an_absolute_path_elsewhere_that_is_not_a_skill_file_is_refused(plugin_dir, make_kernel, tmp_path):
    outside = tmp_path / "elsewhere" / "notes.md"
    outside.parent.mkdir()
    outside.write_text(HOWTO, encoding="utf-8")
    skill_plugin(plugin_dir, "demo", f'ctx.register_skill("far", {str(outside)!r})')
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", "'far'", "outside the plugin directory", str(outside))


def test_a_symlinked_file_pointing_outside_is_refused(plugin_dir, make_kernel, tmp_path):
    outside = tmp_path / "secret" / "SKILL.md"
    outside.parent.mkdir()
    outside.write_text("# not the plugin's\n", encoding="utf-8")
    path = skill_plugin(plugin_dir, "demo", 'ctx.register_skill("sneaky", "skills/sneaky/SKILL.md")')
    (path / "skills" / "sneaky").mkdir(parents=True)
    os.symlink(outside, path / "skills" / "sneaky" / "SKILL.md")
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", "'sneaky'", "outside the plugin directory")


def test_a_symlinked_directory_pointing_outside_is_refused(plugin_dir, make_kernel, tmp_path):
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "SKILL.md").write_text("# not the plugin's\n", encoding="utf-8")
    path = skill_plugin(plugin_dir, "demo", 'ctx.register_skill("sneaky", "skills/sneaky")')
    (path / "skills").mkdir()
    os.symlink(outside, path / "skills" / "sneaky", target_is_directory=True)
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", "'sneaky'", "outside the plugin directory")


def test_a_symlink_that_stays_inside_the_plugin_is_accepted(plugin_dir, make_kernel):
    path = skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("alias", "skills/alias")', {"docs/real/SKILL.md": HOWTO}
    )
    (path / "skills").mkdir()
    os.symlink(path / "docs" / "real", path / "skills" / "alias", target_is_directory=True)
    k = make_kernel()
    assert k.plugin("demo").skills == ["alias"]
    assert k.skills.get("demo:alias").path == (path / "docs" / "real" / "SKILL.md").resolve()


def test_the_same_skill_twice_is_refused(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "demo",
        """
ctx.register_skill("howto", "skills/howto")
ctx.register_skill("howto", "skills/howto")
""",
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    assert_refused(k, "demo", "ValueError", "'howto'", "twice")


def test_a_plugin_that_catches_the_refusal_keeps_loading(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "demo",
        """
try:
    ctx.register_skill("bad name", "skills/howto")
except ValueError:
    pass
ctx.register_skill("howto", "skills/howto")
""",
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    info = k.plugin("demo")
    assert info.enabled and info.skills == ["howto"], info


# --------------------------------------------------------------------------- rollback


def test_a_skill_is_rolled_back_when_register_fails_afterwards(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir,
        "demo",
        """
ctx.register_skill("howto", "skills/howto")
raise RuntimeError("boom after the skill")
""",
        {"skills/howto/SKILL.md": HOWTO},
    )
    k = make_kernel()
    info = k.plugin("demo")
    assert not info.enabled
    assert info.error == "register() failed: RuntimeError: boom after the skill"
    assert info.skills == []
    assert k.skills.all() == []
    with pytest.raises(KeyError):
        k.skills.get("demo:howto")
    assert "skill_view" not in k.tools
    assert "skill_view" not in [s["function"]["name"] for s in k.tools.schemas()]


def test_rollback_keeps_other_plugins_skills(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "good", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    skill_plugin(
        plugin_dir,
        "bad",
        """
ctx.register_skill("first", "skills/first")
ctx.register_skill("second", "skills/missing")
""",
        {"skills/first/SKILL.md": PLAIN},
    )
    k = make_kernel()
    assert_refused(k, "bad", "FileNotFoundError")
    assert [s.qualified_name for s in k.skills.all()] == ["good:howto"]
    result = view(k, {"name": "bad:first"})
    assert set(result) == {"error"} and "good:howto" in result["error"], result


def test_unregistering_a_plugin_removes_its_skills(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    assert k.skills.get("demo:howto")
    k.unregister("demo")
    assert k.skills.all() == []
    assert "error" in view(k, {"name": "demo:howto"})


# --------------------------------------------------------------------------- host skills


def test_a_bare_name_means_the_host_skill_never_a_plugin_skill(plugin_dir, make_kernel, home):
    host_text = "---\ndescription: The host's own deploy steps.\n---\n\n# Deploy (host)\n"
    host_path = host_skill(home, "deploy", host_text)
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("deploy", "skills/deploy")', {"skills/deploy/SKILL.md": PLAIN}
    )
    k = make_kernel()
    bare = k.skills.get("deploy")
    assert bare.plugin is None and bare.path == host_path
    assert bare.qualified_name == "deploy"
    assert k.skills.get("demo:deploy").plugin == "demo"
    assert view(k, {"name": "deploy"}) == {"name": "deploy", "content": host_text}
    assert view(k, {"name": "demo:deploy"})["content"].endswith(PLAIN)


def test_a_bare_name_does_not_fall_back_to_a_plugin_skill(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    with pytest.raises(KeyError):
        k.skills.get("howto")
    result = view(k, {"name": "howto"})
    assert set(result) == {"error"}
    assert "howto" in result["error"] and "demo:howto" in result["error"]


def test_host_skills_index_lists_host_skills_only(plugin_dir, make_kernel, home):
    host_skill(home, "deploy", "---\ndescription: Ship it.\n---\nsteps\n")
    host_skill(home, "review", "# no front matter\n")
    (home / "skills" / "no-file-here").mkdir()
    (home / "skills" / "stray.md").write_text("not a skill directory\n", encoding="utf-8")
    skill_plugin(
        plugin_dir,
        "demo",
        'ctx.register_skill("howto", "skills/howto")\nctx.register_skill("review", "skills/review")',
        {"skills/howto/SKILL.md": HOWTO, "skills/review/SKILL.md": PLAIN},
    )
    k = make_kernel()
    index = k.skills.host_skills()
    assert [(s.name, s.plugin) for s in index] == [("deploy", None), ("review", None)]
    assert [s.description for s in index] == ["Ship it.", ""]
    everything = [s.qualified_name for s in k.skills.all()]
    assert everything == ["deploy", "review", "demo:howto", "demo:review"]


def test_host_skills_are_read_from_disk_when_asked(make_kernel, home):
    k = make_kernel()
    assert k.skills.host_skills() == []
    host_skill(home, "later", "# added after load\n")
    assert [s.name for s in k.skills.host_skills()] == ["later"]
    assert k.skills.view("later") == "# added after load\n"


# --------------------------------------------------------------------------- skill_view


def test_skill_view_returns_host_text_unchanged(make_kernel, home):
    text = "---\nname: deploy\ndescription: d\n---\n\n# Deploy\n\nÜnïcode stays — as is.\n"
    host_skill(home, "deploy", text)
    k = make_kernel()
    assert view(k, {"name": "deploy"}) == {"name": "deploy", "content": text}
    assert view(k, json.dumps({"name": "deploy"}))["content"] == text


def test_skill_view_banner_names_the_plugins_other_skills(plugin_dir, make_kernel):
    alpha = "# Alpha\n\nalpha body\n"
    skill_plugin(
        plugin_dir,
        "two",
        'ctx.register_skill("alpha", "skills/alpha")\nctx.register_skill("beta", "skills/beta")',
        {"skills/alpha/SKILL.md": alpha, "skills/beta/SKILL.md": "# Beta\n"},
    )
    skill_plugin(
        plugin_dir,
        "zeta",
        'ctx.register_skill("gamma", "skills/gamma")',
        {"skills/gamma/SKILL.md": "# Gamma\n"},
    )
    k = make_kernel()
    result = view(k, {"name": "two:alpha"})
    assert result["name"] == "two:alpha"
    content = result["content"]
    assert content != alpha and content.endswith(alpha)
    banner = content[: -len(alpha)]
    assert "two" in banner
    assert "two:beta" in banner
    assert "gamma" not in banner  # another plugin's skill is not a sibling
    assert banner.strip(), "a plugin skill starts with a banner"

    single = view(k, {"name": "zeta:gamma"})["content"]
    assert single.endswith("# Gamma\n")
    single_banner = single[: -len("# Gamma\n")]
    assert "zeta" in single_banner and "two:" not in single_banner


def test_skill_view_unknown_name_lists_the_known_skills(plugin_dir, make_kernel, home):
    host_skill(home, "deploy", "# d\n")
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    for name in ("nope", "demo:nope", "other:howto"):
        result = view(k, {"name": name})
        assert set(result) == {"error"}, result
        assert name in result["error"]
        assert "deploy" in result["error"] and "demo:howto" in result["error"]


@pytest.mark.parametrize("args", [{}, {"name": ""}, {"name": "   "}, {"name": 5}, {"name": None}])
def test_skill_view_without_a_name_is_an_error(plugin_dir, make_kernel, args):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    result = view(k, args)
    assert set(result) == {"error"}, result
    assert "name" in result["error"]


def test_skill_view_is_offered_only_once_a_skill_exists(plugin_dir, make_kernel):
    plugin_dir("plain")
    k = make_kernel()
    assert "skill_view" not in k.tools
    assert "skill_view" not in [s["function"]["name"] for s in k.tools.schemas()]
    assert "unknown tool" in run_json(k.tools.dispatch("skill_view", {"name": "x"}))["error"]


def test_skill_view_is_offered_when_a_plugin_skill_exists(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    names = [s["function"]["name"] for s in k.tools.schemas()]
    assert names.count("skill_view") == 1
    schema = next(s for s in k.tools.schemas() if s["function"]["name"] == "skill_view")["function"]
    assert schema["parameters"]["required"] == ["name"]
    assert k.tools.get("skill_view").plugin == "builtin"
    assert "skill_view" not in k.plugin("demo").tools


def test_skill_view_is_offered_when_only_a_host_skill_exists(make_kernel, home):
    host_skill(home, "deploy", "# d\n")
    k = make_kernel()
    assert "skill_view" in [s["function"]["name"] for s in k.tools.schemas()]


def test_skill_view_appears_when_a_runtime_plugin_adds_the_first_skill(make_kernel, tmp_path):
    k = make_kernel()
    assert "skill_view" not in k.tools
    # A runtime object has no plugin directory, so its path is not checked against one.
    anywhere = tmp_path / "anywhere" / "SKILL.md"
    anywhere.parent.mkdir()
    anywhere.write_text(PLAIN, encoding="utf-8")

    class Runtime:
        def register(self, ctx):
            ctx.register_skill("notes", anywhere)

    info = k.register(Runtime(), name="runtime")
    assert info.skills == ["notes"]
    assert "skill_view" in [s["function"]["name"] for s in k.tools.schemas()]
    assert view(k, {"name": "runtime:notes"})["content"].endswith(PLAIN)


def test_skill_view_runs_through_the_tool_pipeline(plugin_dir, make_kernel):
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    plugin_dir(
        "gate",
        'def register(ctx):\n    ctx.register_hook("pre_tool_call", gate)\n\n'
        "def gate(tool_name, args, **kw):\n"
        '    if tool_name == "skill_view" and args.get("name") == "demo:howto":\n'
        '        return {"action": "block", "message": "skills are off today"}\n',
    )
    k = make_kernel()
    assert view(k, {"name": "demo:howto"}) == {"error": "skills are off today"}


# --------------------------------------------------------------------------- /skills


def test_the_skills_command_lists_host_and_plugin_skills(plugin_dir, make_kernel, home):
    host_skill(home, "deploy", "---\ndescription: Ship it.\n---\n")
    skill_plugin(
        plugin_dir, "demo", 'ctx.register_skill("howto", "skills/howto")', {"skills/howto/SKILL.md": HOWTO}
    )
    k = make_kernel()
    reply = k.commands.run("/skills")
    assert reply is not None
    lines = reply.splitlines()
    assert "2" in lines[0]
    assert any("deploy" in line and "Ship it." in line for line in lines[1:]), reply
    assert any("demo:howto" in line and "How to do the thing" in line for line in lines[1:]), reply


def test_the_skills_command_with_no_skills(make_kernel):
    k = make_kernel()
    reply = k.commands.run("/skills")
    assert reply is not None and "no skills" in reply.lower()


# --------------------------------------------------------------------------- the calculator


def test_the_bundled_calculator_skill_loads_from_the_real_extensions(home):
    assert "HERMES_BUNDLED_PLUGINS" not in os.environ
    skill_file = REPO / "extensions" / "calculator" / "skills" / "calculator" / "SKILL.md"
    with Kernel(home=home) as k:
        k.load()
        info = k.plugin("calculator")
        assert info.enabled and info.source == "bundled", info
        assert info.skills == ["calculator"]
        assert info.warnings == [], info.warnings
        skill = k.skills.get("calculator:calculator")
        assert skill.path == skill_file.resolve()
        assert skill.description.startswith("Use the calculate and unit_convert tools")
        assert k.skills.host_skills() == []
        result = view(k, {"name": "calculator:calculator"})
        text = skill_file.read_text(encoding="utf-8")
        assert result["content"].endswith(text)
        assert "calculator" in result["content"][: -len(text)]
        assert "calculator:calculator" in k.commands.run("/skills")
