"""The scripted model: YAML turns replayed in order, honest exhaustion, clear errors, api hooks."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from kernel import hookimpl
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
        ("- {txt: typo}\n", "turn 1 has unknown key(s) txt"),
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
