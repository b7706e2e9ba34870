"""Context engines as Hermes Agent plugins expect them (issue 16), through real kernels.

Hermes keeps the token counters of ``ContextEngine`` as class attributes (an engine that never
calls ``super().__init__()`` still has them), resets an engine on ``/new`` and ``/reset``
(``on_session_reset``), offers ``should_compress_preflight`` and ``get_status()["usage_percent"]``,
and tells the engine the model and its context length (``update_model``).  Plugins are written to
a temporary home; turns run on the bundled ``scripted`` model of the checkout.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log, write_plugin

from kernel import Kernel
from kernel.agent import DEFAULT_CONTEXT_LENGTH, AgentSession
from kernel.cli.chat import install_host_commands
from kernel.providers import ContextEngine
from kernel.testing import scripted_config, write_script

# Hermes style: only the class, no register(); __init__ does not call super().__init__().
BARE_ENGINE = """
from agent.context_engine import ContextEngine


class BareEngine(ContextEngine):
    name = "bare"

    def __init__(self):
        self.models = []
        self.resets = 0
        self.preflights = []
        self.compressed = 0
        self.preflight_from = 10**9

    def should_compress(self, prompt_tokens=None):
        return False

    def should_compress_preflight(self, messages):
        self.preflights.append([m["role"] for m in messages])
        messages.clear()  # a copy: the session's conversation is not touched
        return len(self.preflights[-1]) >= self.preflight_from

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        self.compressed += 1
        self.compression_count += 1
        return [messages[0], {"role": "user", "content": "SUMMARY"}]

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage["prompt_tokens"]

    def update_model(self, model, context_length, base_url="", api_key="", provider="", api_mode=""):
        self.models.append((model, context_length, base_url, api_key, provider, api_mode))
        super().update_model(model, context_length)

    def on_session_reset(self):
        self.resets += 1
        super().on_session_reset()
"""

# An engine with a context length of its own, whose update_model takes only the two positionals.
OWN_LENGTH_ENGINE = """
from agent.context_engine import ContextEngine


class OwnLengthEngine(ContextEngine):
    name = "own-length"

    def __init__(self):
        super().__init__(50_000)
        self.models = []

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return messages

    def update_from_response(self, usage):
        pass

    def update_model(self, model, context_length):
        self.models.append((model, context_length))
        super().update_model(model, context_length)
"""

CALC = {"name": "calculate", "arguments": {"expression": "2**16"}}
ONE_TOOL_TURN = [{"text": "Computing.", "tool_calls": [CALC]}, "2**16 = 65536."]


@pytest.fixture(autouse=True)
def bundled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkout's bundled plugins: the scripted model, the calculator and the compressor."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))


@pytest.fixture
def kernel(home: Path) -> Iterator[Callable[..., Kernel]]:
    """``kernel(script, **config)``: a loaded kernel in ``home`` with the scripted model."""
    made: list[Kernel] = []

    def make(script: list[Any], **config: Any) -> Kernel:
        scripted = scripted_config(write_script(home, script))
        scripted["model"].update(config.pop("model", {}))
        k = Kernel(home=home, config={**scripted, **config})
        made.append(k)
        k.load()
        return k

    yield make
    for k in made:
        k.shutdown()


def engine_plugin(home: Path, code: str, name: str) -> Path:
    """A Hermes context-engine folder: ``__init__.py`` only, no plugin.yaml."""
    return write_plugin(home / "plugins", f"context_engine/{name}", textwrap.dedent(code), manifest="")


# --------------------------------------------------------------------------
# Class-level counters, a module with only the class, get_status
# --------------------------------------------------------------------------


def test_an_engine_that_skips_super_init_loads_and_runs_a_turn(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    engine_plugin(home, BARE_ENGINE, "bare")
    k = kernel(ONE_TOOL_TURN, context={"engine": "bare"})
    info = k.plugin("context_engine/bare")
    assert info.enabled and info.error is None, info
    engine = k.providers.context_engine()
    assert type(engine).__name__ == "BareEngine" and isinstance(engine, ContextEngine)
    # The counters exist though __init__ never set them.
    assert (engine.compression_count, engine.last_prompt_tokens, engine.context_length) == (0, 0, 0)
    assert engine.get_status()["usage_percent"] == 0  # no context length yet: no division
    with AgentSession(k) as session:
        assert session.run("What is 2**16?").reply == "2**16 = 65536."
    assert "context_engine" not in agent_log(home)
    # Without model.context_length an engine that has none gets Hermes' fallback.
    assert engine.models == [("scripted", DEFAULT_CONTEXT_LENGTH, "", "", "scripted", "scripted")]
    assert engine.threshold_tokens == int(DEFAULT_CONTEXT_LENGTH * 0.75)
    status = engine.get_status()
    assert status["last_prompt_tokens"] == engine.last_prompt_tokens > 0
    assert status["usage_percent"] == pytest.approx(engine.last_prompt_tokens / DEFAULT_CONTEXT_LENGTH * 100)
    assert status["compression_count"] == 0 and status["name"] == "bare"
    # The class-level defaults were not changed by the instance.
    assert ContextEngine.compression_count == 0 and ContextEngine.context_length == 0


DUCK_ENGINE = """
class DuckEngine:  # no ContextEngine base class at all, no counters of its own
    name = "duck"

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return list(messages)

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.get("input_tokens") or 0


def register(ctx):
    ctx.register_context_engine(DuckEngine())
"""


def test_a_duck_typed_engine_gets_the_base_defaults_and_keeps_their_state(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    """An engine that only has the methods (Hermes accepts it): the kernel sees it through a view whose
    default methods (``update_model``, ``on_session_reset``, ``get_status``) keep their state on the
    engine itself, instead of failing on a read-only view."""
    engine_plugin(home, DUCK_ENGINE, "duck")
    k = kernel(["one", "two"], context={"engine": "duck"}, model={"context_length": 4000})
    view = k.providers.context_engine()
    assert isinstance(view, ContextEngine)
    with AgentSession(k) as session:
        session.run("hello")
        duck = object.__getattribute__(view, "_wrapped")
        assert duck.context_length == 4000 and duck.threshold_tokens == 3000  # update_model's defaults
        assert view.get_status()["usage_percent"] == pytest.approx(duck.last_prompt_tokens / 4000 * 100)
        session.reset()
        session.run("again")
    assert "context_engine" not in agent_log(home)


def test_usage_percent_is_bounded_and_ignores_a_negative_count(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    k = kernel(["Fine."], model={"context_length": 1000})
    engine = k.providers.context_engine()  # the bundled compressor
    with AgentSession(k) as session:
        session.run("hello")
    status = engine.get_status()
    assert status["usage_percent"] == pytest.approx(engine.last_prompt_tokens / 1000 * 100)
    assert status["threshold_percent"] == 0.75  # the compressor's own keys stay
    engine.last_prompt_tokens = 5000
    assert engine.get_status()["usage_percent"] == 100
    engine.last_prompt_tokens = -1  # Hermes' "compressed, awaiting real usage" marker
    assert engine.get_status()["usage_percent"] == 0 and engine.get_status()["last_prompt_tokens"] == 0


# --------------------------------------------------------------------------
# on_session_reset on /new and /reset
# --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["/new", "/reset"])
def test_new_and_reset_reset_the_engine(home: Path, kernel: Callable[..., Kernel], command: str) -> None:
    engine_plugin(home, BARE_ENGINE, "bare")
    k = kernel(["One.", "Two."], context={"engine": "bare"})
    engine = k.providers.context_engine()
    session = AgentSession(k)
    install_host_commands(k, session)
    session.run("hello")
    engine.compression_count = 4
    engine.last_completion_tokens = engine.last_total_tokens = 7
    assert engine.last_prompt_tokens > 0

    assert "New session" in (k.commands.run(command) or "")
    assert engine.resets == 1
    counts = (engine.last_prompt_tokens, engine.last_completion_tokens, engine.last_total_tokens)
    assert counts == (0, 0, 0) and engine.compression_count == 0
    assert engine.context_length == DEFAULT_CONTEXT_LENGTH  # the model's length is kept
    session.run("again")
    assert len(engine.models) == 1  # same model: not told again
    session.close()


# --------------------------------------------------------------------------
# should_compress_preflight: before each call, on the messages about to be sent
# --------------------------------------------------------------------------


def test_preflight_is_asked_before_each_call_and_can_compress(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    engine_plugin(home, BARE_ENGINE, "bare")
    k = kernel(ONE_TOOL_TURN, context={"engine": "bare"})
    engine = k.providers.context_engine()
    engine.preflight_from = 4  # yes once the tool round is in the conversation
    session = AgentSession(k)
    assert session.run("What is 2**16?").reply == "2**16 = 65536."
    assert engine.preflights == [["system", "user"], ["system", "user", "assistant", "tool"]]
    assert engine.compressed == 1  # should_compress said no; the preflight said yes
    assert session.messages[:2] == [session.messages[0], {"role": "user", "content": "SUMMARY"}]
    session.close()


def test_a_preflight_that_says_no_changes_nothing(home: Path, kernel: Callable[..., Kernel]) -> None:
    engine_plugin(home, BARE_ENGINE, "bare")
    k = kernel(ONE_TOOL_TURN, context={"engine": "bare"})
    engine = k.providers.context_engine()
    session = AgentSession(k)
    session.run("What is 2**16?")
    assert len(engine.preflights) == 2 and engine.compressed == 0
    # The engine cleared what it was given: a copy, the conversation is whole.
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    session.close()


# --------------------------------------------------------------------------
# update_model: the session's start and a change of model
# --------------------------------------------------------------------------


def test_model_context_length_reaches_the_engine_once_per_model(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    engine_plugin(home, BARE_ENGINE, "bare")
    k = kernel(["One.", "Two.", "Three."], context={"engine": "bare"}, model={"context_length": 32_000})
    engine = k.providers.context_engine()
    session = AgentSession(k)
    session.run("one")
    session.run("two")
    assert engine.models == [("scripted", 32_000, "", "", "scripted", "scripted")]
    assert (engine.context_length, engine.threshold_tokens) == (32_000, 24_000)

    k.config["model"]["model"] = "scripted-large"  # what /model NAME does
    session.run("three")
    assert engine.models[-1] == ("scripted-large", 32_000, "", "", "scripted", "scripted")
    assert len(engine.models) == 2
    session.close()


def test_the_bundled_compressor_adopts_model_context_length(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    k = kernel(["Fine."], model={"context_length": "64000"})  # a string of digits is read as a number
    engine = k.providers.context_engine()
    assert engine.name == "compressor" and engine.context_length == 128_000
    with AgentSession(k) as session:
        session.run("hello")
    assert (engine.context_length, engine.threshold_tokens) == (64_000, 48_000)


def test_an_engine_with_its_own_length_is_told_only_when_the_model_changes(
    home: Path, kernel: Callable[..., Kernel]
) -> None:
    engine_plugin(home, OWN_LENGTH_ENGINE, "own-length")
    k = kernel(["One.", "Two."], context={"engine": "own-length"})
    engine = k.providers.context_engine()
    session = AgentSession(k)
    session.run("one")
    assert engine.models == []  # the kernel knows no better length than the engine's own
    k.config["model"]["model"] = "other-model"
    session.run("two")
    # Told the new model with the length it has; its narrow signature got no keywords.
    assert engine.models == [("other-model", 50_000)]
    assert "update_model_failed" not in agent_log(home)
    session.close()


def test_an_invalid_context_length_is_logged_and_ignored(home: Path, kernel: Callable[..., Kernel]) -> None:
    engine_plugin(home, OWN_LENGTH_ENGINE, "own-length")
    k = kernel(["One."], context={"engine": "own-length"}, model={"context_length": "lots"})
    engine = k.providers.context_engine()
    with AgentSession(k) as session:
        session.run("one")
    assert engine.models == [] and engine.context_length == 50_000
    assert "model_context_length_invalid" in agent_log(home) and "lots" in agent_log(home)
