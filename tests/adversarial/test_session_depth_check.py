"""The depth check a session record passes before ``json.loads`` (kernel/gateway/sessions.py): the same
verdict as walking the text character by character (the oracle below), on any text, hostile or not;
strings may hold any bracket, quote and escape without counting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.gateway.sessions import MAX_STATE_DEPTH, read_json_object


def deeper_than_allowed(text: str) -> bool:
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_STATE_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def refused_for_depth(text: str) -> bool:
    try:
        read_json_object(text, 10**7)
    except ValueError as exc:
        return "nested deeper" in str(exc)
    return False


TOKENS = st.sampled_from(
    ['"', "\\", "[", "]", "{", "}", "a", ",", ":", '\\"', "\\\\", "\n", "\x00", "\ud800"]
)


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.lists(TOKENS, max_size=400), st.integers(0, 80), st.booleans())
def test_any_text_gets_the_verdict_of_the_character_walk(parts: list[str], extra: int, close: bool) -> None:
    """On JSON, the verdict is the walk's; on text that is not JSON (an unterminated string, which the
    walk stops counting at) the record is refused all the same, never a crash."""
    text = "[" * extra + "".join(parts) + ("]" * extra if close else "")
    if is_json(text):
        assert refused_for_depth(text) == deeper_than_allowed(text)
    else:
        with pytest.raises(ValueError):
            read_json_object(text, 10**7)


@given(st.recursive(st.text(alphabet='[]{}"\\a'), lambda inner: st.lists(inner, max_size=2), max_leaves=120))
@settings(max_examples=200, deadline=None)
def test_json_documents_nested_at_random_get_the_walks_verdict(value: object) -> None:
    text = json.dumps({"v": value})
    assert refused_for_depth(text) == deeper_than_allowed(text)


@pytest.mark.parametrize("depth", [MAX_STATE_DEPTH, MAX_STATE_DEPTH + 1])
def test_the_bound_is_exact_and_brackets_in_strings_do_not_count(depth: int) -> None:
    filler = {"content": "[[[{{{" * 50 + '\\"]' * 30}
    value: object = filler
    for _ in range(depth - 1):
        value = [value]
    text = json.dumps(value)
    assert refused_for_depth(text) is (depth > MAX_STATE_DEPTH)


def test_a_big_conversation_is_read_with_its_strings_full_of_brackets() -> None:
    messages = [{"role": "user", "content": "{[" * 1000 + '"' + "\\" * 7} for _ in range(300)]
    text = json.dumps({"session_id": "s", "messages": messages})
    assert read_json_object(text, 10**7)["messages"] == messages
