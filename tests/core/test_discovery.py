"""Discovery of directory plugins: sources, overrides, categories, config, env, failures, logging."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, agent_log, cli_env, run_json, write_plugin

from kernel import Kernel

# The code of a test plugin.  ``TAG`` identifies the copy that ran; every
# import and every register() call appends a line to ``<marks>/<TAG>.<what>``.
PLUGIN_CODE = """\
import json
import pathlib

TAG = {tag!r}
TOOLS = {tools!r}
HOOKS = {hooks!r}
MARKS = {marks!r}


def _mark(what):
    if MARKS:
        with open(pathlib.Path(MARKS) / (TAG + "." + what), "a") as fh:
            fh.write("x\\n")


_mark("import")
{top}

def _tool_handler(name):
    def handler(args, **kw):
        return json.dumps({{"tool": name, "tag": TAG}})
    return handler


def _hook(**kwargs):
    return TAG


def register(ctx):
    _mark("register")
    for name in TOOLS:
        ctx.register_tool(
            name,
            "test",
            {{"description": "a test tool", "parameters": {{"type": "object", "properties": {{}}}}}},
            _tool_handler(name),
        )
    for hook in HOOKS:
        ctx.register_hook(hook, _hook)
{tail}
"""


def plugin_code(
    tag: str,
    marks: Path | None = None,
    tools: tuple[str, ...] = (),
    hooks: tuple[str, ...] = (),
    top: str = "",
    tail: str = "",
) -> str:
    tail = "\n".join("    " + line for line in tail.splitlines())
    return PLUGIN_CODE.format(
        tag=tag, tools=list(tools), hooks=list(hooks), marks=str(marks) if marks else "", top=top, tail=tail
    )


def make_plugin(
    root: Path,
    dirname: str,
    marks: Path | None = None,
    *,
    name: str | None = None,
    tag: str | None = None,
    tools: tuple[str, ...] = (),
    hooks: tuple[str, ...] = (),
    top: str = "",
    tail: str = "",
    manifest: dict[str, Any] | str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """A plugin directory whose manifest declares exactly the tools and hooks it registers."""
    if manifest is None:
        manifest = {
            "name": name or Path(dirname).name,
            "version": "0.1.0",
            "provides_tools": list(tools),
            "provides_hooks": list(hooks),
        }
    code = plugin_code(tag or name or Path(dirname).name, marks, tools, hooks, top, tail)
    return write_plugin(root, dirname, code, manifest=manifest, files=files)


def count(marks: Path, tag: str, what: str = "register") -> int:
    path = marks / f"{tag}.{what}"
    if not path.exists():
        return 0
    return len(path.read_text().splitlines())


@pytest.fixture
def user_root(home: Path) -> Path:
    return home / "plugins"


@pytest.fixture
def project_root() -> Path:
    return Path.cwd() / ".hermes" / "plugins"


# -- sources ------------------------------------------------------------------------------------------


def test_bundled_plugins_come_from_the_bundled_dir(
    bundled: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    folder = make_plugin(bundled, "bundled-one", marks, tools=("bundled_tool",))
    k = make_kernel()
    info = k.plugin("bundled-one")
    assert info.enabled, info.error
    assert info.source == "bundled"
    assert info.path == str(folder)
    assert info.overrides == []
    assert count(marks, "bundled-one") == 1
    assert run_json(k.tools.dispatch("bundled_tool", {}))["tag"] == "bundled-one"


def test_user_plugins_come_from_home_plugins(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    folder = make_plugin(user_root, "mine", marks, tools=("mine_tool",))
    k = make_kernel()
    info = k.plugin("mine")
    assert (info.enabled, info.source, info.path) == (True, "user", str(folder))
    assert run_json(k.tools.dispatch("mine_tool", {})) == {"tool": "mine_tool", "tag": "mine"}


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "TRUE", "Yes", "On"])
def test_project_plugins_load_when_enabled(
    value: str,
    project_root: Path,
    make_kernel: Callable[..., Kernel],
    marks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERMES_ENABLE_PROJECT_PLUGINS", value)
    folder = make_plugin(project_root, "proj", marks, tools=("proj_tool",))
    k = make_kernel()
    info = k.plugin("proj")
    assert (info.enabled, info.source, info.path) == (True, "project", str(folder))
    assert count(marks, "proj") == 1


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "off", "False"])
def test_project_plugins_stay_off_otherwise(
    value: str | None,
    project_root: Path,
    make_kernel: Callable[..., Kernel],
    marks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if value is not None:
        monkeypatch.setenv("HERMES_ENABLE_PROJECT_PLUGINS", value)
    make_plugin(project_root, "proj", marks, tools=("proj_tool",))
    k = make_kernel()
    assert "proj" not in [p.name for p in k.plugins]
    assert "proj_tool" not in k.tools
    assert count(marks, "proj", "import") == 0


def test_user_overrides_bundled_on_the_same_name(
    bundled: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    bundled_dir = make_plugin(bundled, "shared", marks, tag="from-bundled", tools=("shared_tool",))
    user_dir = make_plugin(user_root, "shared", marks, tag="from-user", tools=("shared_tool",))
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["shared"]
    info = k.plugin("shared")
    assert (info.source, info.path) == ("user", str(user_dir))
    assert info.overrides == [f"bundled: {bundled_dir}"]
    assert info.warnings == []
    assert count(marks, "from-user") == 1
    # The overridden copy is never imported.
    assert count(marks, "from-bundled", "import") == 0
    assert run_json(k.tools.dispatch("shared_tool", {}))["tag"] == "from-user"


def test_override_goes_by_key_not_by_folder_name(
    bundled: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(bundled, "upstream-folder", marks, name="renamed", tag="from-bundled")
    make_plugin(user_root, "my-folder", marks, name="renamed", tag="from-user")
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["renamed"]
    assert k.plugin("renamed").source == "user"
    assert count(marks, "from-user") == 1
    assert count(marks, "from-bundled", "import") == 0


def test_project_overrides_user_and_bundled(
    bundled: Path,
    user_root: Path,
    project_root: Path,
    make_kernel: Callable[..., Kernel],
    marks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERMES_ENABLE_PROJECT_PLUGINS", "1")
    b = make_plugin(bundled, "layered", marks, tag="from-bundled", tools=("layer_tool",))
    u = make_plugin(user_root, "layered", marks, tag="from-user", tools=("layer_tool",))
    p = make_plugin(project_root, "layered", marks, tag="from-project", tools=("layer_tool",))
    k = make_kernel()
    info = k.plugin("layered")
    assert (info.source, info.path) == ("project", str(p))
    assert info.overrides == [f"bundled: {b}", f"user: {u}"]
    assert run_json(k.tools.dispatch("layer_tool", {}))["tag"] == "from-project"
    assert count(marks, "from-project") == 1
    assert count(marks, "from-user", "import") == 0
    assert count(marks, "from-bundled", "import") == 0


def test_without_project_plugins_user_still_wins(
    bundled: Path, user_root: Path, project_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(bundled, "layered", marks, tag="from-bundled")
    make_plugin(user_root, "layered", marks, tag="from-user")
    make_plugin(project_root, "layered", marks, tag="from-project")
    k = make_kernel()
    assert k.plugin("layered").source == "user"
    assert count(marks, "from-project", "import") == 0


def test_same_name_twice_in_one_source_lists_the_second_with_an_error(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    first = make_plugin(user_root, "a-folder", marks, name="twin", tag="first", tools=("twin_tool",))
    second = make_plugin(user_root, "b-folder", marks, name="twin", tag="second", tools=("twin_tool",))
    k = make_kernel()
    twins = [p for p in k.plugins if p.name == "twin"]
    assert len(twins) == 2
    winner = next(p for p in twins if p.enabled)
    loser = next(p for p in twins if not p.enabled)
    assert winner.path == str(first)
    assert loser.path == str(second)
    assert loser.error and str(first) in loser.error
    assert count(marks, "second", "import") == 0
    assert run_json(k.tools.dispatch("twin_tool", {}))["tag"] == "first"


# -- categories and the directory layout -----------------------------------------------------------

CATEGORIES = ["model-providers", "platforms", "memory", "context_engine", "image_gen"]


@pytest.mark.parametrize("category", CATEGORIES)
def test_category_folders_give_category_keys(
    category: str, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    tool = f"{category.replace('-', '_')}_tool"
    folder = make_plugin(user_root / category, "acme", marks, name="acme-manifest-name", tools=(tool,))
    k = make_kernel()
    key = f"{category}/acme"
    assert [p.name for p in k.plugins] == [key]
    info = k.plugin(key)
    assert info.enabled, info.error
    assert info.path == str(folder)
    if category == "model-providers":
        # Model providers are imported on the first provider lookup, not at load().
        assert info.deferred and tool not in k.tools
        assert k.providers.list_providers() == []
        assert not k.plugin(key).deferred
    assert run_json(k.tools.dispatch(tool, {}))["tool"] == tool


def test_category_plugins_in_bundled_are_overridden_by_user(
    bundled: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(bundled / "memory", "store", marks, tag="bundled-store")
    user = make_plugin(user_root / "memory", "store", marks, tag="user-store")
    k = make_kernel()
    info = k.plugin("memory/store")
    assert (info.source, info.path) == ("user", str(user))
    assert count(marks, "user-store") == 1
    assert count(marks, "bundled-store", "import") == 0


def test_category_plugin_without_manifest_loads_under_its_folder(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    write_plugin(user_root / "platforms", "telegraph", plugin_code("telegraph", marks), manifest="")
    k = make_kernel()
    info = k.plugin("platforms/telegraph")
    assert info.enabled, info.error
    assert count(marks, "telegraph") == 1


def test_deeper_nesting_is_ignored(user_root: Path, make_kernel: Callable[..., Kernel], marks: Path) -> None:
    # <root>/<category>/<group>/<plugin>/: two levels below a category.
    (user_root / "memory" / "group").mkdir(parents=True)
    make_plugin(user_root / "memory" / "group", "deep", marks, tag="deep-in-category")
    # <root>/<other category>/<group>/<plugin>/
    (user_root / "misc" / "group").mkdir(parents=True)
    make_plugin(user_root / "misc" / "group", "inner", marks, tag="deep-in-misc")
    # a plugin directory inside another plugin is part of that plugin, not a plugin
    outer = make_plugin(user_root, "outer", marks, tag="outer")
    make_plugin(outer, "nested", marks, tag="nested-in-plugin")
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["outer"]
    for tag in ("deep-in-category", "deep-in-misc", "nested-in-plugin"):
        assert count(marks, tag, "import") == 0, tag
    assert count(marks, "outer") == 1


def test_any_folder_without_manifest_or_init_is_a_category_as_in_hermes(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    """``plugins/video_gen/x`` and ``plugins/web/y`` load as ``video_gen/x`` and ``web/y`` (Hermes scans
    any manifest-less top-level folder as a category); in a category the kernel does not know, a
    folder with only an ``__init__.py`` is not a plugin (Hermes needs its manifest there)."""
    make_plugin(user_root / "video_gen", "x", marks, tag="video-x", tools=("video_x",))
    make_plugin(user_root / "web", "y", marks, tag="web-y", tools=("web_y",))
    write_plugin(user_root / "web", "bare", plugin_code("bare", marks), manifest="")
    (user_root / "empty_folder").mkdir()
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["video_gen/x", "web/y"]
    assert all(p.enabled for p in k.plugins), [p.error for p in k.plugins]
    assert run_json(k.tools.dispatch("web_y", {}))["tool"] == "web_y"
    assert count(marks, "bare", "import") == 0


def test_dot_and_dunder_directories_are_skipped(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    for i, dirname in enumerate((".hidden", "__pycache__", "__private__", ".git")):
        make_plugin(user_root, dirname, marks, name=f"hidden-{i}", tag=dirname)
    make_plugin(user_root / "memory", ".hidden-store", marks, tag="hidden-in-category")
    make_plugin(user_root, "visible", marks)
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["visible"]
    for tag in (".hidden", "__pycache__", "__private__", ".git", "hidden-in-category"):
        assert count(marks, tag, "import") == 0, tag


def test_directory_without_manifest_but_with_init_loads_under_the_folder_name(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    folder = write_plugin(
        user_root, "bare-plugin", plugin_code("bare", marks, tools=("bare_tool",)), manifest=""
    )
    assert not (folder / "plugin.yaml").exists()
    k = make_kernel()
    info = k.plugin("bare-plugin")
    assert info.enabled, info.error
    assert (info.source, info.path) == ("user", str(folder))
    assert run_json(k.tools.dispatch("bare_tool", {}))["tag"] == "bare"


def test_directory_with_neither_manifest_nor_init_is_skipped(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    junk = user_root / "notes"
    (junk / "sub").mkdir(parents=True)
    (junk / "README.md").write_text("not a plugin\n")
    (junk / "module.py").write_text("raise SystemExit('must never run')\n")
    make_plugin(user_root, "real", marks)
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["real"]


def test_files_at_the_top_of_the_plugin_root_are_ignored(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    user_root.mkdir(parents=True)
    (user_root / "stray.py").write_text("raise SystemExit('must never run')\n")
    (user_root / "plugin.yaml").write_text("name: stray\n")
    make_plugin(user_root, "real", marks)
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["real"]


def test_missing_plugin_roots_are_fine(home: Path, make_kernel: Callable[..., Kernel]) -> None:
    assert not (home / "plugins").exists()
    k = make_kernel()
    assert k.plugins == []


# -- plugins.disabled ---------------------------------------------------------------------------------


def test_disabled_in_config_yaml_is_listed_but_never_imported(
    home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["off-plugin"]}}))
    make_plugin(user_root, "off-plugin", marks, tools=("off_tool",), hooks=("pre_llm_call",))
    make_plugin(user_root, "on-plugin", marks, tools=("on_tool",))
    k = make_kernel()
    info = k.plugin("off-plugin")
    assert info.enabled is False
    assert info.error and "disabled" in info.error
    assert info.tools == [] and info.hooks == []
    assert count(marks, "off-plugin", "import") == 0
    assert "off_tool" not in k.tools
    assert k.pre_llm_context(user_message="x") == ""
    assert k.plugin("on-plugin").enabled


def test_disabled_through_the_config_argument(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root, "off-plugin", marks, tools=("off_tool",))
    make_plugin(user_root, "on-plugin", marks, tools=("on_tool",))
    k = make_kernel(config={"plugins": {"disabled": ["off-plugin"]}})
    assert k.plugin("off-plugin").enabled is False
    assert "disabled" in (k.plugin("off-plugin").error or "")
    assert count(marks, "off-plugin", "import") == 0
    assert k.plugin("on-plugin").enabled


def test_config_argument_overrides_config_yaml(
    home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": {"disabled": ["first"]}}))
    make_plugin(user_root, "first", marks)
    make_plugin(user_root, "second", marks)
    k = make_kernel(config={"plugins": {"disabled": ["second"]}})
    assert k.plugin("first").enabled
    assert k.plugin("second").enabled is False
    assert count(marks, "second", "import") == 0


def test_disabled_category_plugin_by_key(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root / "memory", "store", marks, tag="store")
    k = make_kernel(config={"plugins": {"disabled": ["memory/store"]}})
    assert k.plugin("memory/store").enabled is False
    assert count(marks, "store", "import") == 0


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("plugins: [unclosed\n  disabled: x\n", id="bad-yaml"),
        pytest.param("- plugins\n- disabled\n", id="list-at-top"),
        pytest.param("plugins:\n  disabled: some-plugin\n", id="disabled-not-a-list"),
        pytest.param("plugins:\n  disabled:\n    bad: mapping\n", id="disabled-a-mapping"),
    ],
)
def test_malformed_config_is_reported_not_fatal(
    text: str, home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    (home / "config.yaml").write_text(text)
    make_plugin(user_root, "survivor", marks, tools=("survivor_tool",))
    k = make_kernel(load=False)
    k.load()
    assert k.problems, "a malformed config.yaml must be reported"
    assert any("config.yaml" in p for p in k.problems), k.problems
    assert k.plugin("survivor").enabled
    assert run_json(k.tools.dispatch("survivor_tool", {}))["tag"] == "survivor"
    log = agent_log(home)
    assert "config_problem" in log
    assert "config.yaml" in log


def test_bad_config_yaml_problem_has_line_and_column(home: Path, make_kernel: Callable[..., Kernel]) -> None:
    (home / "config.yaml").write_text("plugins:\n  disabled: [a, b\n")
    k = make_kernel()
    assert any(re.search(r"line \d+, column \d+", p) for p in k.problems), k.problems


# -- requires_env ----------------------------------------------------------------------------------------

ENV_MANIFEST = {
    "name": "envy",
    "version": "1.0.0",
    "requires_env": [
        "KTEST_ENV_ONE",
        {"name": "KTEST_ENV_TWO", "description": "the second one", "secret": True},
    ],
}

# register() records what it sees in os.environ.
ENV_TAIL = """\
import os
seen = {n: os.environ.get(n) for n in ("KTEST_ENV_ONE", "KTEST_ENV_TWO")}
(pathlib.Path(MARKS) / "envy.seen").write_text(json.dumps(seen))
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure the variables are unset now and also after the test (load() may copy <home>/.env)."""
    for name in ("KTEST_ENV_ONE", "KTEST_ENV_TWO"):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("clean_env")
def test_missing_env_disables_with_the_exact_message(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST, tail=ENV_TAIL)
    make_plugin(user_root, "other", marks)
    k = make_kernel()
    info = k.plugin("envy")
    assert info.enabled is False
    assert info.error == "Plugin envy disabled (missing: KTEST_ENV_ONE, KTEST_ENV_TWO)"
    assert count(marks, "envy", "import") == 0
    assert k.plugin("other").enabled


@pytest.mark.usefixtures("clean_env")
def test_missing_env_lists_only_what_is_missing(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_ENV_ONE", "one")
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST, tail=ENV_TAIL)
    k = make_kernel()
    assert k.plugin("envy").error == "Plugin envy disabled (missing: KTEST_ENV_TWO)"


@pytest.mark.usefixtures("clean_env")
def test_env_present_in_the_environment_loads(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_ENV_ONE", "one-from-env")
    monkeypatch.setenv("KTEST_ENV_TWO", "two-from-env")
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST, tail=ENV_TAIL)
    k = make_kernel()
    info = k.plugin("envy")
    assert info.enabled, info.error
    assert json.loads((marks / "envy.seen").read_text()) == {
        "KTEST_ENV_ONE": "one-from-env",
        "KTEST_ENV_TWO": "two-from-env",
    }


@pytest.mark.usefixtures("clean_env")
def test_env_only_in_home_dotenv_loads(
    home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    (home / ".env").write_text('KTEST_ENV_ONE=one-from-dotenv\nKTEST_ENV_TWO="two from dotenv"\n')
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST, tail=ENV_TAIL)
    k = make_kernel()
    info = k.plugin("envy")
    assert info.enabled, info.error
    assert json.loads((marks / "envy.seen").read_text()) == {
        "KTEST_ENV_ONE": "one-from-dotenv",
        "KTEST_ENV_TWO": "two from dotenv",
    }


@pytest.mark.usefixtures("clean_env")
def test_env_split_between_environment_and_dotenv_loads(
    home: Path,
    user_root: Path,
    make_kernel: Callable[..., Kernel],
    marks: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KTEST_ENV_ONE", "from-env")
    (home / ".env").write_text("KTEST_ENV_ONE=from-dotenv\nKTEST_ENV_TWO=two-from-dotenv\n")
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST, tail=ENV_TAIL)
    k = make_kernel()
    assert k.plugin("envy").enabled, k.plugin("envy").error
    # The real environment wins over <home>/.env.
    assert json.loads((marks / "envy.seen").read_text()) == {
        "KTEST_ENV_ONE": "from-env",
        "KTEST_ENV_TWO": "two-from-dotenv",
    }


@pytest.mark.usefixtures("clean_env")
def test_missing_env_is_logged_as_a_warning(
    home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root, "envy", marks, manifest=ENV_MANIFEST)
    make_kernel()
    log = agent_log(home)
    assert "plugin_missing_env" in log
    assert "KTEST_ENV_TWO" in log


# -- register(ctx) failures --------------------------------------------------------------------------

# Every broken plugin first registers a tool and two hooks, then fails (when it gets that far).
FAILURES = [
    pytest.param(
        {"top": "import ktest_no_such_module_xyz"},
        ("ktest_no_such_module_xyz", "ModuleNotFoundError|ImportError"),
        id="import-error-at-import",
    ),
    pytest.param(
        {"tail": "import ktest_no_such_module_xyz"},
        ("ktest_no_such_module_xyz", "ModuleNotFoundError|ImportError"),
        id="import-error-in-register",
    ),
    pytest.param({"top": "def broken(:\n    pass"}, ("SyntaxError",), id="syntax-error-in-module"),
    pytest.param(
        {"tail": "from . import helper", "files": {"helper.py": "value = = 1\n"}},
        ("SyntaxError", "helper.py"),
        id="syntax-error-in-helper-during-register",
    ),
    pytest.param(
        {"tail": "raise RuntimeError('kaboom in register')"},
        ("RuntimeError", "kaboom in register"),
        id="runtime-error-in-register",
    ),
    pytest.param({"tail": "raise SystemExit(3)"}, ("SystemExit",), id="system-exit-in-register"),
    pytest.param({"top": "raise SystemExit('bye at import')"}, ("SystemExit",), id="system-exit-at-import"),
    pytest.param(
        {"tail": "ctx.register_tool('bad name!', 't', {}, print)"},
        ("bad name!",),
        id="invalid-tool-registration",
    ),
]


@pytest.mark.parametrize(("parts", "expected"), FAILURES)
def test_register_failures_are_isolated_and_rolled_back(
    parts: dict[str, Any],
    expected: tuple[str, ...],
    user_root: Path,
    home: Path,
    make_kernel: Callable[..., Kernel],
    marks: Path,
) -> None:
    make_plugin(
        user_root,
        "a-broken",
        marks,
        tools=("shared_tool", "broken_only_tool"),
        hooks=("pre_llm_call", "on_session_start"),
        top=parts.get("top", ""),
        tail=parts.get("tail", ""),
        files=parts.get("files"),
    )
    make_plugin(user_root, "z-good", marks, tools=("shared_tool", "good_tool"), hooks=("pre_llm_call",))
    k = make_kernel(load=False)
    k.load()  # must not raise, whatever the plugin raised

    broken = k.plugin("a-broken")
    assert broken.enabled is False
    assert broken.error
    for pattern in expected:
        assert re.search(pattern, broken.error), (pattern, broken.error)
    assert broken.tools == [] and broken.hooks == []

    # Rolled back: the tool and hooks registered before the failure are gone ...
    assert "broken_only_tool" not in k.tools
    assert k.invoke_hook("pre_llm_call", user_message="hi") == ["z-good"]
    assert k.invoke_hook("on_session_start", session_id="s1") == []
    # ... and the tool name is free again for the next plugin.
    good = k.plugin("z-good")
    assert good.enabled, good.error
    assert good.warnings == []
    assert k.tools.get("shared_tool").plugin == "z-good"
    assert run_json(k.tools.dispatch("shared_tool", {}))["tag"] == "z-good"
    assert run_json(k.tools.dispatch("good_tool", {}))["tag"] == "z-good"
    assert "plugin_load_failed" in agent_log(home)


def test_a_module_without_register_is_an_error(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    write_plugin(user_root, "no-register", "VALUE = 1\n")
    make_plugin(user_root, "fine", marks)
    k = make_kernel()
    info = k.plugin("no-register")
    assert info.enabled is False
    assert info.error and "register" in info.error
    assert k.plugin("fine").enabled


def test_load_twice_is_idempotent(user_root: Path, make_kernel: Callable[..., Kernel], marks: Path) -> None:
    make_plugin(user_root, "once", marks, tools=("once_tool",), hooks=("pre_llm_call",))
    k = make_kernel(load=False)
    first = k.load()
    second = k.load()
    assert count(marks, "once") == 1
    assert count(marks, "once", "import") == 1
    assert [p.to_dict() for p in first] == [p.to_dict() for p in second]
    assert k.plugin("once").tools == ["once_tool"]
    assert k.invoke_hook("pre_llm_call", user_message="x") == ["once"]


def test_failed_plugin_is_not_retried_by_a_second_load(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root, "flaky", marks, tail="raise RuntimeError('no')")
    k = make_kernel()
    k.load()
    assert count(marks, "flaky") == 1
    assert k.plugin("flaky").enabled is False


# -- plugin packages ------------------------------------------------------------------------------------

PACKAGE_CODE = """\
import json
from pathlib import Path

from . import helpers
from .sub.deep import VALUE

DATA = (Path(__file__).parent / "data" / "greeting.txt").read_text(encoding="utf-8").strip()


def _handler(args, **kw):
    from . import lazy

    return json.dumps({"prefix": helpers.PREFIX, "deep": VALUE, "data": DATA, "lazy": lazy.LAZY})


def register(ctx):
    ctx.register_tool(
        helpers.TOOL_NAME,
        "pkg",
        {"description": "reads package data", "parameters": {"type": "object", "properties": {}}},
        _handler,
    )
"""


def package_files(prefix: str, tool: str) -> dict[str, str]:
    return {
        "helpers.py": f"PREFIX = {prefix!r}\nTOOL_NAME = {tool!r}\n",
        "sub/__init__.py": "",
        "sub/deep.py": "from ..helpers import PREFIX\n\nVALUE = PREFIX + ' from deep'\n",
        "lazy.py": f"LAZY = {prefix!r} + ' lazily'\n",
        "data/greeting.txt": f"data of {prefix}\n",
    }


def test_relative_imports_and_data_files_work(user_root: Path, make_kernel: Callable[..., Kernel]) -> None:
    write_plugin(
        user_root,
        "pkg-a",
        PACKAGE_CODE,
        manifest={"name": "pkg-a", "provides_tools": ["pkg_a_tool"]},
        files=package_files("alpha", "pkg_a_tool"),
    )
    write_plugin(
        user_root,
        "pkg-b",
        PACKAGE_CODE,
        manifest={"name": "pkg-b", "provides_tools": ["pkg_b_tool"]},
        files=package_files("beta", "pkg_b_tool"),
    )
    k = make_kernel()
    assert k.plugin("pkg-a").enabled, k.plugin("pkg-a").error
    assert k.plugin("pkg-b").enabled, k.plugin("pkg-b").error
    # Each plugin sees its own helpers (same module names, different packages).
    assert run_json(k.tools.dispatch("pkg_a_tool", {})) == {
        "prefix": "alpha",
        "deep": "alpha from deep",
        "data": "data of alpha",
        "lazy": "alpha lazily",
    }
    assert run_json(k.tools.dispatch("pkg_b_tool", {})) == {
        "prefix": "beta",
        "deep": "beta from deep",
        "data": "data of beta",
        "lazy": "beta lazily",
    }


# -- manifest drift ------------------------------------------------------------------------------------


def test_declared_tools_and_hooks_give_no_warning(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    make_plugin(user_root, "tidy", marks, tools=("tidy_tool",), hooks=("pre_llm_call", "post_tool_call"))
    k = make_kernel()
    info = k.plugin("tidy")
    assert info.enabled
    assert info.warnings == []


def test_undeclared_tool_and_hook_give_warnings(
    home: Path, user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    manifest = {"name": "drifty", "provides_tools": ["declared_tool"], "provides_hooks": ["post_tool_call"]}
    make_plugin(
        user_root,
        "drifty",
        marks,
        tools=("declared_tool", "sneaky_tool"),
        hooks=("post_tool_call", "pre_llm_call"),
        manifest=manifest,
    )
    k = make_kernel()
    info = k.plugin("drifty")
    assert info.enabled, info.error
    # Each warning ends with the undeclared names: "...: name1, name2".
    named = [set(w.rsplit(": ", 1)[-1].split(", ")) for w in info.warnings]
    assert {"sneaky_tool"} in named, info.warnings
    assert {"pre_llm_call"} in named, info.warnings
    assert not any("declared_tool" in names or "post_tool_call" in names for names in named), info.warnings
    # Drift is a warning, not a refusal.
    assert run_json(k.tools.dispatch("sneaky_tool", {}))["tag"] == "drifty"
    assert "manifest_drift" in agent_log(home)


def test_empty_declarations_warn_about_everything_registered(
    user_root: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    manifest = {"name": "silent", "provides_tools": [], "provides_hooks": []}
    make_plugin(
        user_root, "silent", marks, tools=("quiet_tool",), hooks=("on_session_end",), manifest=manifest
    )
    info = make_kernel().plugin("silent")
    assert info.enabled
    assert any("quiet_tool" in w for w in info.warnings), info.warnings
    assert any("on_session_end" in w for w in info.warnings), info.warnings


# -- tool name collisions ----------------------------------------------------------------------------


def test_tool_collision_first_alphabetically_keeps_it(
    bundled: Path, user_root: Path, home: Path, make_kernel: Callable[..., Kernel], marks: Path
) -> None:
    # Between two plugins of the user's, the first alphabetically keeps the name (a bundled plugin's
    # tool gives way to a user's instead: tests/extensions/test_bundled_tools_yield.py).
    make_plugin(user_root, "beta-tools", marks, tools=("same_tool", "beta_only_tool"))
    make_plugin(user_root, "alpha-tools", marks, tools=("same_tool",))
    k = make_kernel()
    assert k.tools.get("same_tool").plugin == "alpha-tools"
    assert run_json(k.tools.dispatch("same_tool", {}))["tag"] == "alpha-tools"

    alpha, beta = k.plugin("alpha-tools"), k.plugin("beta-tools")
    assert alpha.warnings == []
    assert beta.enabled, beta.error
    assert beta.tools == ["beta_only_tool"]
    assert run_json(k.tools.dispatch("beta_only_tool", {}))["tag"] == "beta-tools"
    conflict = [w for w in beta.warnings if "same_tool" in w]
    assert len(conflict) == 1, beta.warnings
    assert "alpha-tools" in conflict[0] and "beta-tools" in conflict[0]
    assert "tool_conflict" in agent_log(home)


# -- debug logging ---------------------------------------------------------------------------------------


def _debug_setup(bundled: Path, user_root: Path, marks: Path) -> dict[str, Path]:
    return {
        "bundled": make_plugin(bundled, "bundled-dbg", marks, tools=("bundled_dbg_tool",)),
        "plugin": make_plugin(user_root, "dbg-plugin", marks, tools=("dbg_tool",), hooks=("pre_llm_call",)),
        "drifty": make_plugin(
            user_root,
            "drifty",
            marks,
            tools=("drift_tool",),
            manifest={"name": "drifty", "provides_tools": []},
        ),
        "skipped": _mkdir_with_readme(user_root / "not-a-plugin"),
    }


def _mkdir_with_readme(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("nothing to load\n")
    return path


DEBUG_EVENTS = ("source_scanned", "plugin_found", "skip", "plugin_registered")


def _lines(text: str, event: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(rf"\]\s+{event}\b", line)]


def test_debug_variable_prints_discovery_lines_to_stderr(
    bundled: Path, home: Path, user_root: Path, marks: Path
) -> None:
    paths = _debug_setup(bundled, user_root, marks)
    env = cli_env(home, HERMES_PLUGINS_DEBUG="1", HERMES_BUNDLED_PLUGINS=str(bundled))
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh"],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path.cwd(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "dbg-plugin" in proc.stdout

    scanned = _lines(err, "source_scanned")
    assert any("bundled" in line and str(bundled) in line for line in scanned), err
    assert any("user" in line and str(user_root) in line for line in scanned), err

    found = _lines(err, "plugin_found")
    for key in ("bundled-dbg", "dbg-plugin", "drifty"):
        assert any(key in line for line in found), (key, err)
    assert any(str(paths["plugin"]) in line for line in found), err

    skips = [line for line in _lines(err, "skip") if str(paths["skipped"]) in line]
    assert skips, err
    assert "reason" in skips[0]

    registered = [line for line in _lines(err, "plugin_registered") if "dbg-plugin" in line]
    assert registered, err
    # "What each plugin registered": the tool and hook names, not only how many.
    assert "dbg_tool" in registered[0], registered[0]
    assert "pre_llm_call" in registered[0], registered[0]

    # The same lines go to agent.log when debugging.
    log = agent_log(home)
    assert _lines(log, "plugin_found") and _lines(log, "source_scanned")


def test_without_debug_stderr_is_quiet_and_agent_log_has_warnings_only(
    bundled: Path, home: Path, user_root: Path, marks: Path
) -> None:
    _debug_setup(bundled, user_root, marks)
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    proc = subprocess.run(
        [*CLI, "plugins", "list", "--refresh"],
        env=env,
        capture_output=True,
        text=True,
        cwd=Path.cwd(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dbg-plugin" in proc.stdout
    for event in DEBUG_EVENTS:
        assert not _lines(proc.stderr, event), (event, proc.stderr)
    log = agent_log(home)
    assert "manifest_drift" in log  # the drifty plugin produced a warning ...
    entries = [line for line in log.splitlines() if line.strip()]
    assert entries
    for line in entries:  # ... and nothing below WARNING was written
        assert re.search(r"\[(warning|error|critical)\s*\]", line), line
    for event in DEBUG_EVENTS:
        assert not _lines(log, event), (event, log)


# -- the real bundled calculator ---------------------------------------------------------------------


def test_real_bundled_calculator_is_found_from_the_checkout(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERMES_BUNDLED_PLUGINS", raising=False)
    with Kernel(home=home) as k:
        k.load()
        info = k.plugin("calculator")
        assert info.enabled, info.error
        assert info.source == "bundled"
        assert Path(info.path).resolve() == (REPO / "extensions" / "calculator").resolve()
        assert sorted(info.tools) == ["calculate", "unit_convert"]
        assert info.warnings == []
        assert run_json(k.tools.dispatch("calculate", {"expression": "2 + 3 * 4"}))["result"] == 14
        converted = run_json(
            k.tools.dispatch("unit_convert", {"value": 1.5, "from_unit": "km", "to_unit": "m"})
        )
        assert converted["result"] == 1500
        names = [s["function"]["name"] for s in k.tools.schemas()]
        assert {"calculate", "unit_convert"} <= set(names)


def test_user_plugin_overrides_the_real_calculator(
    home: Path, monkeypatch: pytest.MonkeyPatch, marks: Path
) -> None:
    monkeypatch.delenv("HERMES_BUNDLED_PLUGINS", raising=False)
    make_plugin(
        home / "plugins", "my-calculator", marks, name="calculator", tag="fake-calc", tools=("calculate",)
    )
    with Kernel(home=home) as k:
        k.load()
        info = k.plugin("calculator")
        assert info.source == "user"
        assert len(info.overrides) == 1 and info.overrides[0].startswith("bundled: ")
        assert "unit_convert" not in k.tools
        assert run_json(k.tools.dispatch("calculate", {"expression": "1+1"}))["tag"] == "fake-calc"
