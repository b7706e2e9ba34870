"""``hermes-kernel providers list [--json]`` as a real subprocess against a temporary home."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, cli_env, run_json, write_plugin

ROW_FIELDS = {"slot", "name", "plugin", "active", "available", "reason", "endpoint"}

SLOT_PLUGIN = """
from kernel.providers import ContextEngine, ImageGenProvider, MemoryProvider


class Notes(MemoryProvider):
    name = "notes"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


class Vault(MemoryProvider):
    name = "vault"

    def is_available(self):
        return False

    def unavailable_reason(self):
        return "needs VAULT_TOKEN"

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []


class Trim(ContextEngine):
    name = "trim"

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return messages

    def update_from_response(self, usage):
        pass


class Painter(ImageGenProvider):
    name = "painter"

    def generate(self, prompt, aspect_ratio="landscape", **kwargs):
        return {"success": False, "error": "not in tests"}


def register(ctx):
    ctx.register_memory_provider(Notes())
    ctx.register_memory_provider(Vault())
    ctx.register_context_engine(Trim())
    ctx.register_image_gen_provider(Painter())
"""


@pytest.fixture
def cli_home(home: Path) -> Path:
    """A home with one plugin offering a provider for every other slot."""
    write_plugin(home / "plugins", "slotted", SLOT_PLUGIN)
    return home


@pytest.fixture
def bundled_dir(tmp_path: Path) -> Path:
    """A bundled directory with only the real model provider plugins."""
    path = tmp_path / "bundled-providers"
    path.mkdir()
    shutil.copytree(REPO / "extensions" / "model-providers", path / "model-providers")
    return path


def write_config(home: Path, config: dict[str, Any]) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def providers_cli(home: Path, bundled: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(home)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    if bundled is not None:
        env["HERMES_BUNDLED_PLUGINS"] = str(bundled)
    return subprocess.run([*CLI, "providers", *args], env=env, capture_output=True, text=True, check=False)


def json_rows(home: Path, bundled: Path | None) -> list[dict[str, Any]]:
    proc = providers_cli(home, bundled, "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = run_json(proc.stdout)
    assert isinstance(rows, list)
    for row in rows:
        assert set(row) == ROW_FIELDS, row
    return rows


def by_slot_and_name(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["slot"], r["name"]): r for r in rows}


def table_line(stdout: str, *words: str) -> tuple[int, str]:
    lines = stdout.splitlines()
    for index, line in enumerate(lines):
        if all(word in line.split() for word in words):
            return index, line
    pytest.fail(f"no line with {words} in:\n{stdout}")


def test_json_lists_every_slot_with_active_and_available(cli_home: Path, bundled_dir: Path) -> None:
    write_config(
        cli_home,
        {
            "model": {"provider": "openai-compatible", "model": "m1"},
            "memory": {"provider": "vault"},
            "context": {"engine": "trim"},
            "image_gen": {"provider": "painter"},
        },
    )
    rows = by_slot_and_name(json_rows(cli_home, bundled_dir))
    assert set(rows) == {
        ("model_provider", "openai-compatible"),
        ("model_provider", "scripted"),
        ("memory", "notes"),
        ("memory", "vault"),
        ("context_engine", "trim"),
        ("image_gen", "painter"),
    }
    openai = rows[("model_provider", "openai-compatible")]
    assert openai["plugin"] == "model-providers/openai-compatible"
    assert openai["active"] is True and openai["available"] is False
    assert "base_url" in openai["reason"]
    assert rows[("model_provider", "scripted")] == {
        "slot": "model_provider",
        "name": "scripted",
        "plugin": "model-providers/scripted",
        "active": False,
        "available": True,
        "reason": "",
        "endpoint": "",
    }
    assert rows[("memory", "vault")] == {
        "slot": "memory",
        "name": "vault",
        "plugin": "slotted",
        "active": True,
        "available": False,
        "reason": "needs VAULT_TOKEN",
        "endpoint": "",
    }
    assert rows[("memory", "notes")]["active"] is False and rows[("memory", "notes")]["available"] is True
    assert rows[("context_engine", "trim")]["active"] is True
    assert rows[("image_gen", "painter")]["active"] is True and rows[("image_gen", "painter")]["available"]


def test_the_table_shows_the_reason_under_an_unavailable_provider(cli_home: Path, bundled_dir: Path) -> None:
    write_config(cli_home, {"model": {"provider": "openai-compatible", "model": "m1"}})
    proc = providers_cli(cli_home, bundled_dir, "list")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    header = out.splitlines()[0].split()
    assert header == ["SLOT", "NAME", "PLUGIN", "ACTIVE", "AVAILABLE"]
    index, line = table_line(out, "model_provider", "openai-compatible")
    assert line.split() == [
        "model_provider",
        "openai-compatible",
        "model-providers/openai-compatible",
        "yes",
        "no",
    ]
    reason = out.splitlines()[index + 1]
    assert reason.startswith("    ") and "base_url" in reason, out
    _, scripted = table_line(out, "model_provider", "scripted")
    assert scripted.split() == ["model_provider", "scripted", "model-providers/scripted", "yes"]
    _, vault = table_line(out, "memory", "vault")
    assert vault.split()[-1] == "no"
    assert "needs VAULT_TOKEN" in out


def test_a_configured_base_url_makes_openai_compatible_available(cli_home: Path, bundled_dir: Path) -> None:
    write_config(
        cli_home, {"model": {"provider": "ollama", "model": "llama3", "base_url": "http://127.0.0.1:9/v1"}}
    )
    rows = by_slot_and_name(json_rows(cli_home, bundled_dir))
    openai = rows[("model_provider", "openai-compatible")]
    assert openai["active"] is True and openai["available"] is True and openai["reason"] == ""
    assert rows[("model_provider", "scripted")]["active"] is False


def test_an_unknown_configured_name_is_a_problem_row(cli_home: Path, bundled_dir: Path) -> None:
    write_config(cli_home, {"model": {"provider": "nope"}, "memory": {"provider": "missing-memory"}})
    rows = json_rows(cli_home, bundled_dir)
    problems = [r for r in rows if r["plugin"] is None]
    assert {(r["slot"], r["name"]) for r in problems} == {
        ("model_provider", "nope"),
        ("memory", "missing-memory"),
    }
    model_problem = next(r for r in problems if r["slot"] == "model_provider")
    assert model_problem["active"] is True and model_problem["available"] is False
    assert "'nope'" in model_problem["reason"]
    assert "openai-compatible, scripted" in model_problem["reason"], model_problem
    memory_problem = next(r for r in problems if r["slot"] == "memory")
    assert "notes, vault" in memory_problem["reason"], memory_problem

    proc = providers_cli(cli_home, bundled_dir, "list")
    assert proc.returncode == 0, proc.stderr
    index, line = table_line(proc.stdout, "model_provider", "nope")
    assert line.split() == ["model_provider", "nope", "-", "yes", "no"]
    assert "openai-compatible, scripted" in proc.stdout.splitlines()[index + 1]
    # The same problem is reported on stderr as a warning.
    assert "warning: model.provider" in proc.stderr and "'nope'" in proc.stderr


def test_providers_without_an_action_lists_them(cli_home: Path, bundled_dir: Path) -> None:
    proc = providers_cli(cli_home, bundled_dir)
    assert proc.returncode == 0, proc.stderr
    table_line(proc.stdout, "model_provider", "openai-compatible")
    table_line(proc.stdout, "memory", "notes")


def test_no_providers_at_all(home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bundled"
    empty.mkdir()
    proc = providers_cli(home, empty, "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "No providers."
    assert json_rows(home, empty) == []


def test_the_checkout_bundles_both_model_providers(home: Path) -> None:
    write_config(home, {"model": {"provider": "scripted", "script": "demo.yaml"}})
    rows = by_slot_and_name(json_rows(home, None))
    scripted = rows[("model_provider", "scripted")]
    assert scripted["active"] is True and scripted["available"] is True
    assert scripted["plugin"] == "model-providers/scripted"
    openai = rows[("model_provider", "openai-compatible")]
    assert openai["active"] is False and openai["available"] is False and "base_url" in openai["reason"]
