"""The scripted model: YAML turns replayed in order, honest exhaustion, clear errors, api hooks."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from kernel import hookimpl
from kernel.agent import AgentSession
from kernel.providers import scripted as scripted_module
from kernel.providers.scripted import ScriptedTransport
from kernel.providers.transport import ChatResult, ProviderError

SCRIPT = """\
# a conversation with a calculator
- Hello! I can add numbers.
- text: Let me add those.
  tool_calls:
    - name: add
      arguments: {a: 2, b: 3}
- tool_calls:
    - name: now
    - name: lookup
      arguments: '{"q": "ünïcode"}'
- text: The sum is 5.
"""


def write(tmp_path: Path, text: str, name: str = "script.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


USER = [{"role": "user", "content": "please add two and three"}]


def test_turns_are_replayed_in_order(tmp_path: Path) -> None:
    transport = ScriptedTransport(write(tmp_path, SCRIPT))
    assert transport.played == 0 and transport.remaining == 4

    first = transport.complete(USER)
    assert isinstance(first, ChatResult)
    assert first.text == "Hello! I can add numbers."
    assert first.tool_calls == []
    assert first.finish_reason == "stop"
    assert first.model == "scripted" and first.provider == "scripted"
    assert first.as_message() == {"role": "assistant", "content": "Hello! I can add numbers."}

    second = transport.complete(USER)
    assert second.text == "Let me add those."
    assert second.finish_reason == "tool_calls"
    [add] = second.tool_calls
    assert (add.id, add.name) == ("call_1", "add")
    assert add.parsed() == {"a": 2, "b": 3}
    assert json.loads(add.arguments) == {"a": 2, "b": 3}
    assert second.as_message()["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": add.arguments}}
    ]

    third = transport.complete(USER)
    assert third.text == ""
    assert [(c.id, c.name) for c in third.tool_calls] == [("call_2", "now"), ("call_3", "lookup")]
    assert third.tool_calls[0].parsed() == {}
    assert third.tool_calls[1].parsed() == {"q": "ünïcode"}

    fourth = transport.complete(USER)
    assert fourth.text == "The sum is 5."
    assert transport.played == 4 and transport.remaining == 0


def test_exhausted_script_says_so_and_invents_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, "- only one\n- and two\n", name="short.yaml")
    transport = ScriptedTransport(path)
    assert [transport.complete(USER).text for _ in range(2)] == ["only one", "and two"]
    for _ in range(2):
        result = transport.complete(USER)
        assert result.finish_reason == "script_exhausted"
        assert result.tool_calls == []
        assert result.text == "[scripted model] the script short.yaml has no more turns (2 were played)"
    assert transport.played == 2


def test_an_empty_list_is_exhausted_at_once(tmp_path: Path) -> None:
    transport = ScriptedTransport(write(tmp_path, "[]\n"))
    result = transport.complete(USER)
    assert result.finish_reason == "script_exhausted"
    assert "no more turns (0 were played)" in result.text


def test_usage_counts_words(tmp_path: Path) -> None:
    transport = ScriptedTransport(write(tmp_path, SCRIPT), model="script-v1")
    messages = [
        {"role": "system", "content": "you are terse"},
        {"role": "user", "content": [{"type": "text", "text": "add two numbers"}]},
        {"role": "assistant", "content": None},
    ]
    result = transport.complete(messages)
    assert result.model == "script-v1"
    assert result.usage.input_tokens == 6
    assert result.usage.output_tokens == 5  # "Hello! I can add numbers."
    assert result.usage.total_tokens == 11
    assert result.usage.cost_usd == 0.0
    assert result.raw["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11}


def test_results_are_independent_copies(tmp_path: Path) -> None:
    path = write(tmp_path, "- text: a\n  tool_calls: [{name: t, arguments: {x: 1}}]\n")
    first = ScriptedTransport(path).complete(USER)
    first.tool_calls[0].arguments = "changed"
    first.raw["choices"].clear()
    again = ScriptedTransport(path).complete(USER)
    assert again.tool_calls[0].parsed() == {"x": 1}
    assert again.raw["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "t"


def test_concurrent_calls_take_each_turn_once(tmp_path: Path) -> None:
    turns = "".join(f"- turn {i}\n" for i in range(40))
    transport = ScriptedTransport(write(tmp_path, turns))
    got: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(6):
            text = transport.complete(USER).text
            with lock:
                got.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    played = [t for t in got if t.startswith("turn ")]
    assert sorted(played) == sorted(f"turn {i}" for i in range(40))
    assert len(got) == 48
    assert sum("no more turns (40 were played)" in t for t in got) == 8


def test_acomplete_with_gather(tmp_path: Path) -> None:
    transport = ScriptedTransport(write(tmp_path, "- one\n- two\n- three\n"))

    async def main() -> list[ChatResult]:
        return await asyncio.gather(*(transport.acomplete(USER) for _ in range(4)))

    texts = [r.text for r in asyncio.run(main())]
    assert sorted(t for t in texts if not t.startswith("[scripted model]")) == ["one", "three", "two"]
    assert sum("no more turns (3 were played)" in t for t in texts) == 1


# --------------------------------------------------------------------------
# Bad scripts
# --------------------------------------------------------------------------


def test_missing_script_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    assert str(path) in str(info.value)
    assert "no such file" in str(info.value)
    assert info.value.provider == "scripted"


def test_malformed_yaml_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '- fine\n- text: "unterminated\n- other\n')
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    message = str(info.value)
    assert str(path) in message
    assert "not valid YAML" in message
    assert "line " in message and "column " in message


def test_yaml_error_position_is_the_offending_line(tmp_path: Path) -> None:
    path = write(tmp_path, "- one\n- two\n  bad: indent\n")
    with pytest.raises(ProviderError, match=r"line 3, column \d+"):
        ScriptedTransport(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("text: hello\n", "must be a YAML list of assistant turns, not a mapping"),
        ("just a string\n", "must be a YAML list of assistant turns, not a string"),
        ("- ok\n- 42\n", "turn 2 must be a string (the reply) or a mapping"),
        ("- ok\n- [a, b]\n", "turn 2 must be a string"),
        ("- {}\n", "turn 1 needs 'text' and/or 'tool_calls'"),
        ("- {txt: typo}\n", "turn 1 has unknown key(s) txt (allowed: text, tool_calls, delay_s)"),
        ("- {delay_s: 0.5}\n", "turn 1 needs 'text' and/or 'tool_calls'"),
        ("- ok\n- {delay_s: 0}\n", "turn 2 needs 'text' and/or 'tool_calls'"),
        ("- {text: [1]}\n", "turn 1: 'text' must be a string"),
        ("- {tool_calls: {name: add}}\n", "turn 1: 'tool_calls' must be a list"),
        ("- {tool_calls: [add]}\n", "turn 1, tool call 1 must be a mapping"),
        ("- {tool_calls: [{arguments: {}}]}\n", "turn 1, tool call 1 needs a 'name'"),
        ("- {tool_calls: [{name: add, arguments: [1, 2]}]}\n", "arguments must be a mapping"),
        ("- {tool_calls: [{name: add, arguments: 'not json'}]}\n", "must be a JSON object"),
        ("- {tool_calls: [{name: add, args: {}}]}\n", "unknown key(s) args"),
    ],
)
def test_bad_scripts_are_provider_errors_naming_the_file(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text, name="bad-script.yaml")
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    message = str(info.value)
    assert str(path) in message
    assert expected in message


# --------------------------------------------------------------------------
# Hooks
# --------------------------------------------------------------------------


class ApiRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    def pre_api_request(
        self,
        api_request_id,
        session_id,
        task_id,
        model,
        provider,
        base_url,
        api_mode,
        request_messages,
        request,
    ):
        self.calls.append(("pre", dict(locals(), self=None)))

    @hookimpl
    def post_api_request(self, api_request_id, model, api_mode, base_url, response, usage, duration_ms):
        self.calls.append(("post", dict(locals(), self=None)))

    @hookimpl
    def api_request_error(self, api_request_id):
        self.calls.append(("error", dict(locals(), self=None)))


def test_api_hooks_fire_for_each_call(tmp_path: Path, make_kernel) -> None:
    k = make_kernel()
    recorder = ApiRecorder()
    k.register(recorder, name="api-recorder")
    transport = ScriptedTransport(write(tmp_path, SCRIPT), hooks=k, model="script-v1")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    transport.complete(USER, tools=tools, session_id="sess-9", task_id="task-9")
    asyncio.run(transport.acomplete(USER, session_id="sess-9"))

    assert [n for n, _ in recorder.calls] == ["pre", "post", "pre", "post"]
    pre1, post1, pre2, post2 = (kw for _, kw in recorder.calls)
    assert pre1["api_request_id"] == post1["api_request_id"]
    assert pre2["api_request_id"] == post2["api_request_id"]
    assert pre1["api_request_id"] != pre2["api_request_id"]
    assert pre1["api_mode"] == "scripted"
    assert pre1["base_url"] is None
    assert pre1["provider"] == "scripted"
    assert pre1["model"] == "script-v1"
    assert pre1["session_id"] == "sess-9"
    assert pre1["task_id"] == "task-9"
    assert pre2["task_id"] is None
    assert pre1["request_messages"] == USER
    assert pre1["request"]["tools"] == tools
    assert post1["response"]["choices"][0]["message"]["content"] == "Hello! I can add numbers."
    assert post2["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "add"
    assert post1["usage"]["output_tokens"] == 5
    assert isinstance(post1["duration_ms"], int)


# --------------------------------------------------------------------------
# delay_s: turns that take time
# --------------------------------------------------------------------------


class SleepSpy:
    """Stands in for the ``time`` and ``asyncio`` modules of kernel.providers.scripted: records
    each wait (``(seconds, entered, left)``, monotonic times) and really waits."""

    def __init__(self) -> None:
        self.waits: list[tuple[float, float, float]] = []
        self._lock = threading.Lock()

    def _record(self, seconds: float, entered: float) -> None:
        with self._lock:
            self.waits.append((seconds, entered, time.monotonic()))

    def time(self) -> types.SimpleNamespace:
        def sleep(seconds: float) -> None:
            entered = time.monotonic()
            time.sleep(seconds)
            self._record(seconds, entered)

        return types.SimpleNamespace(**{**vars(time), "sleep": sleep})

    def asyncio(self) -> types.SimpleNamespace:
        async def sleep(seconds: float) -> None:
            entered = time.monotonic()
            await asyncio.sleep(seconds)
            self._record(seconds, entered)

        return types.SimpleNamespace(**{**vars(asyncio), "sleep": sleep})


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> SleepSpy:
    spy = SleepSpy()
    monkeypatch.setattr(scripted_module, "time", spy.time())
    monkeypatch.setattr(scripted_module, "asyncio", spy.asyncio())
    return spy


DELAYED = """\
- text: Thinking slowly.
  delay_s: 0.3
- Quick answer.
- text: Calling slowly.
  delay_s: 0.3
  tool_calls:
    - name: add
      arguments: {a: 1, b: 2}
"""


def test_a_turn_with_delay_s_takes_at_least_that_long(tmp_path: Path, sleeps: SleepSpy) -> None:
    transport = ScriptedTransport(write(tmp_path, DELAYED))
    started = time.monotonic()
    slow = transport.complete(USER)
    assert time.monotonic() - started >= 0.3
    assert slow.text == "Thinking slowly." and slow.finish_reason == "stop"
    assert [w[0] for w in sleeps.waits] == [0.3]

    quick = transport.complete(USER)
    assert quick.text == "Quick answer."
    assert len(sleeps.waits) == 1  # no wait for a turn without delay_s

    started = time.monotonic()
    calling = transport.complete(USER)
    assert time.monotonic() - started >= 0.3
    assert calling.text == "Calling slowly."
    assert [(c.id, c.name, c.parsed()) for c in calling.tool_calls] == [("call_1", "add", {"a": 1, "b": 2})]
    # delay_s is not part of the result the caller gets
    assert "delay_s" not in json.dumps(calling.raw)

    exhausted = transport.complete(USER)
    assert exhausted.finish_reason == "script_exhausted"
    assert [w[0] for w in sleeps.waits] == [0.3, 0.3]  # the exhausted reply has no delay


def test_acomplete_waits_the_delay_too(tmp_path: Path, sleeps: SleepSpy) -> None:
    transport = ScriptedTransport(write(tmp_path, DELAYED))

    async def main() -> tuple[float, list[str]]:
        started = time.monotonic()
        slow = await transport.acomplete(USER)
        elapsed = time.monotonic() - started
        rest = [(await transport.acomplete(USER)).text for _ in range(2)]
        return elapsed, [slow.text, *rest]

    elapsed, texts = asyncio.run(main())
    assert elapsed >= 0.3
    assert texts == ["Thinking slowly.", "Quick answer.", "Calling slowly."]
    assert [w[0] for w in sleeps.waits] == [0.3, 0.3]


@pytest.mark.parametrize("value", ["0", "0.0", "-0.0", "null", "3600", "3600.0", "0.001", "1_0"])
def test_good_delays_are_accepted(tmp_path: Path, value: str) -> None:
    transport = ScriptedTransport(write(tmp_path, f"- text: ok\n  delay_s: {value}\n"))
    assert transport.remaining == 1
    assert transport.turns[0].text == "ok"


def test_a_zero_or_null_delay_does_not_wait(tmp_path: Path, sleeps: SleepSpy) -> None:
    transport = ScriptedTransport(write(tmp_path, "- {text: a, delay_s: 0}\n- {text: b, delay_s: null}\n"))
    assert [transport.complete(USER).text for _ in range(2)] == ["a", "b"]
    assert sleeps.waits == []


def test_the_api_hooks_see_the_delay_inside_the_call(tmp_path: Path, make_kernel) -> None:
    k = make_kernel()
    seen: list[tuple[str, float, int | None]] = []

    class Clock:
        @hookimpl
        def pre_api_request(self, api_request_id):
            seen.append(("pre", time.monotonic(), None))

        @hookimpl
        def post_api_request(self, api_request_id, duration_ms):
            seen.append(("post", time.monotonic(), duration_ms))

    k.register(Clock(), name="clock")
    transport = ScriptedTransport(write(tmp_path, DELAYED), hooks=k)
    transport.complete(USER)
    asyncio.run(transport.acomplete(USER))
    asyncio.run(transport.acomplete(USER))

    assert [name for name, _, _ in seen] == ["pre", "post"] * 3
    (_, pre1, _), (_, post1, ms1), _, _, (_, pre3, _), (_, post3, ms3) = seen
    assert post1 - pre1 >= 0.3 and ms1 is not None and ms1 >= 300  # sync
    assert post3 - pre3 >= 0.3 and ms3 is not None and ms3 >= 300  # async


def test_delayed_turns_from_two_threads_wait_side_by_side(
    tmp_path: Path, make_kernel, sleeps: SleepSpy
) -> None:
    k = make_kernel()
    spans: dict[str, list[float]] = {}
    lock = threading.Lock()

    class Clock:
        @hookimpl
        def pre_api_request(self, api_request_id):
            with lock:
                spans[api_request_id] = [time.monotonic()]

        @hookimpl
        def post_api_request(self, api_request_id):
            with lock:
                spans[api_request_id].append(time.monotonic())

    k.register(Clock(), name="clock")
    script = "- {text: first, delay_s: 0.5}\n- {text: second, delay_s: 0.5}\n"
    transport = ScriptedTransport(write(tmp_path, script), hooks=k)
    texts: list[str] = []
    start = threading.Barrier(2)

    def worker() -> None:
        start.wait()
        text = transport.complete(USER).text
        with lock:
            texts.append(text)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(texts) == ["first", "second"]
    # Each call began (pre hook) before either ended (post hook) ...
    (start_a, end_a), (start_b, end_b) = spans.values()
    assert max(start_a, start_b) < min(end_a, end_b)
    # ... and, what a lock held through the wait would break, the waits themselves overlapped.
    (_, entered_a, left_a), (_, entered_b, left_b) = sleeps.waits
    assert max(entered_a, entered_b) < min(left_a, left_b)


def test_delayed_turns_in_gather_wait_side_by_side(tmp_path: Path) -> None:
    script = "- {text: first, delay_s: 0.5}\n- {text: second, delay_s: 0.5}\n"
    transport = ScriptedTransport(write(tmp_path, script))
    spans: list[tuple[float, float]] = []

    async def timed() -> str:
        started = time.monotonic()
        result = await transport.acomplete(USER)
        spans.append((started, time.monotonic()))
        return result.text

    async def main() -> list[str]:
        return await asyncio.gather(timed(), timed())

    assert sorted(asyncio.run(main())) == ["first", "second"]
    (start_a, end_a), (start_b, end_b) = spans
    assert max(start_a, start_b) < min(end_a, end_b)  # the wait does not block the event loop


DELAY_MESSAGE = "turn 2: 'delay_s' must be a number of seconds from 0 to 3600, not "


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("'0.5'", "a string"),
        ("half", "a string"),
        ("1e3", "a string"),  # YAML 1.1 reads this as text
        ("-1", "-1"),
        ("-0.5", "-0.5"),
        ("-.inf", "-inf"),
        (".nan", "nan"),
        (".inf", "inf"),
        ("3601", "3601"),
        ("3600.5", "3600.5"),
        ("true", "a boolean"),
        ("false", "a boolean"),
        ("[0.5]", "a list"),
        ("{s: 1}", "a mapping"),
        ("9" * 40, "a huge number"),
        ("2024-01-01", "a date"),
    ],
)
def test_bad_delays_are_refused_naming_file_and_turn(tmp_path: Path, value: str, shown: str) -> None:
    path = write(tmp_path, f"- fine\n- text: slow\n  delay_s: {value}\n", name="bad-delay.yaml")
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    message = str(info.value)
    assert message == f"scripted model: script {path}: {DELAY_MESSAGE}{shown}"
    assert info.value.provider == "scripted"


def test_delay_s_on_a_string_turn_is_not_a_thing(tmp_path: Path) -> None:
    # a reply string cannot carry a delay; "delay_s: 1" alone is a mapping with no text
    path = write(tmp_path, "- delay_s: 1\n")
    with pytest.raises(ProviderError, match=r"turn 1 needs 'text' and/or 'tool_calls'"):
        ScriptedTransport(path)


def test_hostile_delay_values_are_provider_errors(tmp_path: Path) -> None:
    # an integer too long for Python to convert is refused, not a bare ValueError
    path = write(tmp_path, "- text: slow\n  delay_s: " + "9" * 5000 + "\n", name="huge.yaml")
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    assert str(path) in str(info.value) and "cannot be loaded" in str(info.value)
    assert len(str(info.value)) < 600
    # nesting too deep for the YAML loader
    path = write(tmp_path, "- text: slow\n  delay_s: " + "[" * 5000 + "]" * 5000 + "\n", name="deep.yaml")
    with pytest.raises(ProviderError) as info:
        ScriptedTransport(path)
    assert str(path) in str(info.value)
    # an alias to a good number is a good number; an alias to a list is refused
    path = write(tmp_path, "- {text: a, delay_s: &d 0}\n- {text: b, delay_s: *d}\n", name="alias.yaml")
    assert ScriptedTransport(path).remaining == 2
    path = write(tmp_path, "- {text: a, tool_calls: &c []}\n- {text: b, delay_s: *c}\n", name="alias2.yaml")
    with pytest.raises(ProviderError, match=r"turn 2: 'delay_s' must be .* not a list"):
        ScriptedTransport(path)


def test_many_threads_each_turn_once_with_delays(tmp_path: Path, sleeps: SleepSpy) -> None:
    script = "".join(f"- {{text: turn {i}, delay_s: 0.05}}\n" for i in range(12))
    transport = ScriptedTransport(write(tmp_path, script))
    got: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(4):
            text = transport.complete(USER).text
            with lock:
                got.append(text)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(t for t in got if t.startswith("turn ")) == sorted(f"turn {i}" for i in range(12))
    assert sum("no more turns (12 were played)" in t for t in got) == 4
    assert [w[0] for w in sleeps.waits] == [0.05] * 12  # one wait per played turn, none when exhausted


def test_a_delayed_turn_through_a_real_kernel(
    home: Path, make_kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_BUNDLED_PLUGINS", str(REPO / "extensions"))  # the bundled scripted provider
    (home / "slow.yaml").write_text(
        "- text: Let me compute that, slowly.\n"
        "  delay_s: 0.3\n"
        "  tool_calls:\n"
        "    - name: calculate\n"
        "      arguments: {expression: '6 * 7'}\n"
        "- text: 6 * 7 = 42.\n"
        "  delay_s: 0.2\n",
        encoding="utf-8",
    )
    k = make_kernel({"model": {"provider": "scripted", "script": str(home / "slow.yaml")}})
    recorder = ApiRecorder()
    k.register(recorder, name="api-recorder")
    with AgentSession(k) as session:
        started = time.monotonic()
        result = session.run("What is 6 * 7?")
        elapsed = time.monotonic() - started
    assert result.reply == "6 * 7 = 42."
    assert [c.name for c in result.tool_calls] == ["calculate"]
    assert json.loads(result.tool_calls[0].result)["result"] == 42
    assert elapsed >= 0.5
    posts = [kw for name, kw in recorder.calls if name == "post"]
    assert [p["api_mode"] for p in posts] == ["scripted", "scripted"]
    assert posts[0]["duration_ms"] >= 300 and posts[1]["duration_ms"] >= 200
