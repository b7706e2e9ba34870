"""``hermes-kernel plugins info|enable|disable|install|remove``, ``hooks list``, ``logs`` and ``doctor``.

Every command runs as a real subprocess against a temporary home, with real plugin directories, a real
local git repository (``git init`` / ``git commit``, cloned through ``file://`` and a bare-repository path),
a real ``pip install`` of a package built from a local directory into a ``--target`` directory (no index,
no build isolation), prompts answered through pipes and through a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import stat
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, cli_env, default_sigint, read_rest, read_until, write_pip_project, write_plugin
from dotenv import dotenv_values

from kernel import hookspecs

# A safety net against a hung child only (the machine is noisy; nothing is timed).
DEADLOCK = 120

TOOL_PLUGIN = """
import json

def register(ctx):
    ctx.register_tool("{tool}", "demo", {{"description": "{description}"}},
                      lambda args, **kw: json.dumps({{"ok": True}}))
"""


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def env(home: Path, bundled: Path) -> dict[str, str]:
    """The subprocess environment: ``home`` and an empty bundled directory (only the tests' plugins)."""
    return cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))


def run(
    env: dict[str, str], *args: str, stdin: str | None = None, **extra: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        env={**env, **extra},
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=DEADLOCK,
        check=False,
    )


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def failed(result: subprocess.CompletedProcess, code: int = 1) -> subprocess.CompletedProcess:
    assert result.returncode == code, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def listing(env: dict[str, str], **extra: str) -> dict[str, dict[str, Any]]:
    result = ok(run(env, "plugins", "list", "--refresh", "--json", **extra))
    return {p["name"]: p for p in json.loads(result.stdout)}


def read_config(home: Path) -> Any:
    return yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))


def write_config(home: Path, data: Any) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")


def tool_plugin(
    root: Path, dirname: str, tool: str, manifest: dict[str, Any] | None = None, **kw: Any
) -> Path:
    code = TOOL_PLUGIN.format(tool=tool, description=f"The {tool} tool.")
    manifest = manifest or {"name": dirname, "version": "1.0.0", "provides_tools": [tool]}
    return write_plugin(root, dirname, code, manifest, **kw)


def run_in_pty(env: dict[str, str], args: list[str], dialogue: list[tuple[str, str]]) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal (its own session, so /dev/tty is that terminal's stdin);
    answer each prompt of ``dialogue`` after it appears; return the exit code and everything shown."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, *args],
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        for prompt, answer in dialogue:
            read_until(master, prompt, seen)
            os.write(master, answer.encode() + b"\n")
        read_rest(master, seen)
        code = proc.wait(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, seen.decode(errors="replace")


def git(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main",
         *args],
        cwd=cwd, capture_output=True, text=True, check=False, timeout=DEADLOCK,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    git("init", "-q", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "plugin", cwd=path)
    return path


def repo_files(name: str, version: str, tool: str) -> dict[str, str]:
    return {
        "plugin.yaml": yaml.safe_dump({"name": name, "version": version, "provides_tools": [tool]}),
        "__init__.py": TOOL_PLUGIN.format(tool=tool, description=f"The {tool} tool."),
    }


# --------------------------------------------------------------------------- --help


@pytest.mark.parametrize(
    "argv",
    [
        ["plugins", "info", "--help"],
        ["plugins", "enable", "--help"],
        ["plugins", "disable", "--help"],
        ["plugins", "install", "--help"],
        ["plugins", "remove", "--help"],
        ["hooks", "--help"],
        ["hooks", "list", "--help"],
        ["logs", "--help"],
        ["doctor", "--help"],
    ],
)
def test_every_command_has_help(env, argv):
    result = ok(run(env, *argv))
    assert result.stdout.startswith("usage: hermes-kernel")


def test_install_help_documents_the_sources(env):
    text = ok(run(env, "plugins", "install", "--help")).stdout
    for word in ("pip:REQUIREMENT", "git clone", "plugin.yaml", "pyproject.toml", "--pip-arg"):
        assert word in text


# --------------------------------------------------------------------------- plugins info


@pytest.fixture
def weather_home(home: Path) -> Path:
    """``weather`` (tool, hooks, command, skill, env vars), ``alpha`` (hook before it), ``broken``."""
    plugins = home / "plugins"
    write_plugin(
        plugins,
        "weather",
        """
        import json

        def forecast(args, **kw):
            return json.dumps({"sky": "clear"})

        def before_tool(**kw):
            return None

        def session_start(**kw):
            return None

        def register(ctx):
            schema = {"description": "Tell the weather.\\nSecond line."}
            ctx.register_tool("forecast", "weather", schema, forecast)
            ctx.register_hook("pre_tool_call", before_tool)
            ctx.register_hook("on_session_start", session_start)
            ctx.register_command("sky", lambda args: "blue", description="Look at the sky")
            ctx.register_skill("umbrella", "skills/umbrella")
        """,
        {
            "name": "weather",
            "version": "2.1.0",
            "description": "Weather forecasts for agents.",
            "author": {"name": "Ada", "email": "ada@example.invalid"},
            "provides_tools": ["forecast"],
            "provides_hooks": ["pre_tool_call", "on_session_start"],
            "requires_env": [
                {
                    "name": "HK_WEATHER_KEY",
                    "description": "API key of the weather service",
                    "url": "https://weather.example.invalid/keys",
                    "secret": True,
                }
            ],
            "optional_env": ["HK_WEATHER_UNITS"],
            "homepage": "https://example.invalid",
        },
        files={"skills/umbrella/SKILL.md": "---\ndescription: When to take an umbrella\n---\nTake it.\n"},
    )
    write_plugin(
        plugins,
        "alpha",
        "def register(ctx):\n    ctx.register_hook('on_session_start', lambda **kw: None)\n",
    )
    write_plugin(plugins, "broken", "import hk_module_that_does_not_exist\n")
    return home


def test_info_shows_a_plugin_without_its_secret(weather_home, env):
    (weather_home / ".env").write_text("HK_WEATHER_KEY=s3cret-value-123\n", encoding="utf-8")
    text = ok(run(env, "plugins", "info", "weather")).stdout
    assert "weather 2.1.0: enabled" in text
    assert "Weather forecasts for agents." in text
    assert str(weather_home / "plugins" / "weather") in text
    assert "HK_WEATHER_KEY: set (.env) [secret]" in text
    assert "HK_WEATHER_UNITS: MISSING" in text
    assert "forecast [weather]  Tell the weather." in text
    assert "Second line" not in text
    assert "on_session_start: session_start (#2 of 2)" in text  # alpha's callback runs first
    assert "pre_tool_call: before_tool (#1 of 1)" in text
    assert "/sky  Look at the sky" in text
    assert "weather:umbrella  When to take an umbrella" in text
    assert "s3cret-value-123" not in text


def test_info_json_has_every_plugin_info_field_and_the_details(weather_home, env):
    data = json.loads(ok(run(env, "plugins", "info", "weather", "--json", HK_WEATHER_KEY="from-env")).stdout)
    for key in ("name", "version", "kind", "source", "path", "enabled", "error", "tools", "hooks", "commands",
                "disabled_hooks", "description", "warnings", "hook_errors", "overrides", "cli_commands",
                "skills", "deferred"):  # fmt: skip
        assert key in data
    assert data["name"] == "weather" and data["source"] == "user" and data["enabled"] is True
    assert data["tools"] == ["forecast"]
    assert data["hooks"] == ["pre_tool_call", "on_session_start"]
    manifest = data["manifest"]
    assert manifest["path"] == str(weather_home / "plugins" / "weather" / "plugin.yaml")
    assert manifest["author"] == "Ada ada@example.invalid"
    assert manifest["extra_fields"] == ["homepage"]
    assert manifest["requires_env"] == [
        {
            "name": "HK_WEATHER_KEY",
            "description": "API key of the weather service",
            "url": "https://weather.example.invalid/keys",
            "secret": True,
            "set": True,
            "where": "environment",
        }
    ]
    assert manifest["optional_env"][0]["set"] is False
    assert data["tool_details"] == [
        {
            "name": "forecast",
            "toolset": "weather",
            "description": "Tell the weather.\nSecond line.",
            "requires_env": [],
            "available": True,
            "reason": "",
        }
    ]
    hooks = {h["hook"]: h for h in data["hook_details"]}
    assert (hooks["on_session_start"]["position"], hooks["on_session_start"]["of"]) == (2, 2)
    assert hooks["pre_tool_call"]["disabled"] is False
    assert data["command_details"] == [{"name": "sky", "description": "Look at the sky", "args_hint": ""}]
    assert [s["name"] for s in data["skill_details"]] == ["weather:umbrella"]
    assert "from-env" not in json.dumps(data)


def test_info_of_a_plugin_missing_its_env_and_of_a_failed_one(weather_home, env):
    data = json.loads(ok(run(env, "plugins", "info", "weather", "--json")).stdout)
    assert data["enabled"] is False
    assert data["status"] == "disabled (missing environment variables)"
    assert "HK_WEATHER_KEY" in data["error"]
    assert data["manifest"]["requires_env"][0]["set"] is False
    text = ok(run(env, "plugins", "info", "broken")).stdout
    assert "broken 0.1.0: failed" in text
    assert "hk_module_that_does_not_exist" in text


def test_info_unknown_name_lists_close_names_on_stderr(weather_home, env):
    result = failed(run(env, "plugins", "info", "wether"))
    assert result.stdout == ""
    assert "no plugin named 'wether'" in result.stderr
    assert "weather" in result.stderr


def test_info_accepts_the_manifest_name_of_a_category_plugin(home, env):
    write_plugin(home / "plugins" / "memory", "notes", manifest={"name": "notes-memory", "version": "3.0"})
    data = json.loads(ok(run(env, "plugins", "info", "notes-memory", "--json")).stdout)
    assert data["name"] == "memory/notes"
    assert data["manifest"]["name"] == "notes-memory"


def test_info_of_bundled_plugins_including_a_deferred_model_provider(home):
    env = cli_env(home)  # the real bundled extensions/
    calculator = json.loads(ok(run(env, "plugins", "info", "calculator", "--json")).stdout)
    assert calculator["source"] == "bundled"
    assert sorted(calculator["tools"]) == ["calculate", "unit_convert"]
    scripted = json.loads(ok(run(env, "plugins", "info", "model-providers/scripted", "--json")).stdout)
    assert scripted["deferred"] is False  # imported for the info
    assert [(p["slot"], p["name"]) for p in scripted["providers"]] == [("model_provider", "scripted")]


# --------------------------------------------------------------------------- plugins enable / disable


CONFIG = {
    "model": {"provider": "scripted", "script": "turns.yaml"},
    "plugins": {"disabled": ["someone-else"], "entries": {"weather": {"settings": {"units": "metric"}}}},
    "notes": ["ünïcode", 1, True],
}


def test_disable_and_enable_edit_plugins_disabled_and_keep_the_rest(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    write_config(home, CONFIG)
    os.chmod(home / "config.yaml", 0o640)

    result = ok(run(env, "plugins", "disable", "weather"))
    assert "disabled 'weather'" in result.stdout and str(home / "config.yaml") in result.stdout
    data = read_config(home)
    assert data["plugins"]["disabled"] == ["someone-else", "weather"]
    assert {k: v for k, v in data.items() if k != "plugins"} == {
        k: v for k, v in CONFIG.items() if k != "plugins"
    }
    assert data["plugins"]["entries"] == CONFIG["plugins"]["entries"]
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o640
    entry = listing(env)["weather"]
    assert entry["enabled"] is False and "disabled via config" in entry["error"]

    before = (home / "config.yaml").read_bytes()
    again = ok(run(env, "plugins", "disable", "weather"))
    assert "already disabled" in again.stdout
    assert (home / "config.yaml").read_bytes() == before

    result = ok(run(env, "plugins", "enable", "weather"))
    assert "enabled 'weather'" in result.stdout
    assert read_config(home)["plugins"]["disabled"] == ["someone-else"]
    assert listing(env)["weather"]["enabled"] is True
    assert "already enabled" in ok(run(env, "plugins", "enable", "weather")).stdout
    assert [p.name for p in home.iterdir() if ".tmp" in p.name] == []


def test_disable_by_manifest_name_writes_the_key_and_enable_removes_either(home, env):
    write_plugin(home / "plugins" / "memory", "notes", manifest={"name": "notes-memory"})
    ok(run(env, "plugins", "disable", "notes-memory"))
    assert read_config(home) == {"plugins": {"disabled": ["memory/notes"]}}
    assert listing(env)["memory/notes"]["enabled"] is False
    # A hand-written entry with the manifest name is removed too.
    write_config(home, {"plugins": {"disabled": ["notes-memory"]}})
    assert "already disabled" in ok(run(env, "plugins", "disable", "memory/notes")).stdout
    ok(run(env, "plugins", "enable", "memory/notes"))
    assert read_config(home) == {"plugins": {"disabled": []}}


def test_enable_mentions_missing_env(home, env):
    write_plugin(home / "plugins", "gated", manifest={"name": "gated", "requires_env": ["HK_GATE"]})
    write_config(home, {"plugins": {"disabled": ["gated"]}})
    result = ok(run(env, "plugins", "enable", "gated"))
    assert "HK_GATE" in result.stdout and str(home / ".env") in result.stdout


def test_enable_and_disable_errors(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    result = failed(run(env, "plugins", "disable", "weathr"))
    assert "no plugin named 'weathr'" in result.stderr and "weather" in result.stderr
    assert not (home / "config.yaml").exists()
    failed(run(env, "plugins", "enable", "nothing-like-it"))

    # A string is read as the kernel reads it (one name): already disabled, nothing written.
    write_config(home, {"plugins": {"disabled": "weather"}, "keep": 1})
    before = (home / "config.yaml").read_bytes()
    assert "already disabled" in ok(run(env, "plugins", "disable", "weather")).stdout
    assert (home / "config.yaml").read_bytes() == before
    # A value that is no list of names at all is refused, the file untouched.
    write_config(home, {"plugins": {"disabled": {"weather": True}}, "keep": 1})
    before = (home / "config.yaml").read_bytes()
    result = failed(run(env, "plugins", "disable", "weather"))
    assert "plugins.disabled" in result.stderr
    assert (home / "config.yaml").read_bytes() == before

    (home / "config.yaml").write_text("plugins: [unclosed\n", encoding="utf-8")
    result = failed(run(env, "plugins", "enable", "weather"))
    assert "not valid YAML" in result.stderr
    assert (home / "config.yaml").read_text(encoding="utf-8") == "plugins: [unclosed\n"


def test_enable_removes_a_stale_entry_of_a_plugin_that_is_gone(home, env):
    write_config(home, {"plugins": {"disabled": ["gone", "other"]}})
    result = ok(run(env, "plugins", "enable", "gone"))
    assert "enabled 'gone'" in result.stdout
    assert read_config(home)["plugins"]["disabled"] == ["other"]


# --------------------------------------------------------------------------- plugins install: directories


def make_source(root: Path, name: str = "weather", version: str = "1.0.0", **manifest: Any) -> Path:
    src = tool_plugin(
        root,
        name,
        "forecast",
        {"name": name, "version": version, "provides_tools": ["forecast"], **manifest},
        files={"helpers/util.py": "VALUE = 1\n", "README.md": "read me\n"},
    )
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    return src


def test_install_a_directory(home, env, tmp_path):
    src = make_source(tmp_path / "src")
    result = ok(run(env, "plugins", "install", str(src), "--no-input"))
    dest = home / "plugins" / "weather"
    assert f"installed plugin 'weather' 1.0.0 from {src} into {dest}" in result.stdout
    assert "hermes-kernel plugins info weather" in result.stdout
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "README.md",
        "__init__.py",
        "helpers",
        "helpers/util.py",
        "plugin.yaml",
    ]
    entry = listing(env)["weather"]
    assert entry["enabled"] is True and entry["tools"] == ["forecast"] and entry["source"] == "user"
    # No staging left; the install record (and its lock) beside the plugin.
    names = sorted(p.name for p in (home / "plugins").iterdir())
    assert names == [".installs.json", ".installs.json.lock", "weather"]
    installs = json.loads((home / "plugins" / ".installs.json").read_text(encoding="utf-8"))
    record = installs["plugins"]["weather"]
    assert record["kind"] == "dir" and record["path"] == str(src.resolve()) and record["version"] == "1.0.0"
    assert sorted(record["files"]) == ["README.md", "__init__.py", "helpers/util.py", "plugin.yaml"]


def test_install_refuses_to_overwrite_without_force(home, env, tmp_path):
    ok(run(env, "plugins", "install", str(make_source(tmp_path / "v1")), "--no-input"))
    newer = make_source(tmp_path / "v2", version="2.0.0")
    result = failed(run(env, "plugins", "install", str(newer), "--no-input"))
    assert "--force" in result.stderr and str(home / "plugins" / "weather") in result.stderr
    assert yaml.safe_load((home / "plugins" / "weather" / "plugin.yaml").read_text())["version"] == "1.0.0"

    result = ok(run(env, "plugins", "install", str(newer), "--no-input", "--force"))
    assert "replaced" in result.stdout
    assert listing(env)["weather"]["version"] == "2.0.0"
    names = [p.name for p in (home / "plugins").iterdir() if not p.name.startswith(".installs.json")]
    assert names == ["weather"]


def test_install_with_another_directory_name(home, env, tmp_path):
    ok(run(env, "plugins", "install", str(make_source(tmp_path / "src")), "--no-input", "--name", "wx"))
    assert (home / "plugins" / "wx" / "plugin.yaml").is_file()
    assert listing(env)["weather"]["path"] == str(home / "plugins" / "wx")
    # The same plugin name under a second directory would be a duplicate: refused.
    result = failed(run(env, "plugins", "install", str(make_source(tmp_path / "again")), "--no-input"))
    assert "already installed at" in result.stderr and "wx" in result.stderr
    assert not (home / "plugins" / "weather").exists()


def test_install_validates_the_manifest_before_copying(home, env, tmp_path):
    src = make_source(tmp_path / "src")
    (src / "plugin.yaml").write_text("name: weather\nversion: [1, 2]\n", encoding="utf-8")
    result = failed(run(env, "plugins", "install", str(src), "--no-input"))
    assert str(src / "plugin.yaml") in result.stderr
    assert "field 'version'" in result.stderr
    assert "nothing was installed" in result.stderr
    assert not (home / "plugins").exists() or list((home / "plugins").iterdir()) == []

    (src / "plugin.yaml").write_text("name: weather\nrequires_env: {HK: 1}\n", encoding="utf-8")
    assert "field 'requires_env'" in failed(run(env, "plugins", "install", str(src))).stderr


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda src: (src / "plugin.yaml").unlink(), "has no plugin.yaml"),
        (lambda src: (src / "__init__.py").unlink(), "has no __init__.py"),
        (lambda src: (src / "__init__.py").write_text("def register(ctx)\n"), "SyntaxError"),
    ],
    ids=["no-manifest", "no-init", "syntax-error"],
)
def test_install_refuses_what_is_not_a_plugin(home, env, tmp_path, setup, message):
    src = make_source(tmp_path / "src")
    setup(src)
    result = failed(run(env, "plugins", "install", str(src), "--no-input"))
    assert message in result.stderr
    assert not (home / "plugins" / "weather").exists()


def test_install_source_errors(home, env, tmp_path):
    result = failed(run(env, "plugins", "install", str(tmp_path / "missing-dir")))
    assert "is not a directory, a git URL or a pip requirement" in result.stderr
    result = failed(run(env, "plugins", "install", "some-package"))
    assert "pip:some-package" in result.stderr  # a bare name never goes to an index by itself
    result = failed(run(env, "plugins", "install", "pip:"))
    assert "requirement after 'pip:'" in result.stderr
    src = make_source(tmp_path / "src", name="Bad Name")
    result = failed(run(env, "plugins", "install", str(src), "--no-input"))
    assert "--name" in result.stderr
    result = failed(run(env, "plugins", "install", str(src), "--pip-arg=--no-index"))
    assert "--pip-arg applies to pip sources only" in result.stderr


# --------------------------------------------------------------------------- plugins install: prompts


def test_install_asks_for_missing_env_and_saves_them(home, env, tmp_path):
    src = make_source(
        tmp_path / "src",
        requires_env=[
            {"name": "HK_PLAIN", "description": "the plain one", "url": "https://example.invalid/plain"},
            {"name": "HK_SECRET", "secret": True, "prompt": "Secret token"},
            "HK_SKIPPED",
            "HK_FROM_ENV",
            "HK_FROM_DOTENV",
        ],
    )
    (home / ".env").write_text(
        "# my settings\nHK_PLAIN=\nOTHER='kept value'\nexport HK_FROM_DOTENV=yes\n", encoding="utf-8"
    )
    os.chmod(home / ".env", 0o644)
    tricky = 'it\'s a \\ "quoted" $value # not a comment'
    result = ok(run(env, "plugins", "install", str(src), stdin=f"plain-value\n{tricky}\n\n", HK_FROM_ENV="x"))
    out = result.stdout
    assert "HK_PLAIN: the plain one <https://example.invalid/plain>" in out
    assert "Secret token:" in out
    assert "HK_SKIPPED:" in out
    assert "HK_FROM_ENV:" not in out and "HK_FROM_DOTENV:" not in out
    assert f"saved HK_PLAIN, HK_SECRET to {home / '.env'}" in out
    assert "still missing: HK_SKIPPED" in out

    env_file = home / ".env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    text = env_file.read_text(encoding="utf-8")
    assert text.startswith("# my settings\n")
    assert text.count("HK_PLAIN=") == 1
    assert "export HK_FROM_DOTENV=yes\n" in text
    values = dotenv_values(env_file)
    assert values["HK_PLAIN"] == "plain-value"
    assert values["HK_SECRET"] == tricky
    assert values["OTHER"] == "kept value"
    assert "HK_SKIPPED" not in values

    info = json.loads(ok(run(env, "plugins", "info", "weather", "--json")).stdout)
    where = {v["name"]: v["where"] for v in info["manifest"]["requires_env"]}
    assert where == {
        "HK_PLAIN": ".env",
        "HK_SECRET": ".env",
        "HK_SKIPPED": None,
        "HK_FROM_ENV": None,
        "HK_FROM_DOTENV": ".env",
    }
    assert info["enabled"] is False and "HK_SKIPPED" in info["error"]


def test_install_creates_env_with_mode_0600(home, env, tmp_path):
    src = make_source(tmp_path / "src", requires_env=["HK_ONLY"])
    ok(run(env, "plugins", "install", str(src), stdin="v\n"))
    assert stat.S_IMODE((home / ".env").stat().st_mode) == 0o600
    assert dotenv_values(home / ".env") == {"HK_ONLY": "v"}
    assert listing(env)["weather"]["enabled"] is True


def test_no_input_asks_nothing(home, env, tmp_path):
    src = make_source(tmp_path / "src", requires_env=["HK_ONLY"])
    result = ok(run(env, "plugins", "install", str(src), "--no-input", stdin="should-not-be-read\n"))
    assert "HK_ONLY:" not in result.stdout
    assert "still missing: HK_ONLY" in result.stdout
    assert not (home / ".env").exists()


def test_end_of_input_stops_the_questions(home, env, tmp_path):
    src = make_source(tmp_path / "src", requires_env=["HK_ONE", "HK_TWO"])
    result = ok(run(env, "plugins", "install", str(src), stdin="first\n"))
    assert dotenv_values(home / ".env") == {"HK_ONE": "first"}
    assert "still missing: HK_TWO" in result.stdout


def test_ctrl_c_at_a_prompt_aborts_cleanly(home, env, tmp_path):
    src = make_source(tmp_path / "src", requires_env=["HK_ONE", "HK_TWO"])
    proc = subprocess.Popen(
        [*CLI, "plugins", "install", str(src)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    try:
        seen = bytearray()
        read_until(proc.stdout.fileno(), "HK_ONE: ", seen)
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        read_until(proc.stdout.fileno(), "HK_TWO: ", seen)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert "aborted: nothing was installed and nothing saved" in err.decode()
    assert "Traceback" not in err.decode()
    assert not (home / ".env").exists()
    assert not (home / "plugins").exists() or list((home / "plugins").iterdir()) == []


def test_secret_answers_are_hidden_on_a_terminal(home, env, tmp_path):
    src = make_source(tmp_path / "src", requires_env=["HK_SHOWN", {"name": "HK_HIDDEN", "secret": True}])
    code, screen = run_in_pty(
        env,
        ["plugins", "install", str(src)],
        [("HK_SHOWN: ", "visible-answer"), ("HK_HIDDEN (hidden): ", "hidden-answer")],
    )
    assert code == 0, screen
    assert "visible-answer" in screen  # echoed by the terminal
    assert "hidden-answer" not in screen  # getpass turned the echo off
    assert dotenv_values(home / ".env") == {"HK_SHOWN": "visible-answer", "HK_HIDDEN": "hidden-answer"}


# --------------------------------------------------------------------------- plugins install: what it says


def tools_by_plugin(env: dict[str, str], **extra: str) -> dict[str, str]:
    """Each registered tool's plugin, as ``tools list --json`` shows them."""
    rows = json.loads(ok(run(env, "tools", "list", "--json", **extra)).stdout)
    return {r["function"]["name"]: r["plugin"] for r in rows}


@pytest.mark.parametrize(
    ("config", "requires", "says", "enabled"),
    [
        ({}, [], "'weather' is enabled: it runs from the next start", True),
        (
            {"plugins": {"disabled": ["weather"]}},
            [],
            "'weather' is disabled: plugins.disabled in {home}/config.yaml lists it; "
            "turn it on with: hermes-kernel plugins enable weather",
            False,
        ),
        (
            {"plugins": {"enabled": ["something-else"]}},
            [],
            "'weather' does not run: {home}/config.yaml has a plugins.enabled list (only the plugins it "
            "names run) without it; add it with: hermes-kernel plugins enable weather",
            False,
        ),
        (
            {},
            ["HK_WEATHER_KEY"],
            "'weather' stays disabled until its variables are set: still missing: HK_WEATHER_KEY; add them "
            "to {home}/.env (or the environment) and it runs from the next start",
            False,
        ),
        (
            {"plugins": {"disabled": ["weather"]}},
            ["HK_WEATHER_KEY"],
            "'weather' is disabled: plugins.disabled in {home}/config.yaml lists it; turn it on with: "
            "hermes-kernel plugins enable weather; it also needs HK_WEATHER_KEY (not set; add them to "
            "{home}/.env)",
            False,
        ),
    ],
    ids=["enabled", "disabled-by-config", "not-in-allow-list", "missing-env", "disabled-and-missing-env"],
)
def test_install_says_one_true_thing_about_whether_the_plugin_runs(
    home, env, tmp_path, config, requires, says, enabled
):
    if config:
        write_config(home, config)
    src = make_source(tmp_path / "src", requires_env=requires)
    result = ok(run(env, "plugins", "install", str(src), "--no-input"))
    assert says.format(home=home) in result.stdout
    lines = result.stdout.splitlines()
    # Exactly one sentence on whether it runs, and it agrees with what the kernel then does.
    assert len([line for line in lines if line.startswith("'weather' ")]) == 1
    assert ("is enabled" in result.stdout) is enabled
    assert "stays disabled" not in result.stdout or not enabled
    assert listing(env)["weather"]["enabled"] is enabled


def test_install_onto_an_existing_directory_names_the_command_to_use(home, env, tmp_path):
    write_plugin(home / "plugins", "weather", manifest={"name": "weather"})  # made by hand
    src = make_source(tmp_path / "src")
    result = failed(run(env, "plugins", "install", str(src), "--no-input"))
    dest = home / "plugins" / "weather"
    assert f"{dest} already exists (a plugin that 'plugins install' did not install)" in result.stderr
    assert f"to replace it with {src}: hermes-kernel plugins install {src} --force" in result.stderr
    assert "plugins update" not in result.stderr

    ok(run(env, "plugins", "install", str(src), "--no-input", "--force"))
    result = failed(run(env, "plugins", "install", str(src), "--no-input", "--name", "weather"))
    assert f"'weather' is already installed at {dest} (from {src.resolve()})" in result.stderr
    assert "to fetch its newest version: hermes-kernel plugins update weather" in result.stderr
    assert f"hermes-kernel plugins install {src} --name weather --force" in result.stderr


def test_install_warns_about_tools_another_user_plugin_keeps(home, env, tmp_path):
    first = tool_plugin(tmp_path / "first", "a-calc", "calculate")
    second = tool_plugin(tmp_path / "second", "b-calc", "calculate")
    ok(run(env, "plugins", "install", str(first), "--no-input"))
    result = ok(run(env, "plugins", "install", str(second), "--no-input"))
    assert (
        "warning: installed 'b-calc'; its tool calculate is provided by the user plugin 'a-calc', which "
        "keeps it: the kernel refused the installed plugin's (to let 'b-calc' have it: hermes-kernel plugins "
        "disable a-calc)"
    ) in result.stderr
    assert "'b-calc' is enabled" in result.stdout  # the rest of it runs
    assert tools_by_plugin(env)["calculate"] == "a-calc"  # what the warning said


SEED_CALCULATOR = """
import json

SCHEMA = {"description": "Evaluate.", "parameters": {"type": "object", "properties": {}}}

def register(ctx):
    ctx.register_tool("calculate", "calc", SCHEMA, lambda args, **kw: json.dumps({"by": "seed"}))
    ctx.register_tool("unit_convert", "calc", SCHEMA, lambda args, **kw: json.dumps({"by": "seed"}))
"""


@pytest.mark.parametrize("how", ["directory", "pip"])
def test_install_says_it_takes_the_bundled_calculators_tools_over(home, tmp_path, how):
    """The seed's calculator, installed beside the real bundled one: the install says, on stderr and
    with exit status 0, which tools the bundled plugin also provides and who has them from now on."""
    from conftest import REPO

    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(REPO / "extensions"))
    extra: dict[str, str] = {}
    if how == "directory":
        src = write_plugin(
            tmp_path / "src",
            "calculator-seed",
            SEED_CALCULATOR,
            {"name": "calculator-seed", "provides_tools": ["calculate", "unit_convert"]},
        )
        result = ok(run(env, "plugins", "install", str(src), "--no-input"))
    else:
        project = tmp_path / "project"
        (project / "calculator_seed").mkdir(parents=True)
        (project / "calculator_seed" / "__init__.py").write_text(SEED_CALCULATOR, encoding="utf-8")
        (project / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
            '[project]\nname = "calculator-seed"\nversion = "1.0"\n\n'
            '[project.entry-points."hermes_agent.plugins"]\ncalculator-seed = "calculator_seed"\n',
            encoding="utf-8",
        )
        target = tmp_path / "site"
        result = ok(
            run(env, "plugins", "install", str(project), f"--pip-arg=--target={target}", *PIP_OFFLINE)
        )
        extra = {"PYTHONPATH": str(target)}
    assert (
        "warning: installed 'calculator-seed'; its tools calculate, unit_convert are provided by the bundled "
        "plugin 'calculator' too; the installed plugin takes them over from the next start"
    ) in result.stderr
    owners = tools_by_plugin(env, **extra)
    assert owners["calculate"] == owners["unit_convert"] == "calculator-seed"


def test_install_of_a_plugin_that_fails_to_load_warns_on_stderr(home, env, tmp_path):
    src = write_plugin(
        tmp_path / "src",
        "broken",
        "def register(ctx):\n    raise RuntimeError('no luck')\n",
        {"name": "broken"},
    )
    result = ok(run(env, "plugins", "install", str(src), "--no-input"))
    assert "installed plugin 'broken'" in result.stdout
    assert "warning: 'broken' fails to load:" in result.stderr and "no luck" in result.stderr
    assert "is enabled" not in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["plugins", "install", "--help"],
        ["plugins", "update", "--help"],
        ["plugins", "remove", "--help"],
        ["plugins", "info", "--help"],
        ["plugins", "enable", "--help"],
        ["plugins", "disable", "--help"],
    ],
)
def test_plugin_management_help_is_plain_text(env, argv):
    text = ok(run(env, *argv)).stdout
    assert "`" not in text, text


# --------------------------------------------------------------------------- plugins install: git


def test_install_from_a_local_git_repository(home, env, tmp_path):
    repo = make_repo(tmp_path / "repo", repo_files("gitty", "1.0.0", "git_tool"))
    (repo / "uncommitted.txt").write_text("not in any commit\n", encoding="utf-8")
    git("checkout", "-q", "-b", "next", cwd=repo)
    (repo / "plugin.yaml").write_text(yaml.safe_dump({"name": "gitty", "version": "2.0.0"}), encoding="utf-8")
    git("commit", "-q", "-am", "next", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)

    result = ok(run(env, "plugins", "install", repo.as_uri(), "--no-input"))
    dest = home / "plugins" / "gitty"
    assert f"into {dest}" in result.stdout
    assert sorted(p.name for p in dest.iterdir()) == ["__init__.py", "plugin.yaml"]  # a clone: no .git
    entry = listing(env)["gitty"]
    assert entry["version"] == "1.0.0" and entry["tools"] == ["git_tool"]

    ok(run(env, "plugins", "install", f"git+{repo.as_uri()}", "--ref", "next", "--force", "--no-input"))
    assert listing(env)["gitty"]["version"] == "2.0.0"


def test_install_from_a_bare_repository_path_with_a_subdirectory(home, env, tmp_path):
    work = make_repo(
        tmp_path / "source-work",
        {f"plugins/inner/{k}": v for k, v in repo_files("inner", "0.3.0", "inner_tool").items()}
        | {"README": "x\n"},
    )
    bare = tmp_path / "store.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    result = failed(run(env, "plugins", "install", str(bare), "--no-input"))
    assert "--subdir" in result.stderr  # the repository's root is not a plugin
    ok(run(env, "plugins", "install", str(bare), "--subdir", "plugins/inner", "--no-input"))
    assert listing(env)["inner"]["tools"] == ["inner_tool"]


def test_a_failing_clone_installs_nothing(home, env, tmp_path):
    result = failed(run(env, "plugins", "install", (tmp_path / "no-such-repo").as_uri(), "--no-input"))
    assert "git clone" in result.stderr and "failed" in result.stderr
    assert not (home / "plugins").exists()


# --------------------------------------------------------------------------- plugins install: pip


def make_package(root: Path, dist: str, module: str, entry_point: str | None, manifest: str = "") -> Path:
    root.mkdir(parents=True)
    code = TOOL_PLUGIN.format(tool=f"{module}_tool", description="From a wheel.")
    write_pip_project(root, dist, code, version="0.4.2", module=module, entry_point=entry_point)
    if manifest:
        (root / module / "plugin.yaml").write_text(manifest, encoding="utf-8")
    return root


PIP_OFFLINE = ["--pip-arg=--no-index", "--pip-arg=--no-build-isolation", "--pip-arg=--no-deps"]


def test_install_a_pip_package_with_an_entry_point(home, env, tmp_path):
    project = make_package(
        tmp_path / "project",
        "hk-pip-plugin",
        "hk_pip_plugin",
        "pipplug",
        manifest="name: pipplug\nrequires_env:\n  - name: HK_PIP_TOKEN\n    description: the token\n",
    )
    target = tmp_path / "site"
    # A directory with pyproject.toml and no plugin.yaml is a pip source.
    result = ok(
        run(
            env,
            "plugins",
            "install",
            str(project),
            f"--pip-arg=--target={target}",
            *PIP_OFFLINE,
            stdin="tok\n",
        )
    )
    assert "installed package hk-pip-plugin 0.4.2: plugin(s) 'pipplug' (hk_pip_plugin)" in result.stdout
    assert f"installed into {target}" in result.stdout
    assert "running:" in result.stderr and "pip install" in result.stderr
    assert (target / "hk_pip_plugin" / "__init__.py").is_file()
    assert dotenv_values(home / ".env") == {"HK_PIP_TOKEN": "tok"}

    entry = listing(env, PYTHONPATH=str(target))["pipplug"]
    assert entry["source"] == "entrypoint" and entry["enabled"] is True
    assert entry["tools"] == ["hk_pip_plugin_tool"]

    # plugins install put the package there (recorded), so plugins remove uninstalls it.
    removed = ok(run(env, "plugins", "remove", "pipplug", "--yes", PYTHONPATH=str(target)))
    assert f"uninstalled package hk-pip-plugin 0.4.2 (plugin(s) 'pipplug') from {target}" in removed.stdout
    assert not (target / "hk_pip_plugin").exists() and list(target.iterdir()) == []


def test_a_pip_package_without_an_entry_point_is_reported(home, env, tmp_path):
    project = make_package(tmp_path / "project", "hk-not-a-plugin", "hk_not_a_plugin", None)
    target = tmp_path / "site"
    result = failed(
        run(env, "plugins", "install", f"pip:{project}", f"--pip-arg=--target={target}", *PIP_OFFLINE)
    )
    assert "declares no 'hermes_agent.plugins' entry point" in result.stderr
    assert "pip uninstall hk-not-a-plugin" in result.stderr


def test_a_failing_pip_install_is_an_error(home, env, tmp_path):
    result = failed(
        run(env, "plugins", "install", "pip:hk-no-such-distribution-anywhere", "--pip-arg=--no-index",
            f"--pip-arg=--target={tmp_path / 'site'}")
    )  # fmt: skip
    assert "pip install hk-no-such-distribution-anywhere failed" in result.stderr
    assert not (tmp_path / "site").exists() or list((tmp_path / "site").iterdir()) == []


# --------------------------------------------------------------------------- plugins remove


def test_remove_a_user_plugin(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    write_config(home, {"plugins": {"disabled": ["weather"]}})
    result = ok(run(env, "plugins", "remove", "weather", "--yes"))
    assert f"removed plugin 'weather' ({home / 'plugins' / 'weather'})" in result.stdout
    assert "still listed in plugins.disabled" in result.stdout
    assert not (home / "plugins" / "weather").exists()
    assert "weather" not in listing(env)


def test_remove_needs_yes_without_a_terminal(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    result = failed(run(env, "plugins", "remove", "weather", stdin="y\n"))
    assert "--yes" in result.stderr
    assert (home / "plugins" / "weather").is_dir()


def test_remove_asks_on_a_terminal(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    code, screen = run_in_pty(env, ["plugins", "remove", "weather"], [("[y/N] ", "n")])
    assert code == 1 and "cancelled; nothing removed" in screen
    assert (home / "plugins" / "weather").is_dir()
    code, screen = run_in_pty(env, ["plugins", "rm", "weather"], [("[y/N] ", "y")])
    assert code == 0, screen
    assert not (home / "plugins" / "weather").exists()


def test_remove_refuses_bundled_and_unknown_plugins(home, env, bundled):
    tool_plugin(bundled, "shipped", "shipped_tool")
    result = failed(run(env, "plugins", "remove", "shipped", "--yes"))
    assert "bundled" in result.stderr and "hermes-kernel plugins disable shipped" in result.stderr
    assert (bundled / "shipped").is_dir()
    result = failed(run(env, "plugins", "remove", "shiped", "--yes"))
    assert "no plugin named 'shiped'" in result.stderr and "shipped" in result.stderr


def test_removing_a_user_override_brings_back_the_bundled_plugin(home, env, bundled):
    tool_plugin(bundled, "shipped", "shipped_tool", {"name": "shipped", "version": "1.0"})
    tool_plugin(home / "plugins", "shipped", "shipped_tool", {"name": "shipped", "version": "9.0"})
    assert listing(env)["shipped"]["version"] == "9.0"
    result = ok(run(env, "plugins", "remove", "shipped", "--yes"))
    assert "the bundled plugin 'shipped'" in result.stdout and "is used again" in result.stdout
    assert listing(env)["shipped"]["version"] == "1.0"


def test_remove_a_symlinked_plugin_deletes_the_link_only(home, env, tmp_path):
    real = tool_plugin(tmp_path / "elsewhere", "linked", "linked_tool")
    (home / "plugins").mkdir()
    (home / "plugins" / "linked").symlink_to(real, target_is_directory=True)
    assert "linked" in listing(env)
    ok(run(env, "plugins", "remove", "linked", "-y"))
    assert not (home / "plugins" / "linked").exists()
    assert (real / "__init__.py").is_file()


# --------------------------------------------------------------------------- hooks list


def test_hooks_list_in_call_order_with_disabled_callbacks(home, env):
    plugins = home / "plugins"
    write_plugin(
        plugins,
        "beta",
        """
        def register(ctx):
            ctx.register_hook("on_session_start", lambda **kw: None)
            ctx.register_hook("hk_custom_event", lambda **kw: None)
        """,
    )
    write_plugin(
        plugins, "alpha", "def register(ctx):\n    ctx.register_hook('on_session_start', lambda **kw: None)\n"
    )
    write_plugin(
        plugins,
        "zulu",
        """
        from kernel import hookimpl

        @hookimpl(tryfirst=True)
        def on_session_start(session_id):
            return None
        """,
    )
    write_plugin(
        plugins,
        "delta",
        """
        def offer(register):
            raise RuntimeError("boom in the slot hook")

        def register(ctx):
            ctx.register_hook("register_memory_providers", offer)
        """,
    )
    rows = {r["hook"]: r for r in json.loads(ok(run(env, "hooks", "list", "--json")).stdout)}
    assert set(hookspecs.SLOT_HOOKS) | {"on_session_start", "pre_tool_call"} <= set(rows)
    start = rows["on_session_start"]["callbacks"]
    assert [(c["plugin"], c["order"]) for c in start] == [
        ("zulu", "tryfirst"),
        ("alpha", "normal"),
        ("beta", "normal"),
    ]
    assert start[0]["native"] is True and start[1]["native"] is False
    assert rows["hk_custom_event"]["known"] is False
    assert [c["plugin"] for c in rows["hk_custom_event"]["callbacks"]] == ["beta"]
    slot = rows["register_memory_providers"]["callbacks"]
    assert [c["plugin"] for c in slot] == ["delta"]
    assert slot[0]["disabled"] is True and "boom in the slot hook" in slot[0]["error"]
    assert rows["pre_tool_call"]["callbacks"] == []

    text = ok(run(env, "hooks", "list")).stdout
    lines = text.splitlines()
    start_line = next(line for line in lines if line.startswith("on_session_start "))
    assert start_line.split(None, 1)[1] == "zulu (tryfirst), alpha, beta"
    assert any(line.startswith("hk_custom_event ") and "[not a kernel hook]" in line for line in lines)
    assert any("delta (DISABLED)" in line for line in lines)
    assert any("delta disabled:" in line and "boom in the slot hook" in line for line in lines)
    assert ok(run(env, "hooks")).stdout == text


# --------------------------------------------------------------------------- logs


LOG = """\
2026-01-01T00:00:01.000000Z [debug    ] plugin_found key=a
2026-01-01T00:00:02.000000Z [info     ] plugin_registered plugin=a
2026-01-01T00:00:03.000000Z [warning  ] plugin_missing_env plugin=b
2026-01-01T00:00:04.000000Z [error    ] hook_failed plugin=c
Traceback (most recent call last):
  ValueError: boom
2026-01-01T00:00:05.000000Z [debug    ] skip path=x
  a continuation of the debug record
2026-01-01T00:00:06.000000Z [critical ] disk_full
"""


def write_log(home: Path, text: str = LOG) -> Path:
    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_logs_prints_the_last_lines_from_a_level_up(home, env):
    write_log(home)
    assert ok(run(env, "logs")).stdout == LOG
    warning = ok(run(env, "logs", "--level", "warning")).stdout.splitlines()
    assert [line.split("] ")[1] if "] " in line else line for line in warning] == [
        "plugin_missing_env plugin=b",
        "hook_failed plugin=c",
        "Traceback (most recent call last):",
        "  ValueError: boom",
        "disk_full",
    ]
    # -n counts records: a traceback's lines go with the record above them.
    assert ok(run(env, "logs", "--level", "ERROR", "-n", "2")).stdout.splitlines() == [
        "2026-01-01T00:00:04.000000Z [error    ] hook_failed plugin=c",
        "Traceback (most recent call last):",
        "  ValueError: boom",
        "2026-01-01T00:00:06.000000Z [critical ] disk_full",
    ]
    assert ok(run(env, "logs", "-n", "1")).stdout == "2026-01-01T00:00:06.000000Z [critical ] disk_full\n"
    assert ok(run(env, "logs", "-n", "0")).stdout == ""
    records = [
        json.loads(line) for line in ok(run(env, "logs", "--json", "--level", "warn")).stdout.splitlines()
    ]
    assert [(r["level"], r["event"]) for r in records] == [
        ("warning", "plugin_missing_env"),
        ("error", "hook_failed"),
        ("critical", "disk_full"),
    ]
    assert records[1]["text"].splitlines()[1:] == ["Traceback (most recent call last):", "  ValueError: boom"]


def test_logs_argument_errors(home, env):
    write_log(home)
    result = failed(run(env, "logs", "--level", "loud"), code=2)
    assert "unknown level 'loud'" in result.stderr
    result = failed(run(env, "logs", "-n", "-3"), code=2)
    assert "cannot be negative" in result.stderr


def test_logs_without_a_log_file(home, env):
    result = ok(run(env, "logs"))
    assert "No log yet" in result.stdout and str(home / "logs" / "agent.log") in result.stdout


def test_logs_shows_what_the_kernel_logged(home, env):
    write_plugin(home / "plugins", "broken", "import hk_module_that_does_not_exist\n")
    listing(env)
    text = ok(run(env, "logs", "--level", "warning")).stdout
    assert "[warning  ] plugin_load_failed" in text and "hk_module_that_does_not_exist" in text
    assert ok(run(env, "logs", "--level", "error")).stdout == ""


def test_logs_follow_prints_new_lines_until_ctrl_c(home, env):
    path = write_log(home, "2026-01-01T00:00:00.000000Z [warning  ] first_record\n")
    proc = subprocess.Popen(
        [*CLI, "logs", "-f", "-n", "1", "--level", "warning"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    try:
        seen = bytearray()
        read_until(proc.stdout.fileno(), "first_record", seen)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("2026-01-01T00:00:01.000000Z [info     ] quiet_record\n")
            handle.write("2026-01-01T00:00:02.000000Z [error    ] loud_record\n")
        read_until(proc.stdout.fileno(), "loud_record", seen)
        # Log rotation: a new file in its place is read from its start.
        replacement = path.with_name("agent.log.new")
        replacement.write_text("2026-01-01T00:00:03.000000Z [critical ] after_rotation\n", encoding="utf-8")
        os.replace(replacement, path)
        read_until(proc.stdout.fileno(), "after_rotation", seen)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shown = seen.decode() + out.decode()
    assert proc.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert "quiet_record" not in shown
    assert shown.index("first_record") < shown.index("loud_record") < shown.index("after_rotation")


# --------------------------------------------------------------------------- doctor


def test_doctor_all_well(home, env):
    tool_plugin(home / "plugins", "weather", "forecast")
    write_config(home, {"model": {"provider": "anything"}})
    result = failed(run(env, "doctor"))
    # No model provider plugins in the empty bundled dir: the configured name is a problem.
    assert (
        "[error] provider model_provider: model.provider: no model provider named 'anything'" in result.stdout
    )
    write_config(home, {})
    result = ok(run(env, "doctor"))
    assert "All is well: 1 plugin(s) enabled, 1 tool(s)" in result.stdout
    data = json.loads(ok(run(env, "doctor", "--json")).stdout)
    assert data["ok"] is True and data["errors"] == 0
    assert [f["level"] for f in data["findings"]] == ["info"]  # no model provider configured


DOCTOR_PLUGINS = {
    "weather": (
        "def register(ctx):\n    pass\n",
        {
            "name": "weather",
            "requires_env": [{"name": "HK_DOC_WEATHER_KEY", "description": "the weather key"}],
        },
    ),
    "broken": ("import hk_module_that_does_not_exist\n", None),
    "resting": ("def register(ctx):\n    pass\n", None),
    "slotfail": (
        "def offer(register):\n    raise RuntimeError('slot boom')\n\n"
        "def register(ctx):\n    ctx.register_hook('register_memory_providers', offer)\n",
        None,
    ),
    "needy": (
        "import json\n\ndef register(ctx):\n"
        "    ctx.register_tool('needy_tool', 'x', {'description': 'd'}, lambda a, **k: json.dumps({}),\n"
        "                      requires_env=['HK_DOC_TOOL_VAR'])\n",
        {"name": "needy", "provides_tools": ["needy_tool"]},
    ),
    "painter": (
        "from kernel.providers import ImageGenProvider\n\n"
        "class Painter(ImageGenProvider):\n"
        "    name = 'painter'\n"
        "    def is_available(self):\n        return False\n"
        "    def unavailable_reason(self):\n        return 'no HK_DOC_PAINT_KEY'\n"
        "    def generate(self, prompt, aspect_ratio='landscape', **kw):\n        return {}\n\n"
        "def register(ctx):\n    ctx.register_image_gen_provider(Painter())\n",
        None,
    ),
}


def test_doctor_reports_each_problem_with_its_fix(home, env):
    for name, (code, manifest) in DOCTOR_PLUGINS.items():
        write_plugin(home / "plugins", name, code, manifest)
    write_config(
        home,
        {
            "plugins": {"disabled": ["resting"], "hook_timeout": -1},
            "memory": {"provider": "no-such-memory"},
            "image_gen": {"provider": "painter"},
        },
    )
    result = failed(run(env, "doctor", "--json"))
    data = json.loads(result.stdout)
    assert data["ok"] is False
    findings = data["findings"]

    def find(area: str, text: str) -> dict[str, str]:
        matches = [f for f in findings if f["area"] == area and text in f["subject"] + " " + f["problem"]]
        assert matches, f"no {area} finding with {text!r} in {json.dumps(findings, indent=2)}"
        return matches[0]

    hook_timeout = find("config", "hook_timeout")
    assert hook_timeout["level"] == "error" and str(home / "config.yaml") in hook_timeout["fix"]
    weather = find("plugin", "HK_DOC_WEATHER_KEY")
    assert weather["level"] == "error" and "the weather key" in weather["problem"]
    assert weather["fix"].startswith(f"set HK_DOC_WEATHER_KEY in {home / '.env'}")
    broken = find("plugin", "hk_module_that_does_not_exist")
    assert broken["level"] == "error" and "hermes-kernel plugins disable broken" in broken["fix"]
    resting = find("plugin", "'resting'")
    assert resting["level"] == "info" and resting["fix"] == "hermes-kernel plugins enable resting"
    slot = find("hook", "slot boom")
    assert slot["level"] == "error" and slot["subject"] == "register_memory_providers of 'slotfail'"
    tool = find("tool", "needy_tool")
    assert tool["level"] == "warning" and "HK_DOC_TOOL_VAR" in tool["fix"]
    memory = find("provider", "no-such-memory")
    assert memory["level"] == "error" and "providers list" in memory["fix"]
    painter = find("provider", "no HK_DOC_PAINT_KEY")
    assert painter["level"] == "error" and painter["subject"] == "image_gen 'painter'"
    assert data["errors"] == sum(1 for f in findings if f["level"] == "error")

    text = failed(run(env, "doctor")).stdout
    assert "[error] plugin 'weather': disabled: requires HK_DOC_WEATHER_KEY" in text
    assert f"fix: set HK_DOC_WEATHER_KEY in {home / '.env'}" in text
    assert "[info]  plugin 'resting': disabled via config" in text
    assert f"{data['errors']} problem(s)" in text

    # Fixing the weather key removes that problem.
    (home / ".env").write_text("HK_DOC_WEATHER_KEY=k\n", encoding="utf-8")
    after = json.loads(failed(run(env, "doctor", "--json")).stdout)
    assert not [f for f in after["findings"] if "HK_DOC_WEATHER_KEY" in f["problem"]]
    assert after["errors"] == data["errors"] - 1
