"""Plugin settings: ``ctx.get_config`` / ``ctx.set_config`` on ``plugins.entries.<id>.settings``.

Every plugin is a real directory plugin loaded by ``Kernel.load()``. The settings calls happen inside the
plugin: in ``register(ctx)`` and in a tool handler the tests dispatch through ``k.tools.dispatch``.
``config.yaml`` is a real file, re-read with ``yaml.safe_load``; the concurrency test runs real
subprocesses and threads against one home.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import cli_env, run_json

from kernel import Kernel

# The plugin: register() reads (and optionally writes) settings, and the tool ``<tool>`` runs one
# settings operation per call so that the tests drive get_config / set_config from a handler.
PLUGIN_CODE = """\
import json

SEEN = {}
CTX = []


def handler(args, **kw):
    ctx = CTX[0]
    op = args["op"]
    try:
        if op == "get":
            if "default" in args:
                return json.dumps({"value": ctx.get_config(args["key"], args["default"])})
            return json.dumps({"value": ctx.get_config(args["key"])})
        if op == "set":
            value = object() if args.get("unstorable") else args.get("value")
            if args.get("nested_unstorable"):
                value = {"fine": 1, "bad": object()}
            ctx.set_config(args["key"], value)
            return json.dumps({"ok": True})
        if op == "set_many":
            for i in range(args["count"]):
                ctx.set_config(f"{args['prefix']}{i}", i)
            return json.dumps({"ok": True})
        if op == "mutate":
            value = ctx.get_config(args["key"])
            value["added"] = "by the plugin"
            value.pop(args["drop"], None)
            return json.dumps({"mutated": value, "again": ctx.get_config(args["key"])})
    except Exception as exc:
        return json.dumps({"error_type": type(exc).__name__, "error": str(exc)})
    return json.dumps({"error": "unknown op"})


def register(ctx):
    CTX.append(ctx)
    SEEN["plugin_id"] = ctx.plugin_id
    SEEN["greeting"] = ctx.get_config("greeting", "no greeting")
    SEEN["nested"] = ctx.get_config("nested.level")
{extra}
    schema = {"name": "{tool}", "description": "settings ops",
              "parameters": {"type": "object", "properties": {}}}
    ctx.register_tool("{tool}", "settings", schema, handler)
"""


def settings_plugin(plugin_dir: Any, dirname: str, tool: str = "cfg", extra: str = "") -> Path:
    body = textwrap.indent(textwrap.dedent(extra).strip("\n"), "    ") if extra else ""
    code = PLUGIN_CODE.replace("{extra}", body).replace("{tool}", tool)
    return plugin_dir(dirname, code)


def plugin_module(k: Kernel, slug: str) -> Any:
    return sys.modules[f"{k._namespace}.{slug}"]


def call(k: Kernel, tool: str = "cfg", **args: Any) -> dict[str, Any]:
    return run_json(k.tools.dispatch(tool, args))


def write_config(home: Path, data: Any) -> Path:
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def read_config(home: Path) -> Any:
    return yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))


def entries(**plugins: dict[str, Any]) -> dict[str, Any]:
    return {"plugins": {"entries": {name: {"settings": s} for name, s in plugins.items()}}}


# --------------------------------------------------------------------------- reading


def test_register_and_handlers_read_settings_from_config_yaml(plugin_dir, make_kernel, home):
    write_config(home, entries(demo={"greeting": "hello", "nested": {"level": 3, "name": "x"}}))
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert k.plugin("demo").enabled, k.plugin("demo")
    seen = plugin_module(k, "demo").SEEN
    assert seen == {"plugin_id": "demo", "greeting": "hello", "nested": 3}
    assert call(k, op="get", key="greeting") == {"value": "hello"}
    assert call(k, op="get", key="nested.level") == {"value": 3}
    assert call(k, op="get", key="nested") == {"value": {"level": 3, "name": "x"}}


def test_settings_come_from_the_kernel_config_argument_too(plugin_dir, make_kernel, home):
    write_config(home, entries(demo={"greeting": "from the file", "nested": {"level": 1}}))
    settings_plugin(plugin_dir, "demo")
    k = make_kernel(config=entries(demo={"greeting": "from the argument"}))
    assert plugin_module(k, "demo").SEEN["greeting"] == "from the argument"
    assert call(k, op="get", key="nested.level") == {"value": 1}  # deep-merged with the file


def test_settings_from_the_config_argument_without_a_file(plugin_dir, make_kernel, home):
    settings_plugin(plugin_dir, "demo")
    k = make_kernel(config=entries(demo={"greeting": "only here"}))
    assert plugin_module(k, "demo").SEEN["greeting"] == "only here"
    assert not (home / "config.yaml").exists()


def test_the_default_when_a_setting_is_missing(plugin_dir, make_kernel, home):
    write_config(home, entries(demo={"scalar": "text", "empty": None}))
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert plugin_module(k, "demo").SEEN["greeting"] == "no greeting"
    assert plugin_module(k, "demo").SEEN["nested"] is None
    assert call(k, op="get", key="absent", default=7) == {"value": 7}
    assert call(k, op="get", key="absent") == {"value": None}
    assert call(k, op="get", key="scalar.below", default="d") == {"value": "d"}
    assert call(k, op="get", key="deep.er.still", default=[1]) == {"value": [1]}
    # A key that is present with a null value is present.
    assert call(k, op="get", key="empty", default="d") == {"value": None}


def test_no_plugins_section_at_all_gives_defaults(plugin_dir, make_kernel, home):
    write_config(home, {"model": "x", "plugins": {"entries": "not a mapping"}})
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="get", key="greeting", default="d") == {"value": "d"}


def test_legacy_config_section_is_read_as_a_fallback(plugin_dir, make_kernel, home):
    write_config(
        home,
        {
            "plugins": {
                "entries": {
                    "demo": {
                        "settings": {"both": "new"},
                        "config": {"both": "old", "legacy": "still read", "deep": {"k": 1}},
                    }
                }
            }
        },
    )
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="get", key="legacy") == {"value": "still read"}
    assert call(k, op="get", key="deep.k") == {"value": 1}
    assert call(k, op="get", key="both") == {"value": "new"}


def test_a_plugin_does_not_read_another_plugins_settings(plugin_dir, make_kernel, home):
    write_config(home, entries(other={"greeting": "not yours"}))
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert plugin_module(k, "demo").SEEN["greeting"] == "no greeting"


def test_get_config_returns_a_copy(plugin_dir, make_kernel, home):
    write_config(home, entries(demo={"table": {"a": 1, "b": 2}}))
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    result = call(k, op="mutate", key="table", drop="a")
    assert result["mutated"] == {"b": 2, "added": "by the plugin"}
    assert result["again"] == {"a": 1, "b": 2}
    assert k.config["plugins"]["entries"]["demo"]["settings"]["table"] == {"a": 1, "b": 2}
    assert read_config(home) == entries(demo={"table": {"a": 1, "b": 2}})


# --------------------------------------------------------------------------- writing


def test_set_config_keeps_the_rest_of_the_file(plugin_dir, make_kernel, home):
    original = {
        "model": {"default": "some-model", "provider": "somewhere"},
        "custom_list": [1, 2, 3],
        "plugins": {
            "disabled": ["nothing-real"],
            "entries": {
                "other": {"settings": {"keep": "me", "deep": {"x": 1}}},
                "demo": {"enabled": True, "settings": {"existing": "value"}},
            },
        },
    }
    write_config(home, original)
    settings_plugin(plugin_dir, "demo")
    settings_plugin(plugin_dir, "other", tool="cfg_other")
    k = make_kernel()
    assert call(k, op="set", key="color", value="blue") == {"ok": True}
    expected = json.loads(json.dumps(original))
    expected["plugins"]["entries"]["demo"]["settings"]["color"] = "blue"
    assert read_config(home) == expected
    assert call(k, op="get", key="color") == {"value": "blue"}
    # The other plugin still sees its own settings, unchanged.
    assert call(k, "cfg_other", op="get", key="deep.x") == {"value": 1}


def test_set_config_in_register_writes_the_file_and_is_visible_at_once(plugin_dir, make_kernel, home):
    write_config(home, {"model": "m"})
    settings_plugin(
        plugin_dir,
        "demo",
        extra="""
        ctx.set_config("first_run", True)
        SEEN["first_run"] = ctx.get_config("first_run")
        """,
    )
    k = make_kernel()
    assert k.plugin("demo").enabled, k.plugin("demo")
    assert plugin_module(k, "demo").SEEN["first_run"] is True
    assert read_config(home) == {"model": "m", **entries(demo={"first_run": True})}


def test_nested_dotted_keys_create_mappings(plugin_dir, make_kernel, home):
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="set", key="a.b.c", value=1) == {"ok": True}
    assert call(k, op="set", key="a.b.d", value=[1, "two"]) == {"ok": True}
    assert call(k, op="set", key="a.e", value={"f": None}) == {"ok": True}
    assert read_config(home) == entries(demo={"a": {"b": {"c": 1, "d": [1, "two"]}, "e": {"f": None}}})
    assert call(k, op="get", key="a.b") == {"value": {"c": 1, "d": [1, "two"]}}
    assert call(k, op="get", key="a.e.f", default="d") == {"value": None}


def test_overwriting_a_value_and_a_key_that_looks_global_stays_inside(plugin_dir, make_kernel, home):
    write_config(home, {"model": "global", **entries(other={"x": 1})})
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="set", key="n", value=1) == {"ok": True}
    assert call(k, op="set", key="n", value=2) == {"ok": True}
    # Plain names that spell other config paths are relative to the plugin's own settings.
    assert call(k, op="set", key="model", value="mine") == {"ok": True}
    assert call(k, op="set", key="plugins.entries.other.x", value="hijack") == {"ok": True}
    data = read_config(home)
    assert data["model"] == "global"
    assert data["plugins"]["entries"]["other"] == {"settings": {"x": 1}}
    assert data["plugins"]["entries"]["demo"]["settings"] == {
        "n": 2,
        "model": "mine",
        "plugins": {"entries": {"other": {"x": "hijack"}}},
    }


def test_a_category_plugin_id_works(plugin_dir, make_kernel, home):
    write_config(home, entries(**{"image_gen/foo": {"greeting": "painted"}}))
    settings_plugin(plugin_dir, "image_gen/foo", tool="cfg_foo")
    k = make_kernel()
    seen = plugin_module(k, "image_gen__foo").SEEN
    assert seen["plugin_id"] == "image_gen/foo" and seen["greeting"] == "painted"
    assert call(k, "cfg_foo", op="set", key="quality.level", value="high") == {"ok": True}
    assert read_config(home) == entries(
        **{"image_gen/foo": {"greeting": "painted", "quality": {"level": "high"}}}
    )
    assert call(k, "cfg_foo", op="get", key="quality.level") == {"value": "high"}


# --------------------------------------------------------------------------- refusals

BAD_KEYS = ["", "a..b", ".a", "a.", "../x", "a/b", "x y", "a.b/c", "a\nb", 5, None, ["a"]]


@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_bad_keys_are_refused_by_set_config(plugin_dir, make_kernel, home, key):
    path = write_config(home, {"model": "m", **entries(demo={"keep": 1})})
    before = path.read_bytes()
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    result = call(k, op="set", key=key, value="v")
    assert result["error_type"] == "ValueError", result
    assert "demo" in result["error"]
    assert path.read_bytes() == before
    assert call(k, op="get", key="keep") == {"value": 1}


@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_bad_keys_are_refused_by_get_config(plugin_dir, make_kernel, home, key):
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    result = call(k, op="get", key=key, default="d")
    assert result["error_type"] == "ValueError", result


def test_bad_keys_in_register_fail_the_plugin_with_the_reason(plugin_dir, make_kernel, home):
    settings_plugin(plugin_dir, "demo", extra='ctx.set_config("../escape", 1)')
    k = make_kernel()
    info = k.plugin("demo")
    assert not info.enabled
    assert info.error is not None and info.error.startswith("register() failed: ValueError")
    assert "'../escape'" in info.error
    assert not (home / "config.yaml").exists()


@pytest.mark.parametrize("flag", ["unstorable", "nested_unstorable"])
def test_a_value_yaml_cannot_store_is_refused_and_the_file_unchanged(plugin_dir, make_kernel, home, flag):
    path = write_config(home, {"model": "m", **entries(demo={"keep": 1})})
    before = path.read_bytes()
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    result = call(k, op="set", key="thing", **{flag: True})
    assert result["error_type"] == "ValueError", result
    assert "thing" in result["error"]
    assert path.read_bytes() == before
    assert call(k, op="get", key="thing", default="absent") == {"value": "absent"}


@pytest.mark.parametrize(
    "text",
    [
        "model: [unclosed\nplugins: {\n",
        "- a list\n- at the top\n",
        "plugins:\n  entries:\n    demo:\n      settings: just a string\n",
        "plugins:\n  entries:\n    demo: [1, 2]\n",
    ],
    ids=["invalid-yaml", "top-level-list", "settings-not-a-mapping", "entry-not-a-mapping"],
)
def test_a_config_that_cannot_take_the_setting_is_left_untouched(plugin_dir, make_kernel, home, text):
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert k.plugin("demo").enabled, k.plugin("demo")
    result = call(k, op="set", key="x", value=1)
    assert result["error_type"] == "ValueError", result
    assert path.read_bytes() == before
    assert [p.name for p in home.iterdir() if "tmp" in p.name] == []


# --------------------------------------------------------------------------- the file itself


def leftovers(home: Path) -> list[str]:
    """Entries of the home besides the config, its lock, the plugins, the logs and the kernel's cache."""
    expected = {"config.yaml", "plugins", "logs", "cache"}
    return sorted(p.name for p in home.iterdir() if p.name not in expected and not p.name.endswith(".lock"))


def test_writes_leave_no_temporary_files(plugin_dir, make_kernel, home):
    write_config(home, {"model": "m"})
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="set_many", prefix="k", count=20) == {"ok": True}
    assert call(k, op="set", key="bad", unstorable=True)["error_type"] == "ValueError"
    assert call(k, op="set", key="a..b", value=1)["error_type"] == "ValueError"
    assert leftovers(home) == []
    assert read_config(home)["plugins"]["entries"]["demo"]["settings"] == {f"k{i}": i for i in range(20)}


def test_writing_creates_a_missing_config_file(plugin_dir, make_kernel, home):
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="set", key="x", value="y") == {"ok": True}
    assert read_config(home) == entries(demo={"x": "y"})
    assert leftovers(home) == []


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_the_file_mode_is_preserved(plugin_dir, make_kernel, home, mode):
    path = write_config(home, {"model": "m"})
    path.chmod(mode)
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    assert call(k, op="set", key="x", value=1) == {"ok": True}
    assert call(k, op="set", key="y", value=2) == {"ok": True}
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert read_config(home)["plugins"]["entries"]["demo"]["settings"] == {"x": 1, "y": 2}


def test_the_write_replaces_the_file_atomically(plugin_dir, make_kernel, home):
    # A reader holding the old file keeps reading the old content: the new one arrives by rename.
    path = write_config(home, {"model": "m"})
    settings_plugin(plugin_dir, "demo")
    k = make_kernel()
    with open(path, encoding="utf-8") as old:
        assert call(k, op="set", key="x", value=1) == {"ok": True}
        assert yaml.safe_load(old.read()) == {"model": "m"}
    assert read_config(home) == {"model": "m", **entries(demo={"x": 1})}


# --------------------------------------------------------------------------- concurrency

WRITER = """\
import json, os, sys, time
from pathlib import Path
from kernel import Kernel

home, tool, prefix = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
with Kernel(home=home) as k:
    k.load()
    (home / f"ready-{prefix}").write_text("ready")
    while not (home / "go").exists():
        time.sleep(0.01)
    for i in range(50):
        out = json.loads(k.tools.dispatch(tool, {"op": "set", "key": f"{prefix}.k{i}", "value": i}))
        assert out == {"ok": True}, out
"""


def test_concurrent_writers_lose_nothing(plugin_dir, home, bundled, tmp_path):
    for name in ("alpha", "beta", "gamma"):
        settings_plugin(plugin_dir, name, tool=f"cfg_{name}")
    write_config(home, {"model": "m"})
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), f"cfg_{name}", name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    k = Kernel(home=home)
    try:
        k.load()
        # Wait until both subprocesses have loaded their kernels (or died), then start everyone at once.
        while not all(
            (home / f"ready-{n}").exists() or p.poll() is not None
            for n, p in zip(("alpha", "beta"), procs, strict=True)
        ):
            time.sleep(0.01)
        errors: list[Any] = []

        def threaded(tool: str, prefix: str) -> None:
            for i in range(25):
                out = run_json(k.tools.dispatch(tool, {"op": "set", "key": f"{prefix}.k{i}", "value": i}))
                if out != {"ok": True}:
                    errors.append(out)

        threads = [threading.Thread(target=threaded, args=("cfg_gamma", f"t{n}")) for n in range(4)]
        threads.append(threading.Thread(target=threaded, args=("cfg_alpha", "inproc")))
        (home / "go").write_text("go")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outputs = [p.communicate() for p in procs]
        for proc, (out, err) in zip(procs, outputs, strict=True):
            assert proc.returncode == 0, f"writer failed:\n{out}\n{err}"
        assert errors == []
    finally:
        k.shutdown()

    data = read_config(home)
    assert data["model"] == "m"
    got = data["plugins"]["entries"]
    assert got["alpha"]["settings"]["alpha"] == {f"k{i}": i for i in range(50)}
    assert got["beta"]["settings"]["beta"] == {f"k{i}": i for i in range(50)}
    assert got["alpha"]["settings"]["inproc"] == {f"k{i}": i for i in range(25)}
    for n in range(4):
        assert got["gamma"]["settings"][f"t{n}"] == {f"k{i}": i for i in range(25)}
    assert set(got) == {"alpha", "beta", "gamma"}
    assert [p for p in leftovers(home) if not p.startswith("ready-") and p != "go"] == []
