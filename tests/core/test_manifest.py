"""Plugin manifests: parsing and validation, directly and through a loaded kernel."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_json, write_plugin

from kernel import EnvVar, Kernel, Manifest, ManifestError
from kernel.core.sources.manifest import KINDS, load_manifest

FULL_MANIFEST = """\
name: weather
version: 2.4.1
description: Forecasts for the agent.
author:
  name: Ada Example
  email: ada@example.org
  url: https://example.org/ada
kind: backend
provides_tools:
  - forecast
  - alerts
provides_hooks:
  - pre_llm_call
  - post_tool_call
requires_env:
  - KTEST_WEATHER_REGION
  - name: KTEST_WEATHER_API_KEY
    description: The API key of the weather service.
    url: https://example.org/keys
    secret: true
optional_env:
  - KTEST_WEATHER_UNITS
  - name: KTEST_WEATHER_CACHE
    description: Where to cache answers.
label: Weather forecasts
"""

# A plugin whose tool proves that it loaded: dispatch("<tool>") -> {"ok": "<tool>"}.
TOOL_CODE = """\
import json

def register(ctx):
    ctx.register_tool(
        name={tool!r},
        toolset="test",
        schema={{"description": "test tool", "parameters": {{"type": "object", "properties": {{}}}}}},
        handler=lambda args, **kw: json.dumps({{"ok": {tool!r}}}),
    )
"""


def tool_code(tool: str) -> str:
    return TOOL_CODE.format(tool=tool)


def write_manifest(folder: Path, text: str, filename: str = "plugin.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    path.write_text(text, encoding="utf-8")
    return path


# -- load_manifest: the parser ---------------------------------------------------------------------


def test_every_field_is_parsed(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "weather", FULL_MANIFEST)
    m = load_manifest(path, "weather")
    assert isinstance(m, Manifest)
    assert m.name == "weather"
    assert m.version == "2.4.1"
    assert m.description == "Forecasts for the agent."
    assert "Ada Example" in m.author
    assert "ada@example.org" in m.author
    assert m.kind == "backend"
    assert m.provides_tools == ("forecast", "alerts")
    assert m.provides_hooks == ("pre_llm_call", "post_tool_call")
    assert m.requires_env == (
        EnvVar(name="KTEST_WEATHER_REGION"),
        EnvVar(
            name="KTEST_WEATHER_API_KEY",
            description="The API key of the weather service.",
            url="https://example.org/keys",
            secret=True,
        ),
    )
    assert [v.name for v in m.optional_env] == ["KTEST_WEATHER_UNITS", "KTEST_WEATHER_CACHE"]
    assert m.optional_env[1].description == "Where to cache answers."
    assert m.optional_env[0].secret is False
    assert m.label == "Weather forecasts"
    assert m.path == path
    assert m.extra == {}


def test_author_as_plain_string(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "name: p\nauthor: Grace Example <grace@example.org>\n")
    assert load_manifest(path, "p").author == "Grace Example <grace@example.org>"


def test_author_mapping_with_name_only(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "name: p\nauthor:\n  name: Grace Example\n")
    assert load_manifest(path, "p").author == "Grace Example"


@pytest.mark.parametrize("kind", KINDS)
def test_each_known_kind_is_kept(tmp_path: Path, kind: str) -> None:
    path = write_manifest(tmp_path / "p", f"name: p\nkind: {kind}\n")
    m = load_manifest(path, "p")
    assert m.kind == kind
    assert m.warnings == ()


def test_defaults_when_fields_are_absent(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "name: p\n")
    m = load_manifest(path, "p")
    assert (m.version, m.description, m.author, m.label) == ("", "", "", "")
    assert m.kind == "standalone"
    assert m.provides_tools == () and m.provides_hooks == ()
    assert m.requires_env == () and m.optional_env == ()


def test_numeric_version_is_read_as_text(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "name: p\nversion: 1.5\n")
    assert load_manifest(path, "p").version == "1.5"


def test_plugin_yml_spelling_is_found_and_parsed(tmp_path: Path) -> None:
    from kernel.core.sources.manifest import find_manifest

    folder = tmp_path / "yml-plugin"
    path = write_manifest(folder, "name: yml-plugin\nversion: 3.0.0\n", filename="plugin.yml")
    assert find_manifest(folder) == path
    assert load_manifest(path, "x").version == "3.0.0"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "bom"
    folder.mkdir()
    path = folder / "plugin.yaml"
    path.write_bytes("name: bom-plugin\ndescription: Ünïcödé\n".encode("utf-8-sig"))
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    m = load_manifest(path, "bom")
    assert m.name == "bom-plugin"
    assert m.description == "Ünïcödé"


def test_unknown_fields_are_kept_in_extra(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path / "p", "name: p\nhomepage: https://example.org\nfuture_field:\n  nested: [1, 2]\n"
    )
    m = load_manifest(path, "p")
    assert m.extra == {"homepage": "https://example.org", "future_field": {"nested": [1, 2]}}
    assert m.name == "p"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_manifest_defaults_the_name_to_the_folder(tmp_path: Path, text: str) -> None:
    path = write_manifest(tmp_path / "folder-name", text)
    m = load_manifest(path, "folder-name")
    assert m.name == "folder-name"
    assert m.kind == "standalone"


def test_malformed_yaml_names_the_file_with_line_and_column(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "name: p\nprovides_tools: [a, b\nversion: 1\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(path, "p")
    message = str(info.value)
    assert str(path) in message
    assert re.search(r"line \d+, column \d+", message), message
    assert info.value.path == path


def test_top_level_list_is_refused(tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "p", "- name\n- version\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(path, "p")
    assert str(path) in str(info.value)
    assert "mapping" in str(info.value)


# (manifest text, the field the error must name)
MISTYPED = [
    pytest.param('name: mistyped\nprovides_tools: "x"\n', "provides_tools", id="provides_tools-str"),
    pytest.param("name: mistyped\nprovides_tools: [1]\n", "provides_tools", id="provides_tools-int-item"),
    pytest.param("name: mistyped\nprovides_hooks: {a: 1}\n", "provides_hooks", id="provides_hooks-map"),
    pytest.param(
        "name: mistyped\nrequires_env:\n  - description: x\n", "requires_env", id="requires_env-no-name"
    ),
    pytest.param("name: mistyped\nrequires_env: KTEST_X\n", "requires_env", id="requires_env-str"),
    pytest.param(
        "name: mistyped\nrequires_env:\n  - name: KTEST_X\n    secret: maybe\n",
        "requires_env",
        id="requires_env-secret-str",
    ),
    pytest.param(
        "name: mistyped\nrequires_env:\n  - name: KTEST_X\n    url: 5\n",
        "requires_env",
        id="requires_env-url",
    ),
    pytest.param("name: mistyped\noptional_env: [[1]]\n", "optional_env", id="optional_env-nested"),
    pytest.param("name: mistyped\nauthor: 5\n", "author", id="author-int"),
    pytest.param("name: [1]\n", "name", id="name-list"),
    pytest.param('name: "  "\n', "name", id="name-blank"),
    pytest.param("name: mistyped\nversion: [1, 2]\n", "version", id="version-list"),
    pytest.param("name: mistyped\ndescription: {a: b}\n", "description", id="description-map"),
    pytest.param("name: mistyped\nkind: 3\n", "kind", id="kind-int"),
    pytest.param("name: mistyped\nlabel: [x]\n", "label", id="label-list"),
]


@pytest.mark.parametrize(("text", "field"), MISTYPED)
def test_mistyped_field_raises_naming_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = write_manifest(tmp_path / "mistyped", text)
    with pytest.raises(ManifestError) as info:
        load_manifest(path, "mistyped")
    assert info.value.field == field
    assert info.value.path == path
    assert str(path) in str(info.value)
    assert field in str(info.value)


# -- through a loaded kernel ------------------------------------------------------------------------


def test_full_manifest_through_the_kernel(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTEST_WEATHER_REGION", "north")
    monkeypatch.setenv("KTEST_WEATHER_API_KEY", "k-123")
    code = tool_code("forecast").replace(
        "def register(ctx):",
        "def register(ctx):\n    ctx.register_hook('pre_llm_call', lambda **kw: 'sunny')",
    )
    folder = plugin_dir("weather-dir", code, manifest=FULL_MANIFEST)
    k = make_kernel()
    info = k.plugin("weather")
    assert info.enabled, info.error
    assert info.error is None
    assert info.version == "2.4.1"
    assert info.description == "Forecasts for the agent."
    assert info.kind == "backend"
    assert info.source == "user"
    assert info.path == str(folder)
    assert info.tools == ["forecast"]
    assert info.hooks == ["pre_llm_call"]
    assert info.warnings == []
    assert run_json(k.tools.dispatch("forecast", {})) == {"ok": "forecast"}
    assert k.pre_llm_context(user_message="hi") == "sunny"


def test_manifest_name_is_the_plugin_key_not_the_folder(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("some-folder", manifest={"name": "nice-name"})
    k = make_kernel()
    assert [p.name for p in k.plugins] == ["nice-name"]
    assert k.plugins[0].enabled


def test_plugin_yml_through_the_kernel(home: Path, make_kernel: Callable[..., Kernel]) -> None:
    folder = write_plugin(home / "plugins", "ymlp", tool_code("yml_tool"), manifest="")
    (folder / "plugin.yml").write_text("name: yml-named\nversion: 0.9.0\n", encoding="utf-8")
    k = make_kernel()
    info = k.plugin("yml-named")
    assert info.enabled, info.error
    assert info.version == "0.9.0"
    assert run_json(k.tools.dispatch("yml_tool", {})) == {"ok": "yml_tool"}


def test_bom_manifest_through_the_kernel(home: Path, make_kernel: Callable[..., Kernel]) -> None:
    folder = write_plugin(home / "plugins", "bomdir", tool_code("bom_tool"), manifest="")
    (folder / "plugin.yaml").write_bytes("name: bom-plugin\nversion: 1.0.0\n".encode("utf-8-sig"))
    k = make_kernel()
    info = k.plugin("bom-plugin")
    assert info.enabled, info.error
    assert info.version == "1.0.0"


def test_unknown_fields_are_ignored_with_a_debug_line(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", "1")
    plugin_dir(
        "extra",
        tool_code("extra_tool"),
        manifest="name: extra\nprovides_tools: [extra_tool]\nshiny_new_field: 42\nhomepage: x\n",
    )
    k = make_kernel()
    info = k.plugin("extra")
    assert info.enabled, info.error
    assert info.warnings == []
    assert run_json(k.tools.dispatch("extra_tool", {})) == {"ok": "extra_tool"}
    log = (home / "logs" / "agent.log").read_text(encoding="utf-8")
    lines = [line for line in log.splitlines() if "shiny_new_field" in line]
    assert lines, log
    assert all("debug" in line for line in lines), lines
    assert any("extra" in line for line in lines)


def test_unknown_fields_do_not_reach_the_log_as_warnings(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("extra", manifest="name: extra\nshiny_new_field: 42\n")
    k = make_kernel()
    assert k.plugin("extra").enabled
    log_file = home / "logs" / "agent.log"
    text = log_file.read_text(encoding="utf-8") if log_file.exists() else ""
    assert "shiny_new_field" not in text


def test_malformed_yaml_disables_only_that_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    bad = plugin_dir("broken-yaml", tool_code("never_tool"), manifest="name: broken-yaml\nversion: [1\n")
    plugin_dir("sibling", tool_code("sibling_tool"))
    k = make_kernel()
    info = k.plugin("broken-yaml")
    assert info.enabled is False
    assert info.error is not None
    assert str(bad / "plugin.yaml") in info.error
    assert re.search(r"line \d+, column \d+", info.error), info.error
    assert "never_tool" not in k.tools
    assert k.plugin("sibling").enabled
    assert run_json(k.tools.dispatch("sibling_tool", {})) == {"ok": "sibling_tool"}
    assert "broken-yaml" in (home / "logs" / "agent.log").read_text(encoding="utf-8")


@pytest.mark.parametrize(("text", "field"), MISTYPED)
def test_mistyped_field_disables_only_that_plugin(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    text: str,
    field: str,
) -> None:
    bad = plugin_dir("mistyped", tool_code("mistyped_tool"), manifest=text)
    plugin_dir("sibling", tool_code("sibling_tool"))
    k = make_kernel()
    # A name that cannot be read leaves the plugin listed under its folder name.
    info = next(p for p in k.plugins if p.path == str(bad))
    assert info.name == "mistyped"
    assert info.enabled is False
    assert info.error is not None
    assert str(bad / "plugin.yaml") in info.error
    assert field in info.error
    assert info.tools == []
    assert "mistyped_tool" not in k.tools
    assert k.plugin("sibling").enabled
    assert run_json(k.tools.dispatch("sibling_tool", {})) == {"ok": "sibling_tool"}


def test_mistyped_manifest_code_is_never_imported(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], tmp_path: Path
) -> None:
    flag = tmp_path / "imported.flag"
    plugin_dir(
        "mistyped",
        f"open({str(flag)!r}, 'w').close()\n\ndef register(ctx):\n    pass\n",
        manifest="name: mistyped\nauthor: 5\n",
    )
    k = make_kernel()
    assert k.plugin("mistyped").enabled is False
    assert not flag.exists()


def test_empty_manifest_defaults_the_name_to_the_folder_in_the_kernel(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    folder = plugin_dir("folder-named", tool_code("folder_tool"), manifest="")
    (folder / "plugin.yaml").write_text("", encoding="utf-8")
    k = make_kernel()
    info = k.plugin("folder-named")
    assert info.enabled, info.error
    assert info.path == str(folder)
    assert run_json(k.tools.dispatch("folder_tool", {})) == {"ok": "folder_tool"}


def test_kind_and_version_appear_in_to_dict(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("prov", manifest={"name": "prov", "version": "4.5.6", "kind": "exclusive"})
    k = make_kernel()
    data: Any = json.loads(json.dumps([p.to_dict() for p in k.plugins]))
    assert data[0]["name"] == "prov"
    assert data[0]["version"] == "4.5.6"
    assert data[0]["kind"] == "exclusive"


def test_manifest_yaml_is_parsed_safely(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], tmp_path: Path
) -> None:
    # A python-specific YAML tag must not construct objects: it is a manifest error instead.
    flag = tmp_path / "yaml-exec.flag"
    text = f"name: unsafe\ndescription: !!python/object/apply:os.system ['touch {flag}']\n"
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)
    plugin_dir("unsafe", manifest=text)
    k = make_kernel()
    info = k.plugin("unsafe")
    assert info.enabled is False
    assert "plugin.yaml" in (info.error or "")
    assert not flag.exists()


def test_a_parsed_manifest_has_every_field_and_stays_frozen(tmp_path: Path) -> None:
    """``parse_manifest`` makes its ``Manifest`` without the dataclass's per-field setattr: every field
    of the class is there, it equals one built normally, and it is still read-only."""
    import dataclasses

    from kernel.core.sources.manifest import parse_manifest

    data = {"name": "full", "version": 2, "author": {"name": "A"}, "requires_env": ["KEY"], "odd": [1]}
    manifest = parse_manifest(data, tmp_path / "plugin.yaml", "full")
    assert set(vars(manifest)) == {f.name for f in dataclasses.fields(Manifest)}
    assert Manifest(**{f.name: getattr(manifest, f.name) for f in dataclasses.fields(Manifest)}) == manifest
    assert manifest.version == "2" and manifest.extra == {"odd": [1]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.name = "other"  # type: ignore[misc]
