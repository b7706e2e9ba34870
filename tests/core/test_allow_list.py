"""``plugins.enabled``: Hermes' allow-list of plugins.

Without the key every plugin that is not disabled loads (the kernel's default, as the seeds describe).
With it, only the plugins it lists load; the others are known, listed as "not enabled" with the
command that enables them, and named by ``doctor``.  As in Hermes Agent 0.19.0 (read from its source;
it is not installed on CI machines), the plugins another setting chooses are exempt: model providers,
memory and context-engine plugins, and bundled backends and platform adapters.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml
from conftest import CLI, cli_env, write_plugin

from kernel import Kernel

TOOL = """
import json

def register(ctx):
    ctx.register_tool({name!r}, "t", {{"description": "x", "parameters": {{"type": "object",
                      "properties": {{}}}}}}, lambda args, **kw: json.dumps({{"tool": {name!r}}}))
"""


def config(home: Path, **plugins: object) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"plugins": plugins}), encoding="utf-8")


def setup(home: Path, bundled: Path) -> None:
    for name in ("alpha", "beta"):
        write_plugin(home / "plugins", name, TOOL.format(name=f"{name}_tool"))
    write_plugin(bundled, "bundled_tool", TOOL.format(name="bundled_tool"))
    write_plugin(bundled / "platforms", "chat", TOOL.format(name="chat_tool"))
    write_plugin(home / "plugins" / "memory", "store", TOOL.format(name="store_tool"))


def test_without_the_key_every_plugin_loads(
    home: Path, bundled: Path, make_kernel: Callable[..., Kernel]
) -> None:
    setup(home, bundled)
    k = make_kernel()
    assert all(p.enabled for p in k.plugins), [(p.name, p.error) for p in k.plugins]


def test_with_the_key_only_listed_plugins_and_the_exempt_ones_load(
    home: Path, bundled: Path, make_kernel: Callable[..., Kernel]
) -> None:
    setup(home, bundled)
    config(home, enabled=["alpha"])
    k = make_kernel()
    state = {p.name: p.enabled for p in k.plugins}
    assert state == {
        "alpha": True,
        "beta": False,
        "bundled_tool": False,  # a bundled plugin of no other kind needs listing too, as in Hermes
        "memory/store": True,  # memory.provider chooses among these
        "platforms/chat": True,  # a bundled platform adapter
    }
    beta = k.plugin("beta")
    assert beta.error == (
        "not enabled in config (plugins.enabled does not list it): run `hermes-kernel plugins enable beta`"
    )
    assert "beta_tool" not in k.tools and "alpha_tool" in k.tools


def test_disabled_wins_over_enabled_and_a_bad_value_is_a_config_problem(
    home: Path, bundled: Path, make_kernel: Callable[..., Kernel]
) -> None:
    setup(home, bundled)
    config(home, enabled=["alpha", "beta"], disabled=["beta"])
    k = make_kernel()
    assert k.plugin("alpha").enabled and "plugins.disabled" in (k.plugin("beta").error or "")
    config(home, enabled="alpha")  # a string is what the user meant as a list: applied, with a warning
    k2 = make_kernel()
    assert any("plugins.enabled" in p for p in k2.problems), k2.problems
    assert k2.plugin("alpha").enabled and not k2.plugin("beta").enabled
    config(home, enabled={"alpha": 1})
    k3 = make_kernel()
    assert any("plugins.enabled" in p for p in k3.problems), k3.problems
    assert k3.plugin("beta").enabled  # an unreadable allow-list is ignored, not applied half-way


def run(home: Path, bundled: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        env=cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_lists_them_as_not_enabled_and_enable_adds_to_the_list(home: Path, bundled: Path) -> None:
    setup(home, bundled)
    config(home, enabled=["alpha"])
    listed = run(home, bundled, "plugins", "list", "--refresh")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("beta "))
    assert "not enabled" in row
    assert "run `hermes-kernel plugins enable beta`" in listed.stdout

    doctor = run(home, bundled, "doctor", "--json")
    findings = json.loads(doctor.stdout)["findings"]
    [beta] = [f for f in findings if f["subject"] == "'beta'"]
    assert beta["level"] == "warning" and beta["fix"] == "hermes-kernel plugins enable beta"
    assert "plugins.enabled" in beta["problem"]

    enabled = run(home, bundled, "plugins", "enable", "beta")
    assert enabled.returncode == 0, enabled.stderr
    assert "added it to plugins.enabled" in enabled.stdout
    data = yaml.safe_load((home / "config.yaml").read_text())
    assert data["plugins"]["enabled"] == ["alpha", "beta"]

    disabled = run(home, bundled, "plugins", "disable", "alpha")
    assert "added it to plugins.disabled and removed it from plugins.enabled" in disabled.stdout
    data = yaml.safe_load((home / "config.yaml").read_text())
    assert data["plugins"] == {"enabled": ["beta"], "disabled": ["alpha"]}
