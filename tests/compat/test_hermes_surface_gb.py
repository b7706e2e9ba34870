"""The rest of Hermes 0.19's host modules, as plugins call them, through the real kernel.

``hermes_constants`` (path helpers), ``hermes_cli.config`` (the .env and config.yaml readers and writers
with Hermes 0.19's parameter names), ``hermes_cli.plugins`` (the hook helpers Hermes' own tools and
plugins call), ``hermes_cli.dashboard_auth`` (its provider registry) and ``tools.registry``
(``ToolEntry`` built as Hermes builds it).  Each plugin is written the way published ones are: it
imports the Hermes module inside its tool handler or ``register`` and answers for its own kernel's home.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kernel import Kernel

HERE = Path(__file__).resolve().parent
SIX = (
    "hermes_constants",
    "hermes_cli.plugins",
    "hermes_cli.config",
    "hermes_cli.dashboard_auth",
    "tools.registry",
    "gateway.config",
)

PATHS_PLUGIN = """
import json


def paths(args, **kw):
    from hermes_constants import (
        display_hermes_home, get_config_path, get_env_path, get_hermes_dir, get_process_hermes_home,
        get_skills_dir, get_bundled_skills_dir, get_optional_skills_dir, parse_reasoning_effort,
        VALID_REASONING_EFFORTS, OPENROUTER_MODELS_URL,
    )
    return json.dumps({
        "config": str(get_config_path()),
        "env": str(get_env_path()),
        "skills": str(get_skills_dir()),
        "images": str(get_hermes_dir("cache/images", "image_cache")),
        "pairing": str(get_hermes_dir("platforms/pairing", "pairing")),
        "display": display_hermes_home(),
        "process": str(get_process_hermes_home()),
        "bundled_skills": str(get_bundled_skills_dir()),
        "optional_skills": str(get_optional_skills_dir()),
        "effort": [parse_reasoning_effort(v) for v in ("HIGH", "none", False, "bogus", "")],
        "efforts": list(VALID_REASONING_EFFORTS),
        "models_url": OPENROUTER_MODELS_URL,
    })


def register(ctx):
    ctx.register_tool("paths", "demo", {"name": "paths", "description": "d", "parameters": {}}, paths)
"""


def test_a_plugin_finds_its_home_s_files_through_hermes_constants(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path, monkeypatch: Any
) -> None:
    monkeypatch.delenv("HERMES_BUNDLED_SKILLS", raising=False)
    monkeypatch.delenv("HERMES_OPTIONAL_SKILLS", raising=False)
    plugin_dir("paths", PATHS_PLUGIN)
    (home / "pairing").mkdir()  # an empty legacy folder does not count
    (home / "image_cache").mkdir()
    (home / "image_cache" / "old.png").write_bytes(b"x")  # a legacy folder in use is kept
    k = make_kernel(config={"plugins": {"enabled": ["paths"]}})
    found = json.loads(k.tools.dispatch("paths", {}))
    assert found["config"] == str(home / "config.yaml")
    assert found["env"] == str(home / ".env")
    assert found["skills"] == str(home / "skills")
    assert found["images"] == str(home / "image_cache")
    assert found["pairing"] == str(home / "platforms" / "pairing")
    assert found["display"] == str(home)  # not under the user's home: shown in full
    assert found["process"] == str(home)
    assert found["bundled_skills"] == str(home / "skills")
    assert found["optional_skills"] == str(home / "optional-skills")
    assert found["effort"] == [
        {"enabled": True, "effort": "high"},
        {"enabled": False},
        {"enabled": False},
        None,
        None,
    ]
    assert "high" in found["efforts"]
    assert found["models_url"].startswith("https://openrouter.ai/")


CONFIG_PLUGIN = """
import json


def env(args, **kw):
    from hermes_cli.config import (
        get_env_value, get_env_value_prefer_dotenv, invalidate_env_cache, load_env, read_raw_config,
        remove_env_value, save_config, save_env_value, save_env_value_secure,
    )
    save_env_value(key="GB_TOKEN", value="one")
    saved = save_env_value_secure("GB_OTHER", "two")
    invalidate_env_cache()
    seen = {"token": get_env_value(key="GB_TOKEN"), "secure": saved, "file": load_env()}
    seen["removed"] = remove_env_value("GB_TOKEN")
    seen["removed_again"] = remove_env_value("GB_TOKEN")
    seen["after"] = load_env()
    seen["prefer"] = get_env_value_prefer_dotenv("GB_SHADOWED")
    save_config(config={"demo": {"x": 1}}, merge_existing=True)
    seen["raw"] = read_raw_config()
    return json.dumps(seen)


def register(ctx):
    ctx.register_tool("env", "demo", {"name": "env", "description": "d", "parameters": {}}, env)
"""


def test_a_plugin_reads_and_writes_the_env_and_config_with_hermes_parameter_names(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], home: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("GB_SHADOWED", "from-shell")
    (home / ".env").write_text("KEEP=1\nGB_SHADOWED=from-dotenv\n", encoding="utf-8")
    plugin_dir("cfg", CONFIG_PLUGIN)
    (home / "config.yaml").write_text(
        yaml.safe_dump({"plugins": {"enabled": ["cfg"]}, "model": {"default": "m"}}), encoding="utf-8"
    )
    k = make_kernel()
    seen = json.loads(k.tools.dispatch("env", {}))
    assert seen["token"] == "one"
    assert seen["secure"] == {"success": True, "stored_as": "GB_OTHER", "validated": False}
    assert seen["file"]["GB_TOKEN"] == "one" and seen["file"]["KEEP"] == "1"
    assert seen["removed"] is True and seen["removed_again"] is False
    assert "GB_TOKEN" not in seen["after"] and seen["after"]["GB_OTHER"] == "two"
    assert "GB_TOKEN=" not in (home / ".env").read_text(encoding="utf-8")
    assert seen["prefer"] == "from-dotenv"
    # merge_existing keeps what the caller left out.
    on_disk = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    assert on_disk["demo"] == {"x": 1} and on_disk["model"] == {"default": "m"}
    assert seen["raw"] == on_disk


HOOKS_PLUGIN = """
import json


def guard(tool_name, args, **kw):
    if tool_name == "rm":
        return {"action": "block", "message": "no rm"}
    if tool_name == "deploy":
        return {"action": "approve", "message": "deploy?", "rule_key": "deploy"}
    return None


def verify(**kw):
    if kw.get("attempt", 0) < 1:
        return {"decision": "block", "reason": " run the tests "}
    return None


async def later(arg):
    return "done:" + arg


def ask(args, **kw):
    from hermes_cli import plugins
    return json.dumps({
        "has_guard": plugins.has_hook("pre_tool_call"),
        "has_other": plugins.has_hook("subagent_stop"),
        "block": plugins.get_pre_tool_call_block_message("rm", {}, "task-1"),
        "approve_is_not_a_block": plugins.get_pre_tool_call_block_message("deploy", {}),
        "directive": list(plugins.get_pre_tool_call_directive("deploy", {}, "task-1", "s-1")),
        "none": list(plugins.get_pre_tool_call_directive("ls", {})),
        "resolved": plugins.resolve_pre_tool_block("rm", {}, "task-1", "s-1", "call-1"),
        "verify": plugins.get_pre_verify_continue_message(session_id="s", attempt=0),
        "verify_done": plugins.get_pre_verify_continue_message(session_id="s", attempt=1),
        "command": plugins.resolve_plugin_command_result(later("x")),
        "plain": plugins.resolve_plugin_command_result(7),
        "toolsets": [list(t) for t in plugins.get_plugin_toolsets()],
        "valid": sorted({"pre_tool_call", "pre_verify"} & plugins.VALID_HOOKS),
        "group": plugins.ENTRY_POINTS_GROUP,
        "bundled": str(plugins.get_bundled_plugins_dir()),
        "middleware": plugins.has_middleware("tool_execution"),
    })


def register(ctx):
    ctx.register_hook("pre_tool_call", guard)
    ctx.register_hook("pre_verify", verify)
    ctx.register_tool("ask", "guarded_tools", {"name": "ask", "description": "d", "parameters": {}}, ask)
"""


def test_hermes_pre_tool_and_verify_helpers_answer_from_the_plugin_s_kernel(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], bundled: Path
) -> None:
    plugin_dir("hooks", HOOKS_PLUGIN, manifest={"name": "hooks", "version": "1", "description": "Guards"})
    k = make_kernel(config={"plugins": {"enabled": ["hooks"]}})
    seen = json.loads(k.tools.dispatch("ask", {}))
    assert seen["has_guard"] is True and seen["has_other"] is False
    assert seen["block"] == "no rm"
    assert seen["approve_is_not_a_block"] is None
    assert seen["directive"] == ["approve", "deploy?"]
    assert seen["none"] == [None, None]
    assert seen["resolved"] == "no rm"
    assert seen["verify"] == "run the tests" and seen["verify_done"] is None
    assert seen["command"] == "done:x" and seen["plain"] == 7
    assert seen["toolsets"] == [["guarded_tools", "\N{ELECTRIC PLUG} Guarded Tools", "Guards"]]
    assert seen["valid"] == ["pre_tool_call", "pre_verify"]
    assert seen["group"] == "hermes_agent.plugins"
    assert seen["bundled"] == str(bundled)
    assert seen["middleware"] is False


DASHBOARD_PLUGIN = """
from hermes_cli.dashboard_auth import DashboardAuthProvider, register_provider


class Sso(DashboardAuthProvider):
    name = "sso"
    display_name = "Company SSO"
    supports_token = True

    def start_login(self, *a, **k): ...
    def complete_login(self, *a, **k): ...
    def verify_session(self, *a, **k): ...
    def refresh_session(self, *a, **k): ...
    def revoke_session(self, *a, **k): ...


class Broken:
    name = "broken"


def register(ctx):
    register_provider(Sso())
    for bad in (Broken(), Sso()):
        try:
            register_provider(bad)
        except (TypeError, ValueError) as exc:
            ctx.register_tool(
                "refused_" + type(exc).__name__, "demo",
                {"name": "refused_" + type(exc).__name__, "description": "d", "parameters": {}},
                lambda args, **kw: "",
            )
"""


def test_a_dashboard_provider_registered_through_the_module_registry_belongs_to_its_plugin(
    make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("sso", DASHBOARD_PLUGIN)
    k = make_kernel(config={"plugins": {"enabled": ["sso"]}})
    from hermes_cli import dashboard_auth  # type: ignore[import-not-found]

    provider = dashboard_auth.get_provider("sso")  # the one kernel running answers
    assert provider is not None and provider.display_name == "Company SSO"
    assert dashboard_auth.list_providers() == [provider]
    assert dashboard_auth.list_token_providers() == [provider]
    assert dashboard_auth.list_session_providers() == [provider]
    assert dashboard_auth.get_provider("nobody") is None
    assert k.registrations.dashboard_auth_providers() == [provider]
    # The one without the methods is a TypeError, the second "sso" a ValueError, as in Hermes.
    assert {"refused_TypeError", "refused_ValueError"} <= set(k.tools.names())
    k.unregister("sso")
    assert k.registrations.dashboard_auth_providers() == []


def test_tool_entry_is_built_as_hermes_builds_it() -> None:
    from kernel.compat.shims.tools_registry import ToolEntry, invalidate_check_fn_cache

    def handler(args: dict[str, Any], **kw: Any) -> str:
        return "ok"

    entry = ToolEntry("t", "ts", {"name": "t"}, handler, None, ["KEY"], False, "desc", "*", 500)
    assert (entry.name, entry.toolset, entry.requires_env, entry.max_result_size_chars) == (
        "t",
        "ts",
        ["KEY"],
        500,
    )
    assert entry.dynamic_schema_overrides is None and entry.handler is handler
    assert invalidate_check_fn_cache() is None


def test_no_name_of_these_modules_is_left_undecided() -> None:
    omissions = json.loads((HERE / "hermes-0.19-omissions.json").read_text(encoding="utf-8"))
    undecided = [
        f"{module}.{name}"
        for module in SIX
        for name, reason in omissions.get(module, {}).items()
        if reason.startswith("not yet")
    ]
    assert undecided == []
