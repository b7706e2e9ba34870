"""The context engine slot and the bundled ``compressor`` engine, through a real kernel.

The engine class is taken from the kernel that loaded the checkout's bundled
extensions (``extensions/context_engine/compressor``), so these tests exercise
exactly what ``context.engine: compressor`` gives a host.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, agent_log

from kernel import Kernel
from kernel.providers import ContextEngine
from kernel.providers.manager import ProviderSelectionError
from kernel.providers.scripted import ScriptedTransport
from kernel.providers.transport import Usage

EXTENSIONS = REPO / "extensions"

# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """One kernel with the real bundled extensions, shared by the tests that only need the engine class."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("HERMES_HOME", "HERMES_PLUGINS_DEBUG", "HERMES_ENABLE_PROJECT_PLUGINS"):
            mp.delenv(name, raising=False)
        mp.setenv("HERMES_BUNDLED_PLUGINS", str(EXTENSIONS))
        k = Kernel(home=tmp_path_factory.mktemp("hermes"))
        k.load()
    yield k
    k.shutdown()


@pytest.fixture
def Engine(loaded: Kernel) -> type[ContextEngine]:
    engine = loaded.providers.context_engine()
    assert engine is not None
    return type(engine)


@pytest.fixture
def engine_module(Engine: type[ContextEngine]) -> Any:
    """The bundled engine module (for its helper functions)."""
    import sys

    return sys.modules[Engine.__module__]


@pytest.fixture
def kernel_of(make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Kernel]:
    """``make_kernel`` with the checkout's bundled extensions instead of an empty bundled dir."""
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(EXTENSIONS))
    return make_kernel


TINY_ENGINE = """
from kernel.providers import ContextEngine


class Tiny(ContextEngine):
    @property
    def name(self):
        return "tiny"

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False):
        return list(messages)[-1:]

    def update_from_response(self, usage):
        self.last_prompt_tokens = usage.get("input_tokens", 0)


def register(ctx):
    ctx.register_context_engine(Tiny())
"""


# --------------------------------------------------------------------------
# Conversation builders and the invariants every compression keeps
# --------------------------------------------------------------------------


def system(text: str = "You are a careful assistant.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calling(*calls: tuple[str, str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in calls
        ],
    }


def answer(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages with unique texts."""
    return [
        user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(start, start + n)
    ]


def is_summary(message: dict[str, Any]) -> bool:
    return str(message.get("content", "")).startswith("[Summary of ")


def non_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") != "system"]


def check_invariants(engine: Any, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    """What every compression must keep, whatever the conversation."""
    summaries = [m for m in after if is_summary(m) and m not in before]
    assert len(summaries) <= 1, after
    kept = [m for m in after if m not in summaries]
    # the kept messages are the input's, in the input's order
    position = [before.index(m) for m in kept]
    assert position == sorted(position), "messages were reordered"
    # every system message survives
    assert [m for m in before if m["role"] == "system"] == [m for m in kept if m["role"] == "system"]
    # the head and the tail survive verbatim
    rest = non_system(before)
    head = rest[: min(engine.protect_first_n, len(rest))]
    tail = rest[len(rest) - min(engine.protect_last_n, len(rest)) :]
    for message in head + tail:
        assert message in kept, f"protected message dropped: {message}"
    # the removed messages were one contiguous run of non-system messages, replaced by the summary
    removed = [m for m in rest if m not in kept]
    if removed:
        assert summaries, "messages were dropped without a summary"
        first = rest.index(removed[0])
        assert rest[first : first + len(removed)] == removed, "the removed messages were not contiguous"
        assert summaries[0]["content"].startswith(
            f"[Summary of {len(removed)} earlier message{'' if len(removed) == 1 else 's'}]"
        )
        # the summary stands where the removed run was
        where = after.index(summaries[0])
        cut = before.index(removed[0])
        assert all(before.index(m) < cut for m in after[:where])
        assert all(before.index(m) > cut for m in after[where + 1 :])
    else:
        assert not summaries
    # a tool call and its results are on the same side
    calls_kept = {c["id"] for m in kept for c in m.get("tool_calls") or []}
    calls_all = {c["id"] for m in before for c in m.get("tool_calls") or []}
    for message in before:
        if message["role"] == "tool" and message["tool_call_id"] in calls_all:
            assert (message in kept) == (message["tool_call_id"] in calls_kept), (
                f"tool call {message['tool_call_id']} split from its result"
            )


def random_conversation(rng: random.Random) -> list[dict[str, Any]]:
    messages = [system("rules")] if rng.random() < 0.8 else []
    for counter in range(1, rng.randint(0, 14) + 1):
        kind = rng.random()
        if kind < 0.3:
            messages.append(user(f"user says {counter}"))
        elif kind < 0.55:
            messages.append(assistant(f"assistant says {counter}"))
        elif kind < 0.6:
            messages.append(system(f"late system note {counter}"))
        else:
            ids = [f"call_{counter}_{j}" for j in range(rng.randint(1, 3))]
            messages.append(
                calling(*[(cid, "lookup", {"n": counter}) for cid in ids], text=f"using tools {counter}")
            )
            for cid in ids:
                messages.append(answer(cid, f"result of {cid}"))
    return messages


# --------------------------------------------------------------------------
# The slot: selection through the kernel
# --------------------------------------------------------------------------


def test_compressor_is_the_default_engine_without_any_config(kernel_of: Callable[..., Kernel]) -> None:
    k = kernel_of()
    engine = k.providers.context_engine()
    assert isinstance(engine, ContextEngine)
    assert engine.name == "compressor"
    assert k.slots.get("context_engine", "compressor").plugin == "context_engine/compressor"
    info = k.plugin("context_engine/compressor")
    assert info is not None and info.enabled and info.kind == "backend", info
    assert info.warnings == []
    rows = [r for r in k.providers.status() if r.slot == "context_engine"]
    assert [(r.name, r.active, r.available) for r in rows] == [("compressor", True, True)]
    assert engine.context_length == 128_000
    assert engine.threshold_tokens == 96_000
    assert (engine.protect_first_n, engine.protect_last_n) == (3, 6)
    assert engine.compression_count == 0
    # ctx.llm is wired: the user's model would summarise. None is configured here, so the model call
    # fails and the deterministic extract stands in.
    assert callable(engine.summarizer)
    conversation = [{"role": "user", "content": f"message number {i}"} for i in range(14)]
    squeezed = engine.compress(conversation, force=True)
    assert len(squeezed) < len(conversation)
    summary = next(m["content"] for m in squeezed if m["content"].startswith("[Summary of"))
    assert "message number 5" in summary


def test_context_engine_selects_another_engine(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("tiny-engine", TINY_ENGINE)
    k = kernel_of({"context": {"engine": "tiny"}})
    engine = k.providers.context_engine()
    assert engine is not None and engine.name == "tiny"
    assert k.slots.get("context_engine", "tiny").plugin == "tiny-engine"
    assert engine.compress([user("a"), user("b")]) == [user("b")]
    active = {r.name: r.active for r in k.providers.status() if r.slot == "context_engine"}
    assert active == {"compressor": False, "tiny": True}


def test_unknown_engine_is_an_error_listing_the_names(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("tiny-engine", TINY_ENGINE)
    k = kernel_of({"context": {"engine": "nope"}})
    with pytest.raises(ProviderSelectionError) as caught:
        k.providers.context_engine()
    message = str(caught.value)
    assert "context.engine" in message and "'nope'" in message
    assert "compressor" in message and "tiny" in message
    assert any("nope" in p and "compressor" in p for p in k.problems), k.problems


def test_a_second_engine_named_compressor_is_refused_with_a_warning_naming_both(
    kernel_of: Callable[..., Kernel], plugin_dir: Callable[..., Path]
) -> None:
    plugin_dir("zz-engine", TINY_ENGINE.replace('return "tiny"', 'return "compressor"'))
    k = kernel_of()
    assert k.slots.get("context_engine", "compressor").plugin == "context_engine/compressor"
    warnings = " ".join(k.plugin("zz-engine").warnings)
    assert "zz-engine" in warnings and "context_engine/compressor" in warnings, warnings


def test_config_tunes_the_bundled_engine(kernel_of: Callable[..., Kernel]) -> None:
    k = kernel_of(
        {
            "context": {
                "context_length": 1000,
                "threshold_percent": 0.5,
                "protect_first_n": 1,
                "protect_last_n": 2,
            }
        }
    )
    engine = k.providers.context_engine()
    assert engine.context_length == 1000
    assert engine.threshold_tokens == 500
    assert (engine.protect_first_n, engine.protect_last_n) == (1, 2)
    assert engine.should_compress(500) and not engine.should_compress(499)


def test_bad_config_values_fall_back_to_the_defaults_with_a_warning(
    kernel_of: Callable[..., Kernel], home: Path
) -> None:
    k = kernel_of({"context": {"context_length": "big", "threshold_percent": 5, "protect_last_n": -1}})
    engine = k.providers.context_engine()
    assert engine.context_length == 128_000
    assert engine.threshold_tokens == 96_000
    assert engine.protect_last_n == 6
    log = agent_log(home)
    for key in ("context_length", "threshold_percent", "protect_last_n"):
        assert f"context.{key}" in log, log


# --------------------------------------------------------------------------
# compress: what is kept
# --------------------------------------------------------------------------


def test_keeps_the_system_message_the_head_and_the_tail(Engine: type) -> None:
    engine = Engine()
    messages = [system(), *chat(20)]
    out = engine.compress(messages)
    assert out[0] == system()
    assert out[1:4] == messages[1:4]
    assert out[5:] == messages[-6:]
    assert len(out) == 1 + 3 + 1 + 6
    summary = out[4]
    assert summary["role"] == "user"
    assert summary["content"].startswith("[Summary of 11 earlier messages]\n")
    assert engine.compression_count == 1
    assert engine.last_summary_source == "extract"
    check_invariants(engine, messages, out)


def test_the_input_is_never_mutated_and_the_output_shares_no_dicts(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=2)
    messages = [
        system(),
        *chat(4),
        calling(("c1", "search", {"q": "x"})),
        answer("c1", "found"),
        *chat(6, 10),
    ]
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]
    out = engine.compress(messages, focus_topic="search")
    assert messages == snapshot
    assert [id(m) for m in messages] == ids
    assert not {id(m) for m in out} & set(ids)
    out[0]["content"] = "changed"
    out[1]["content"] = "changed too"
    assert messages == snapshot


def test_a_system_message_in_the_middle_keeps_its_place(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    messages = [system("first"), *chat(3), system("a note"), *chat(3, 3)]
    out = engine.compress(messages)
    assert [m["content"] for m in out if m["role"] == "system"] == ["first", "a note"]
    assert out[1] == messages[1]
    assert is_summary(out[2])
    assert out[-1] == messages[-1]
    check_invariants(engine, messages, out)


def test_without_a_system_message(Engine: type) -> None:
    engine = Engine(protect_first_n=2, protect_last_n=2)
    messages = chat(10)
    out = engine.compress(messages)
    assert out[:2] == messages[:2] and out[-2:] == messages[-2:]
    assert len(out) == 5 and is_summary(out[2])
    assert out[2]["content"].startswith("[Summary of 6 earlier messages]")


def test_system_role_for_the_summary_can_be_chosen(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1, summary_role="system")
    out = engine.compress(chat(6))
    assert out[1]["role"] == "system" and is_summary(out[1])
    with pytest.raises(ValueError, match="summary_role"):
        Engine(summary_role="assistant")


# --------------------------------------------------------------------------
# compress: tool calls are never split from their results
# --------------------------------------------------------------------------


def test_head_cut_inside_a_tool_block_moves_forward(Engine: type) -> None:
    engine = Engine(protect_first_n=2, protect_last_n=2)
    block = [
        calling(("c1", "read_file", {"path": "a.txt"}), ("c2", "read_file", {"path": "b.txt"})),
        answer("c1", "contents of a"),
        answer("c2", "contents of b"),
    ]
    # a naive cut after 2 non-system messages would fall between the call and its results
    messages = [system(), user("read both files"), *block, *chat(6, 10)]
    out = engine.compress(messages)
    assert out[:5] == messages[:5], "the whole block joins the head"
    assert is_summary(out[5])
    assert out[5]["content"].startswith("[Summary of 4 earlier messages]")
    assert out[6:] == messages[-2:]
    check_invariants(engine, messages, out)


def test_tail_cut_inside_a_tool_block_moves_backward(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=2)
    block = [
        calling(("c9", "run_tests", {}), ("c10", "lint", {})),
        answer("c9", "3 passed"),
        answer("c10", "clean"),
    ]
    # a naive tail of 2 would start at the second result, cutting it off from its call
    messages = [system(), *chat(8), *block, assistant("All green.")]
    out = engine.compress(messages)
    assert out[-4:] == messages[-4:], "the whole block joins the tail"
    assert out[:2] == messages[:2]
    assert is_summary(out[2])
    assert out[2]["content"].startswith("[Summary of 7 earlier messages]")
    check_invariants(engine, messages, out)


def test_tail_starting_at_a_lone_result_pulls_in_its_call(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    messages = [*chat(6), calling(("only", "clock", {})), answer("only", "12:00")]
    out = engine.compress(messages)
    assert out[-2:] == messages[-2:]
    check_invariants(engine, messages, out)


def test_results_found_by_id_even_when_not_adjacent(Engine: type, engine_module: Any) -> None:
    messages = [
        user("go"),
        calling(("a", "first", {}), ("b", "second", {})),
        answer("a", "A"),
        user("(the user typed while the tools ran)"),
        answer("b", "B"),
        assistant("done"),
    ]
    assert engine_module.split_blocks(messages) == [(0, 1), (1, 5), (5, 6)]
    engine = Engine(protect_first_n=1, protect_last_n=2)
    out = engine.compress(messages)
    # the tail would start at answer b; it moves back to the call, leaving just "go" ... nothing to remove
    assert out == messages
    assert engine.compression_count == 0


def test_a_block_covering_both_cuts_leaves_nothing_to_remove(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    ids = [f"c{i}" for i in range(8)]
    messages = [system(), calling(*[(cid, "batch", {"i": cid}) for cid in ids]), *[answer(c, c) for c in ids]]
    out = engine.compress(messages, force=True)
    assert out == messages and out is not messages
    assert engine.compression_count == 0


@pytest.mark.parametrize("seed", range(60))
def test_invariants_hold_for_random_conversations(Engine: type, seed: int) -> None:
    rng = random.Random(seed)
    messages = random_conversation(rng)
    snapshot = copy.deepcopy(messages)
    engine = Engine(protect_first_n=rng.randint(0, 4), protect_last_n=rng.randint(0, 6))
    out = engine.compress(messages, force=rng.random() < 0.5)
    assert messages == snapshot
    check_invariants(engine, messages, out)
    assert engine.compression_count == (1 if len(out) < len(messages) or any(map(is_summary, out)) else 0)


# --------------------------------------------------------------------------
# compress: the summary
# --------------------------------------------------------------------------


def test_injected_summarizer_gets_the_middle_and_the_focus(Engine: type) -> None:
    seen: list[tuple[list[dict[str, Any]], str | None]] = []

    def summarize(middle: list[dict[str, Any]], focus: str | None) -> str:
        seen.append((copy.deepcopy(middle), focus))
        middle[0]["content"] = "the summarizer scribbled here"
        return f"  {len(middle)} messages about {focus}.  "

    engine = Engine(protect_first_n=2, protect_last_n=2, summarizer=summarize)
    messages = chat(9)
    snapshot = copy.deepcopy(messages)
    out = engine.compress(messages, focus_topic="databases")
    assert seen == [(messages[2:7], "databases")]
    assert messages == snapshot
    assert out[2] == {
        "role": "user",
        "content": "[Summary of 5 earlier messages]\n5 messages about databases.",
    }
    assert engine.last_summary_source == "summarizer"
    assert engine.get_status()["summarizer"] is True


def test_summarizer_can_be_set_after_construction(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    engine.summarizer = lambda middle, focus: "short version"
    out = engine.compress(chat(5))
    assert out[1]["content"] == "[Summary of 3 earlier messages]\nshort version"


@pytest.mark.parametrize("bad", ["raises", "blank", "not-text"])
def test_a_failing_summarizer_falls_back_to_the_extract(Engine: type, bad: str) -> None:
    def summarize(middle: list[dict[str, Any]], focus: str | None) -> Any:
        if bad == "raises":
            raise RuntimeError("model down")
        return "   " if bad == "blank" else {"summary": "x"}

    engine = Engine(protect_first_n=1, protect_last_n=1, summarizer=summarize)
    out = engine.compress(chat(5))
    assert out[1]["content"].startswith("[Summary of 3 earlier messages]\n- assistant: answer 1\n")
    assert engine.last_summary_source == "extract"
    assert engine.compression_count == 1


def test_deterministic_extract_lists_roles_text_and_tool_calls(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    long_text = "word " * 100
    messages = [
        system(),
        user("start"),
        user(long_text),
        calling(("c1", "web_search", {"query": "pluggy hooks"}), text="Let me look."),
        answer("c1", "pluggy is a plugin system"),
        {"role": "user", "content": [{"type": "text", "text": "see picture"}, {"type": "image_url"}]},
        assistant("final"),
    ]
    out = engine.compress(messages)
    lines = out[2]["content"].splitlines()
    assert lines[0] == "[Summary of 4 earlier messages]"
    assert lines[1].startswith("- user: word word")
    assert len(lines[1]) <= len("- user: ") + 200
    assert lines[1].endswith("…")
    assert lines[2] == '- assistant: Let me look. [called web_search({"query": "pluggy hooks"})]'
    assert lines[3] == "- tool: pluggy is a plugin system"
    assert lines[4] == "- user: see picture [image_url]"
    assert len(lines) == 5


def test_deterministic_extract_is_capped(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1, summary_max_chars=300)
    messages = [user(f"message number {i} " + "x" * 80) for i in range(30)]
    out = engine.compress(messages)
    content = out[1]["content"]
    body = content.split("\n", 1)[1]
    assert len(body) <= 300 + len("… 28 more messages left out") + 1
    assert body.splitlines()[-1].endswith("more messages left out")
    assert content.startswith("[Summary of 28 earlier messages]")


def test_focus_topic_lines_come_first(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    messages = [
        user("hello"),
        user("the weather is nice"),
        assistant("the database migration failed"),
        user("lunch?"),
        calling(("d1", "query_database", {"sql": "select 1"})),
        answer("d1", "1"),
        assistant("bye"),
    ]
    out = engine.compress(messages, focus_topic="Database")
    lines = out[1]["content"].splitlines()
    assert lines[1] == "Focus: Database"
    assert lines[2] == "Messages about Database:"
    assert lines[3] == "- assistant: the database migration failed"
    assert lines[4].startswith("- assistant: [called query_database(")
    assert lines[5] == "Other messages:"
    assert lines[6:] == ["- user: the weather is nice", "- user: lunch?", "- tool: 1"]


def test_focus_topic_nobody_mentioned(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    out = engine.compress(chat(5), focus_topic="kubernetes")
    assert "No message mentioned kubernetes." in out[1]["content"]
    assert "- assistant: answer 1" in out[1]["content"]


def test_model_summarizer_asks_a_real_model_client(Engine: type, engine_module: Any, tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- The user compared two databases and chose SQLite.\n", encoding="utf-8")
    requests: list[dict[str, Any]] = []

    class Hooks:
        def invoke_hook(self, name: str, **kwargs: Any) -> list[Any]:
            if name == "pre_api_request":
                requests.append(kwargs["request"])
            return []

    transport = ScriptedTransport(script, hooks=Hooks())
    engine = Engine(protect_first_n=1, protect_last_n=1)
    engine.summarizer = engine_module.model_summarizer(lambda: transport)  # built lazily
    messages = [user("hi"), user("Postgres or SQLite?"), assistant("SQLite for a single file."), user("ok")]
    out = engine.compress(messages, focus_topic="databases")
    assert out[1]["content"] == (
        "[Summary of 2 earlier messages]\nThe user compared two databases and chose SQLite."
    )
    assert len(requests) == 1
    sent = requests[0]["messages"]
    assert sent[0]["role"] == "system"
    assert "user: Postgres or SQLite?" in sent[1]["content"]
    assert "assistant: SQLite for a single file." in sent[1]["content"]
    assert "databases" in sent[1]["content"]
    assert "user: hi" not in sent[1]["content"]


def test_use_model_summarises_with_the_configured_model(kernel_of: Callable[..., Kernel], home: Path) -> None:
    (home / "turns.yaml").write_text("- Two questions about caching were answered.\n", encoding="utf-8")
    k = kernel_of({"model": {"provider": "scripted", "script": "turns.yaml"}})
    engine = k.providers.context_engine()
    engine.protect_first_n, engine.protect_last_n = 1, 1
    engine.use_model(k.providers.model)  # the client is built at the first summary
    out = engine.compress(chat(6))
    assert out[1]["content"] == "[Summary of 4 earlier messages]\nTwo questions about caching were answered."
    assert engine.last_summary_source == "summarizer"
    assert k.providers.model().remaining == 0
    # the script is exhausted: the scripted model says so, and that reply is what the summary holds
    again = engine.compress(chat(6))
    assert again[1]["content"].startswith("[Summary of 4 earlier messages]\n")


# --------------------------------------------------------------------------
# compress: when nothing is done
# --------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 5, 9])
def test_too_short_conversations_come_back_unchanged(Engine: type, count: int) -> None:
    engine = Engine()  # 3 + 6 protected
    messages = [system(), *chat(count)]
    out = engine.compress(messages, force=True)
    assert out == messages and out is not messages
    assert engine.compression_count == 0


def test_a_one_message_middle_needs_force(Engine: type) -> None:
    engine = Engine()
    messages = chat(10)
    assert engine.compress(messages) == messages
    assert engine.compression_count == 0
    out = engine.compress(messages, force=True)
    assert out[3] == {"role": "user", "content": "[Summary of 1 earlier message]\n- assistant: answer 3"}
    assert len(out) == 10
    assert engine.compression_count == 1


def test_below_the_threshold_only_force_compresses(Engine: type) -> None:
    engine = Engine(context_length=1000)  # threshold 750
    messages = chat(20)
    assert engine.compress(messages, current_tokens=100) == messages
    assert engine.compression_count == 0
    assert len(engine.compress(messages, current_tokens=750)) == 10
    assert len(engine.compress(messages, current_tokens=100, force=True)) == 10
    assert len(engine.compress(messages)) == 10  # no count given: the caller decided
    assert engine.compression_count == 3


def test_compressing_a_compressed_conversation_again(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=2)
    once = engine.compress(chat(10))
    twice = engine.compress([*once, *chat(4, 50)])
    assert twice[0] == once[0]
    assert twice[1]["content"].startswith("[Summary of 5 earlier messages]")
    assert "[Summary of 7 earlier messages]" in twice[1]["content"]
    assert engine.compression_count == 2


def test_extra_keyword_arguments_are_accepted(Engine: type) -> None:
    engine = Engine(protect_first_n=1, protect_last_n=1)
    out = engine.compress(chat(5), memory_context="remembered things")
    assert len(out) == 3


# --------------------------------------------------------------------------
# Token bookkeeping
# --------------------------------------------------------------------------


def test_should_compress_uses_the_argument_or_the_last_prompt(Engine: type) -> None:
    engine = Engine(context_length=10_000, threshold_percent=0.5)
    assert engine.threshold_tokens == 5000
    assert not engine.should_compress()
    assert not engine.should_compress(4999)
    assert engine.should_compress(5000)
    engine.update_from_response({"input_tokens": 6000, "output_tokens": 10})
    assert engine.should_compress()
    assert not engine.should_compress(10)
    engine.update_from_response({"input_tokens": 100})
    assert not engine.should_compress()


def test_update_from_response_reads_both_spellings(Engine: type) -> None:
    engine = Engine()
    engine.update_from_response({"input_tokens": 120, "output_tokens": 30, "total_tokens": 155})
    assert (engine.last_prompt_tokens, engine.last_completion_tokens, engine.last_total_tokens) == (
        120,
        30,
        155,
    )
    engine.update_from_response({"prompt_tokens": 7, "completion_tokens": 3})
    assert (engine.last_prompt_tokens, engine.last_completion_tokens, engine.last_total_tokens) == (7, 3, 10)
    engine.update_from_response(Usage(input_tokens=40, output_tokens=2, total_tokens=42))
    assert (engine.last_prompt_tokens, engine.last_completion_tokens, engine.last_total_tokens) == (40, 2, 42)
    engine.update_from_response({})
    assert (engine.last_prompt_tokens, engine.last_completion_tokens, engine.last_total_tokens) == (0, 0, 0)
    status = engine.get_status()
    assert status["name"] == "compressor" and status["last_prompt_tokens"] == 0
    assert status["compression_count"] == 0


def test_update_model_moves_the_threshold(Engine: type) -> None:
    engine = Engine(threshold_percent=0.5)
    engine.update_model("small-model", 8000)
    assert (engine.context_length, engine.threshold_tokens) == (8000, 4000)
    assert engine.should_compress(4000)


def test_constructor_validates(Engine: type) -> None:
    with pytest.raises(ValueError, match="threshold_percent"):
        Engine(threshold_percent=0)
    with pytest.raises(ValueError, match="protect_first_n"):
        Engine(protect_first_n=-1)
    other = Engine(protect_first_n=0, protect_last_n=0)
    out = other.compress(chat(4))
    assert out == [{"role": "user", "content": out[0]["content"]}]
    assert out[0]["content"].startswith("[Summary of 4 earlier messages]")
    # class defaults are not changed by an instance's settings
    assert Engine().protect_first_n == 3
