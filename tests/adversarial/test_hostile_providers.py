"""Memory providers and context engines that break (issue 16): methods that raise, ``BaseException``s,
garbage answers, classes that cannot be built.

The host's calls to the optional methods are guarded: a failure is logged and the turn goes on.
Only Ctrl-C in the main thread goes through, as for plugins' hooks.  Everything runs in a real
kernel with the checkout's bundled scripted model.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log, write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.testing import scripted_config, write_script

CALC = {"name": "calculate", "arguments": {"expression": "2**16"}}
ONE_TOOL_TURN = [{"text": "Computing.", "tool_calls": [CALC]}, "2**16 = 65536."]

OPTIONAL_MEMORY_METHODS = (
    "queue_prefetch",
    "on_turn_start",
    "on_session_switch",
    "on_pre_compress",
    "on_delegation",
    "on_memory_write",
    "on_session_end",
)

# {raise_} is the statement every optional method runs.
RAISING_MEMORY = """
from agent.memory_provider import MemoryProvider


class Boom(BaseException):
    pass


class RaisingMemory(MemoryProvider):
    name = "raising"

    def __init__(self):
        self.initialized = []

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.initialized.append(session_id)

    def get_tool_schemas(self):
        return []

    def fail(self, *args, **kwargs):
        {raise_}

    queue_prefetch = on_turn_start = on_session_switch = on_pre_compress = fail
    on_delegation = on_memory_write = on_session_end = fail
"""

ARMED_ENGINE = """
from agent.context_engine import ContextEngine


class ArmedEngine(ContextEngine):
    name = "armed"

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

# Every optional method of the engine fails in the same way; the counters are a property that raises.
RAISING_ENGINE = """
from agent.context_engine import ContextEngine


class RaisingEngine(ContextEngine):
    name = "raising-engine"

    def __init__(self):
        pass

    @property
    def context_length(self):
        raise RuntimeError("no length for you")

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return messages

    def update_from_response(self, usage):
        pass

    def fail(self, *args, **kwargs):
        {raise_}

    should_compress_preflight = update_model = on_session_reset = on_session_start = on_session_end = fail
"""

RAISERS = {
    "RuntimeError": "raise RuntimeError('provider exploded')",
    "SystemExit": "raise SystemExit(3)",
    "BaseException subclass": "raise Boom('custom')",
}


@pytest.fixture(autouse=True)
def bundled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))


@pytest.fixture
def kernel(home: Path) -> Iterator[Callable[..., Kernel]]:
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


def plugin(home: Path, name: str, code: str) -> Path:
    return write_plugin(home / "plugins", name, textwrap.dedent(code), manifest="")


# --------------------------------------------------------------------------
# Memory providers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("raised", list(RAISERS))
def test_memory_methods_that_raise_never_break_a_turn(
    home: Path, kernel: Callable[..., Kernel], raised: str
) -> None:
    plugin(home, "memory/raising", RAISING_MEMORY.replace("{raise_}", RAISERS[raised]))
    plugin(home, "context_engine/armed", ARMED_ENGINE)
    k = kernel(
        [*ONE_TOOL_TURN, "Again.", "Once more."], memory={"provider": "raising"}, context={"engine": "armed"}
    )
    memory, engine = k.providers.memory(), k.providers.context_engine()
    session = AgentSession(k, session_id="s-1")
    assert session.run("What is 2**16?").reply == "2**16 = 65536."  # on_pre_compress raised on the way
    assert engine.contexts == [""]  # the engine compressed all the same, without memory context
    new = session.reset("new")  # on_session_end and on_session_switch raise
    assert session.run("and now?").reply == "Again."
    session.notify_delegation("task", "result", child_session_id="c")
    session.notify_memory_write("add", "memory", "text")
    session.close()
    assert memory.initialized == ["s-1"]  # the switch failed, but the provider is not set up twice
    assert session.session_id == new
    log = agent_log(home)
    for event in (
        "memory_turn_start_failed",
        "memory_queue_prefetch_failed",
        "memory_pre_compress_failed",
        "memory_session_switch_failed",
        "memory_session_end_failed",
        "memory_delegation_failed",
        "memory_write_failed",
    ):
        assert event in log, event


def test_ctrl_c_in_a_memory_method_ends_the_turn_and_the_session_goes_on(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    code = RAISING_MEMORY.replace("{raise_}", "if self.interrupt:\n            raise KeyboardInterrupt")
    code = code.replace("self.initialized = []", "self.initialized = []\n        self.interrupt = True")
    plugin(home, "memory/raising", code)
    k = kernel(["Answered."], memory={"provider": "raising"})
    session = AgentSession(k)
    with pytest.raises(KeyboardInterrupt):
        session.run("hello")  # on_turn_start, in the main thread: the user's Ctrl-C
    assert session.messages == []  # nothing of the interrupted turn is kept
    k.providers.memory().interrupt = False
    assert session.run("hello").reply == "Answered."
    session.close()


def test_garbage_from_on_pre_compress_is_not_handed_to_the_engine(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    garbage = (
        "    def on_pre_compress(self, messages):\n"
        "        self.initialized.append('asked')\n"
        "        return {'not': 'text'}\n\n"
    )
    code = RAISING_MEMORY.replace("{raise_}", "return None")
    code = code.replace("    queue_prefetch = on_turn_start", garbage + "    queue_prefetch = on_turn_start")
    code = code.replace("on_session_switch = on_pre_compress = fail", "on_session_switch = fail")
    plugin(home, "memory/raising", code)
    plugin(home, "context_engine/armed", ARMED_ENGINE)
    k = kernel(ONE_TOOL_TURN, memory={"provider": "raising"}, context={"engine": "armed"})
    with AgentSession(k) as session:
        assert session.run("What is 2**16?").reply == "2**16 = 65536."
    assert k.providers.memory().initialized[-1] == "asked"
    assert k.providers.context_engine().contexts == [""]


GARBAGE_SETUP = """
from agent.memory_provider import MemoryProvider


class Odd(MemoryProvider):
    name = "odd"
    schema = None
    paths = None

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []

    def get_config_schema(self):
        if isinstance(self.schema, BaseException):
            raise self.schema
        return self.schema

    def backup_paths(self):
        if isinstance(self.paths, BaseException):
            raise self.paths
        return self.paths

    def save_config(self, values, hermes_home):
        raise OSError("read-only file system")
"""


def test_garbage_setup_answers_are_logged_and_dropped(
    home: Path, tmp_path: Path, kernel: Callable[..., Kernel]
) -> None:
    plugin(home, "memory/odd", GARBAGE_SETUP)
    k = kernel(memory={"provider": "odd"})
    memory = k.providers.memory()
    for garbage in ("text", 42, {"key": "x"}, None, RuntimeError("schema exploded"), SystemExit(1)):
        memory.schema = garbage
        assert k.providers.memory_config_schema() == []
    memory.schema = [{"key": "endpoint"}, "junk", {"no": "key"}, {"key": 7}, 3]
    assert k.providers.memory_config_schema() == [{"key": "endpoint"}]

    real = tmp_path / "state"
    real.mkdir()
    for garbage in (None, "/etc", 42, RuntimeError("paths exploded"), SystemExit(1)):
        memory.paths = garbage
        assert k.providers.memory_backup_paths() == []
    memory.paths = [42, "", None, "\x00bad", "~nobody-such-user-xyz/x", str(real)]
    assert k.providers.memory_backup_paths() == [real]
    log = agent_log(home)
    for event in (
        "memory_config_schema_invalid",
        "memory_config_schema_failed",
        "memory_backup_paths_invalid",
        "memory_backup_paths_failed",
    ):
        assert event in log, event
    # Saving is the embedder's explicit request: the provider's error reaches it.
    with pytest.raises(OSError, match="read-only"):
        k.providers.save_memory_config({"endpoint": "x"})


# --------------------------------------------------------------------------
# Context engines
# --------------------------------------------------------------------------


@pytest.mark.parametrize("raised", list(RAISERS))
def test_engine_methods_that_raise_never_break_a_turn(
    home: Path, kernel: Callable[..., Kernel], raised: str
) -> None:
    code = RAISING_ENGINE.replace("{raise_}", RAISERS[raised])
    code = code.replace(
        "class RaisingEngine", "class Boom(BaseException):\n    pass\n\n\nclass RaisingEngine"
    )
    plugin(home, "context_engine/raising-engine", code)
    k = kernel([*ONE_TOOL_TURN, "Again."], context={"engine": "raising-engine"})
    session = AgentSession(k)
    assert session.run("What is 2**16?").reply == "2**16 = 65536."
    session.reset("reset")
    assert session.run("again").reply == "Again."
    session.close()
    log = agent_log(home)
    for event in (
        "context_engine_failed",  # reading its context_length
        "context_engine_update_model_failed",
        "context_engine_start_failed",
        "context_engine_preflight_failed",
        "context_engine_reset_failed",
        "context_engine_end_failed",
    ):
        assert event in log, event


def test_a_preflight_answer_other_than_true_does_not_compress(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    code = ARMED_ENGINE.replace(
        "    def update_from_response(self, usage):\n        self.armed = True",
        "    def update_from_response(self, usage):\n        pass\n\n"
        "    answer = None\n\n"
        "    def should_compress_preflight(self, messages):\n        return self.answer",
    )
    plugin(home, "context_engine/armed", code)
    k = kernel([*ONE_TOOL_TURN] * 3, context={"engine": "armed"})
    engine = k.providers.context_engine()
    session = AgentSession(k)
    for answer in ("yes", 1, [True]):
        engine.answer = answer
        session.run("What is 2**16?")
    assert engine.contexts == []
    session.close()


# --------------------------------------------------------------------------
# Module-only providers whose class cannot be built
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("init", "expected"),
    [
        (
            "def __init__(self, api_key):\n        pass",
            "Fragile() (with no arguments), which failed: TypeError",
        ),
        (
            "def __init__(self):\n        raise RuntimeError('no database')",
            "which failed: RuntimeError: no database",
        ),
        ("def __init__(self):\n        raise SystemExit(2)", "SystemExit"),
    ],
)
def test_a_provider_class_that_cannot_be_built_fails_only_its_plugin(
    home: Path, kernel: Callable[..., Kernel], init: str, expected: str
) -> None:
    code = f"""
from agent.memory_provider import MemoryProvider


class Fragile(MemoryProvider):
    name = "fragile"

    {init}

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        pass

    def get_tool_schemas(self):
        return []
"""
    plugin(home, "memory/fragile", code)
    plugin(
        home, "bystander", "def register(ctx):\n    ctx.register_hook('post_tool_call', lambda **kw: None)\n"
    )
    k = kernel()
    error = k.plugin("memory/fragile").error or ""
    assert expected in error, error
    assert k.plugin("bystander").enabled
    assert "fragile" not in k.slots.providers("memory")
