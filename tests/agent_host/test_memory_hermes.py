"""Memory providers as Hermes Agent plugins expect them (issue 16), through real kernels.

A Hermes memory plugin may be a module that only defines its ``MemoryProvider`` subclass; the
provider base has optional methods (``on_turn_start``, ``queue_prefetch``, ``on_session_switch``,
``on_pre_compress``, ``on_delegation``, ``on_memory_write``, ``get_config_schema``, ``save_config``,
``backup_paths``) that providers reach through ``super()`` and the host calls at fixed moments.
Every plugin here is written to a temporary home and loaded by the real discovery; turns run on the
bundled ``scripted`` model of the checkout.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log, write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.providers import MemoryProvider, ProviderSelectionError
from kernel.testing import scripted_config, write_script

NO_REGISTER = "no register(ctx) function and no @hookimpl functions"

# Hermes style: no register(), no hookimpls; every optional method records its call and what
# super() answered, so that the defaults are seen to work.
RECORDING_MEMORY = """
from agent.memory_provider import MemoryProvider


class RecordingMemory(MemoryProvider):
    def __init__(self):
        self.calls = []
        self.defaults = {}

    @property
    def name(self):
        return "recording"

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.calls.append(("initialize", session_id))

    def get_tool_schemas(self):
        return [{"name": "recall_note", "description": "recall", "parameters": {"type": "object"}}]

    def handle_tool_call(self, tool_name, args, **kwargs):
        return '{"note": "recalled"}'

    def prefetch(self, query, *, session_id=""):
        self.calls.append(("prefetch", query, session_id))
        return ""

    def sync_turn(self, user_content, assistant_content, *, session_id="", **kwargs):
        self.calls.append(("sync_turn", user_content, session_id))

    def _note(self, method, default, *args, **kwargs):
        self.calls.append((method, *args, kwargs))
        self.defaults[method] = default
        return default

    def queue_prefetch(self, query, *, session_id=""):
        default = super().queue_prefetch(query, session_id=session_id)
        return self._note("queue_prefetch", default, query, session_id=session_id)

    def on_turn_start(self, turn_number, message, **kwargs):
        default = super().on_turn_start(turn_number, message, **kwargs)
        return self._note("on_turn_start", default, turn_number, message, **kwargs)

    def on_session_end(self, messages):
        default = super().on_session_end(messages)
        return self._note("on_session_end", default, len(messages))

    def on_session_switch(self, new_session_id, *, parent_session_id="", reset=False, **kwargs):
        default = super().on_session_switch(
            new_session_id, parent_session_id=parent_session_id, reset=reset, **kwargs
        )
        return self._note(
            "on_session_switch", default, new_session_id, parent_session_id=parent_session_id, reset=reset,
            **kwargs
        )

    def on_pre_compress(self, messages):
        default = super().on_pre_compress(messages)
        self._note("on_pre_compress", default, [m["role"] for m in messages])
        return "Keep in mind: the user's favourite colour is teal."

    def on_delegation(self, task, result, *, child_session_id="", **kwargs):
        default = super().on_delegation(task, result, child_session_id=child_session_id, **kwargs)
        return self._note("on_delegation", default, task, result, child_session_id=child_session_id, **kwargs)

    def on_memory_write(self, action, target, content, metadata=None):
        default = super().on_memory_write(action, target, content, metadata)
        return self._note("on_memory_write", default, action, target, content, metadata=metadata)

    def get_config_schema(self):
        self.defaults["get_config_schema"] = super().get_config_schema()
        return [
            {"key": "endpoint", "description": "where the memory lives", "default": "local"},
            {"key": "api_key", "description": "its key", "secret": True, "env_var": "RECORDING_KEY"},
        ]

    def save_config(self, values, hermes_home):
        self.defaults["save_config"] = super().save_config(values, hermes_home)
        self.calls.append(("save_config", values, hermes_home))

    def backup_paths(self):
        self.defaults["backup_paths"] = super().backup_paths()
        return list(self.paths)

    paths = ()
"""

# A context engine that compresses before every call after the first, taking memory_context.
MEMORY_AWARE_ENGINE = """
from agent.context_engine import ContextEngine


class MemoryAwareEngine(ContextEngine):
    name = "memory-aware"

    def __init__(self):
        super().__init__(100_000)
        self.armed = False
        self.contexts = []

    def should_compress(self, prompt_tokens=None):
        return self.armed

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, memory_context=""):
        self.contexts.append(memory_context)
        return [messages[0], {"role": "user", "content": "SUMMARY"}]

    def update_from_response(self, usage):
        self.armed = True
"""

# The same, but its compress() has the older signature without memory_context.
STRICT_ENGINE = (
    MEMORY_AWARE_ENGINE.replace("MemoryAwareEngine", "StrictEngine")
    .replace('"memory-aware"', '"strict"')
    .replace(', memory_context=""):', "):")
    .replace("self.contexts.append(memory_context)", "self.contexts.append(None)")
)

CALC = {"name": "calculate", "arguments": {"expression": "2**16"}}
ONE_TOOL_TURN = [{"text": "Computing.", "tool_calls": [CALC]}, "2**16 = 65536."]


@pytest.fixture(autouse=True)
def bundled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's bundled plugins: the scripted model and the calculator among them."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))


@pytest.fixture
def kernel(home: Path) -> Iterator[Callable[..., Kernel]]:
    """``kernel(script=None, **config)``: a loaded kernel in ``home`` (the scripted model when given)."""
    made: list[Kernel] = []

    def make(script: list[Any] | None = None, **config: Any) -> Kernel:
        if script is not None:
            config = {**scripted_config(write_script(home, script)), **config}
        k = Kernel(home=home, config=config)
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def memory_plugin(home: Path, code: str = RECORDING_MEMORY, name: str = "memory/recording") -> Path:
    """A Hermes memory plugin folder: ``__init__.py`` only, no plugin.yaml."""
    return write_plugin(home / "plugins", name, code, manifest="")


def names(calls: list[tuple[Any, ...]]) -> list[str]:
    return [c[0] for c in calls]


# --------------------------------------------------------------------------
# A module that only defines the provider class
# --------------------------------------------------------------------------


def test_a_module_defining_only_a_memory_provider_class_loads_as_the_provider(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home)
    k = kernel(memory={"provider": "recording"})
    info = k.plugin("memory/recording")
    assert info.enabled and info.error is None, info
    memory = k.providers.memory()
    assert type(memory).__name__ == "RecordingMemory" and isinstance(memory, MemoryProvider)
    assert k.slots.get("memory", "recording").plugin == "memory/recording"
    # Its tools are offered like those of any active provider, attributed to its plugin.
    assert info.tools == ["recall_note"]
    assert json.loads(k.tools.dispatch("recall_note", {})) == {"note": "recalled"}
    # Selected by its folder's name too, as Hermes users do.
    k2 = kernel(memory={"provider": "memory/recording"})
    assert k2.providers.memory().name == "recording"


def test_a_top_level_plugin_folder_with_only_a_provider_class_loads(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """Hermes also scans ``$HERMES_HOME/plugins/<name>/`` for memory providers."""
    memory_plugin(home, name="recording_memory")
    k = kernel(memory={"provider": "recording"})
    assert k.plugin("recording_memory").error is None
    assert type(k.providers.memory()).__name__ == "RecordingMemory"


def test_a_provider_class_from_the_plugins_own_submodule_counts(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    write_plugin(
        home / "plugins",
        "memory/split",
        "from .provider import SplitMemory\n",
        manifest="",
        files={"provider.py": RECORDING_MEMORY.replace("RecordingMemory", "SplitMemory")},
    )
    k = kernel(memory={"provider": "recording"})
    assert k.plugin("memory/split").error is None
    assert type(k.providers.memory()).__name__ == "SplitMemory"


def test_an_abstract_intermediate_class_is_not_instantiated(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    code = """
    from abc import abstractmethod
    from agent.memory_provider import MemoryProvider


    class Base(MemoryProvider):
        @abstractmethod
        def flavour(self): ...


    class Concrete(Base):
        name = "concrete"

        def flavour(self):
            return "vanilla"

        def is_available(self):
            return True

        def initialize(self, session_id, **kwargs):
            pass

        def get_tool_schemas(self):
            return []
    """
    memory_plugin(home, textwrap.dedent(code), name="memory/layered")
    k = kernel(memory={"provider": "concrete"})
    assert k.plugin("memory/layered").error is None
    assert k.providers.memory().flavour() == "vanilla"


def test_a_provider_class_only_imported_from_elsewhere_is_not_taken(
    home: Path, tmp_path: Path, kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class must be the plugin's own: importing someone else's provider is not defining one."""
    library = tmp_path / "lib"
    library.mkdir()
    (library / "foreign_memory_lib.py").write_text(RECORDING_MEMORY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    monkeypatch.delitem(sys.modules, "foreign_memory_lib", raising=False)
    memory_plugin(home, "from foreign_memory_lib import RecordingMemory\n", name="memory/borrower")
    k = kernel()
    error = k.plugin("memory/borrower").error or ""
    assert NO_REGISTER in error
    assert "recording" not in k.slots.providers("memory")


def test_a_module_with_neither_register_nor_a_provider_keeps_its_error(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home, "VALUE = 1\n", name="memory/empty")
    k = kernel()
    error = k.plugin("memory/empty").error or ""
    assert NO_REGISTER in error and "__init__.py" in error


def test_a_module_defining_two_provider_classes_is_refused_naming_both(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    two = RECORDING_MEMORY + "\n\nclass SecondMemory(RecordingMemory):\n    pass\n"
    memory_plugin(home, two, name="memory/twins")
    k = kernel()
    error = k.plugin("memory/twins").error or ""
    assert "several provider classes" in error
    assert "RecordingMemory (memory)" in error and "SecondMemory (memory)" in error
    assert k.slots.providers("memory").get("recording") is None


# --------------------------------------------------------------------------
# The optional methods: defaults through super(), and when the host calls them
# --------------------------------------------------------------------------


def test_the_defaults_of_the_optional_methods_are_harmless() -> None:
    class Bare(MemoryProvider):
        name = "bare"

        def is_available(self) -> bool:
            return True

        def initialize(self, session_id: str, **kwargs: Any) -> None:
            return None

        def get_tool_schemas(self) -> list[dict[str, Any]]:
            return []

    bare = Bare()
    assert bare.queue_prefetch("q", session_id="s") is None
    assert bare.on_turn_start(1, "hi", model="m", platform="cli") is None
    assert bare.on_session_switch("new", parent_session_id="old", reset=True, reason="new") is None
    assert bare.on_session_switch("same", rewound=True) is None
    assert bare.on_pre_compress([{"role": "user", "content": "x"}]) == ""
    assert bare.on_delegation("task", "result", child_session_id="child", toolsets=["web"]) is None
    assert bare.on_memory_write("add", "memory", "text") is None
    assert bare.on_memory_write("add", "user", "text", {"session_id": "s"}) is None
    assert bare.get_config_schema() == []
    assert bare.save_config({"endpoint": "x"}, "/home") is None
    assert bare.backup_paths() == []


def test_the_host_calls_each_method_at_its_moment_of_the_turn(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home)
    k = kernel(["One.", "Two."], memory={"provider": "recording"})
    memory = k.providers.memory()
    session = AgentSession(k, session_id="s-1")
    session.run("first question")
    session.run("second question")
    base = {"model": "scripted", "platform": "cli", "session_id": "s-1"}
    assert memory.calls == [
        ("initialize", "s-1"),
        ("on_turn_start", 1, "first question", base),  # before the prefetch
        ("prefetch", "first question", "s-1"),
        ("sync_turn", "first question", "s-1"),
        ("queue_prefetch", "first question", {"session_id": "s-1"}),  # for the next turn
        ("on_turn_start", 2, "second question", base),
        ("prefetch", "second question", "s-1"),
        ("sync_turn", "second question", "s-1"),
        ("queue_prefetch", "second question", {"session_id": "s-1"}),
    ]
    # Every super() call answered its documented default.
    assert memory.defaults == {"on_turn_start": None, "queue_prefetch": None}
    session.close()


def test_new_and_reset_switch_the_session_without_initializing_again(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home)
    k = kernel(["One.", "Two.", "Three."], memory={"provider": "recording"})
    memory = k.providers.memory()
    session = AgentSession(k, session_id="s-old")
    session.run("hello")
    memory.calls.clear()

    new = session.reset("new")
    assert memory.calls == [
        ("on_session_end", 3, {}),  # the ending session's messages: system, user, assistant
        ("on_session_switch", new, {"parent_session_id": "s-old", "reset": True, "reason": "new"}),
    ]
    memory.calls.clear()
    session.run("again")
    assert names(memory.calls) == ["on_turn_start", "prefetch", "sync_turn", "queue_prefetch"]
    assert memory.calls[0][3]["session_id"] == new and memory.calls[2] == ("sync_turn", "again", new)

    newer = session.reset("reset")
    assert memory.calls[-1] == (
        "on_session_switch",
        newer,
        {"parent_session_id": new, "reset": True, "reason": "reset"},
    )
    assert memory.defaults["on_session_switch"] is None and memory.defaults["on_session_end"] is None
    session.close()


def test_a_reset_before_any_turn_leaves_the_first_turn_to_initialize(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home)
    k = kernel(["One."], memory={"provider": "recording"})
    memory = k.providers.memory()
    session = AgentSession(k)
    new = session.reset("new")
    assert memory.calls == []  # never initialized: nothing to switch
    session.run("hi")
    assert memory.calls[0] == ("initialize", new)
    session.close()


@pytest.mark.parametrize(
    ("engine_code", "engine_name", "expected"),
    [
        (MEMORY_AWARE_ENGINE, "memory-aware", "Keep in mind: the user's favourite colour is teal."),
        (STRICT_ENGINE, "strict", None),  # an older compress(): called without memory_context
    ],
)
def test_on_pre_compress_runs_before_the_engine_compresses_and_feeds_it(
    home: Path, kernel: Callable[..., Kernel], engine_code: str, engine_name: str, expected: str | None
) -> None:
    memory_plugin(home)
    write_plugin(home / "plugins", f"context_engine/{engine_name}", engine_code, manifest="")
    k = kernel(ONE_TOOL_TURN, memory={"provider": "recording"}, context={"engine": engine_name})
    memory, engine = k.providers.memory(), k.providers.context_engine()
    with AgentSession(k) as session:
        assert session.run("What is 2**16?").reply == "2**16 = 65536."
    (pre,) = [c for c in memory.calls if c[0] == "on_pre_compress"]
    assert pre[1] == ["system", "user", "assistant", "tool"]  # what the engine is about to compress
    assert memory.defaults["on_pre_compress"] == ""
    assert engine.contexts == [expected]
    assert "context_engine_failed" not in agent_log(home)


def test_session_compress_gives_the_memory_its_say_too(home: Path, kernel: Callable[..., Kernel]) -> None:
    memory_plugin(home)
    write_plugin(home / "plugins", "context_engine/memory-aware", MEMORY_AWARE_ENGINE, manifest="")
    k = kernel(["One."], memory={"provider": "recording"}, context={"engine": "memory-aware"})
    session = AgentSession(k)
    session.run("hello")
    session.compress(focus_topic="colours", force=True)
    assert session.messages[1] == {"role": "user", "content": "SUMMARY"}
    assert k.providers.context_engine().contexts == ["Keep in mind: the user's favourite colour is teal."]
    session.close()


def test_a_delegation_result_reaches_on_delegation(home: Path, kernel: Callable[..., Kernel]) -> None:
    memory_plugin(home)
    k = kernel(["One."], memory={"provider": "recording"})
    memory = k.providers.memory()
    session = AgentSession(k, session_id="parent")
    session.run("plan the trip")
    session.notify_delegation("find trains", "the 9:10 to Lyon", child_session_id="child-1", toolsets=["web"])
    assert memory.calls[-1] == (
        "on_delegation",
        "find trains",
        "the 9:10 to Lyon",
        {"child_session_id": "child-1", "toolsets": ["web"]},
    )
    assert memory.defaults["on_delegation"] is None
    session.close()


def test_a_host_memory_write_reaches_on_memory_write_in_each_signature_shape(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    shapes = """
    from agent.memory_provider import MemoryProvider


    class Shaped(MemoryProvider):
        def __init__(self):
            self.writes = []

        def is_available(self):
            return True

        def initialize(self, session_id, **kwargs):
            pass

        def get_tool_schemas(self):
            return []


    class KeywordMemory(Shaped):
        name = "keyword"

        def on_memory_write(self, action, target, content, **kwargs):
            self.writes.append((action, target, content, kwargs))


    class PositionalMemory(Shaped):
        name = "positional"

        def on_memory_write(self, action, target, content, meta):
            self.writes.append((action, target, content, meta))


    class LegacyMemory(Shaped):
        name = "legacy"

        def on_memory_write(self, action, target, content):
            self.writes.append((action, target, content))


    def register(ctx):
        for cls in (KeywordMemory, PositionalMemory, LegacyMemory):
            ctx.register_memory_provider(cls())
    """
    write_plugin(home / "plugins", "memory/shapes", textwrap.dedent(shapes), manifest="")
    memory_plugin(home)
    expected_meta = {"session_id": "s-w", "platform": "cli", "tool_name": "memory"}
    seen = {}
    for name in ("recording", "keyword", "positional", "legacy"):
        k = kernel(["One."], memory={"provider": name})
        session = AgentSession(k, session_id="s-w")
        session.notify_memory_write("add", "user", "likes teal", {"tool_name": "memory"})
        memory = k.providers.memory()
        seen[name] = memory.calls[-1] if name == "recording" else memory.writes[-1]
        session.close()
    assert seen == {
        "recording": ("on_memory_write", "add", "user", "likes teal", {"metadata": expected_meta}),
        "keyword": ("add", "user", "likes teal", {"metadata": expected_meta}),
        "positional": ("add", "user", "likes teal", expected_meta),
        "legacy": ("add", "user", "likes teal"),
    }


def test_overrides_with_fewer_keywords_are_called_with_what_they_take(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """Older Hermes providers override with narrower signatures; the host adapts to them."""
    code = """
    from agent.memory_provider import MemoryProvider


    class Narrow(MemoryProvider):
        name = "narrow"

        def __init__(self):
            self.calls = []

        def is_available(self):
            return True

        def initialize(self, session_id, **kwargs):
            pass

        def get_tool_schemas(self):
            return []

        def on_turn_start(self, turn_number, message):
            self.calls.append(("on_turn_start", turn_number, message))

        def on_session_switch(self, new_session_id, reset=False):
            self.calls.append(("on_session_switch", new_session_id, reset))

        def on_delegation(self, task, result):
            self.calls.append(("on_delegation", task, result))
    """
    memory_plugin(home, textwrap.dedent(code), name="memory/narrow")
    k = kernel(["One."], memory={"provider": "narrow"})
    session = AgentSession(k)
    session.run("hi")
    new = session.reset()
    session.notify_delegation("t", "r", child_session_id="c")
    assert k.providers.memory().calls == [
        ("on_turn_start", 1, "hi"),
        ("on_session_switch", new, True),
        ("on_delegation", "t", "r"),
    ]
    assert "failed" not in agent_log(home)
    session.close()


# --------------------------------------------------------------------------
# Setup and backup: reachable through k.providers
# --------------------------------------------------------------------------


def test_config_schema_and_save_config_through_the_embedding_api(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    memory_plugin(home)
    k = kernel(memory={"provider": "recording"})
    schema = k.providers.memory_config_schema()
    assert [field["key"] for field in schema] == ["endpoint", "api_key"]
    assert schema[1]["secret"] is True
    assert k.providers.memory_config_schema("recording") == schema
    k.providers.save_memory_config({"endpoint": "http://127.0.0.1:9"})
    memory = k.providers.memory()
    assert memory.calls[-1] == ("save_config", {"endpoint": "http://127.0.0.1:9"}, str(home))
    assert memory.defaults["get_config_schema"] == [] and memory.defaults["save_config"] is None


def test_setup_works_for_a_provider_that_is_not_available_yet(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """Setting a provider up is how it becomes available: its schema is there before its keys are."""
    locked = RECORDING_MEMORY.replace(
        "    def is_available(self):\n        return True",
        "    def is_available(self):\n        return False",
    )
    memory_plugin(home, locked)
    k = kernel(memory={"provider": "recording"})
    with pytest.raises(ProviderSelectionError):
        k.providers.memory()
    assert [f["key"] for f in k.providers.memory_config_schema()] == ["endpoint", "api_key"]


def test_setup_names_a_missing_provider(home: Path, kernel: Callable[..., Kernel]) -> None:
    k = kernel()
    with pytest.raises(ProviderSelectionError, match="no memory provider configured"):
        k.providers.memory_config_schema()
    with pytest.raises(ProviderSelectionError, match=r"no memory provider named 'ghost'.*sqlite"):
        k.providers.save_memory_config({}, "ghost")
    assert k.providers.memory_backup_paths() == []


def test_backup_paths_lists_the_existing_ones_outside_the_home(
    home: Path, tmp_path: Path, kernel: Callable[..., Kernel]
) -> None:
    outside = tmp_path / "user" / ".recording"
    outside.mkdir(parents=True)
    state = tmp_path / "user" / "recording.db"
    state.write_text("x", encoding="utf-8")
    declared = [str(outside), "~/recording.db", str(tmp_path / "missing"), "relative/path", str(outside)]
    memory_plugin(home, RECORDING_MEMORY.replace("    paths = ()", f"    paths = {declared!r}"))
    k = kernel(memory={"provider": "recording"})
    # "~" is the user's home (the sandbox's HOME); missing, relative and repeated paths are left out.
    assert k.providers.memory_backup_paths() == [outside, state]
    assert k.providers.memory().defaults["backup_paths"] == []
