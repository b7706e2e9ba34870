"""The scripted model: replays assistant turns from a YAML file, offline and deterministic.

The script is a YAML list; each item is one assistant turn, either

* a string, the reply text, or
* a mapping with ``text`` and/or ``tool_calls``, a list of ``{name, arguments}``
  (``arguments``: a mapping, JSON-encoded for the call; a JSON object text is
  taken as it is; absent means ``{}``).  Tool call ids are ``call_<n>``,
  numbered from 1 across the whole script.  A mapping may also carry
  ``delay_s``, a number of seconds from 0 to 3600 (an int or a float; not a
  boolean, NaN or infinity; null or absent means no delay): the call that plays
  the turn waits that long, after the ``pre_api_request`` hook and before the
  ``post_api_request`` one, as a slow model would.  The wait holds no lock, so
  calls from several threads (or tasks) wait side by side.  ``delay_s`` alone
  is not a turn: it still needs ``text`` and/or ``tool_calls``.

Each ``complete`` / ``acomplete`` call returns the next turn, whatever the
messages say.  Once every turn has been played, every further call returns a
reply that says so (finish reason ``"script_exhausted"``), without delay: the
scripted model never makes anything up.  The script is read and checked when
the transport is made; a missing file, bad YAML (with its line and column), a
script that is not a list, or a malformed turn (a bad ``delay_s`` among them)
raises :class:`ProviderError` naming the file (and the turn, for a bad one).

Usage is a rough count: ``input_tokens`` is the number of whitespace-separated
words in the text of the messages sent, ``output_tokens`` the number of words
of the reply text plus those of each tool call's name and arguments; the cost
is 0.  The api hooks fire as for a real provider, with ``api_mode`` "scripted"
and ``base_url`` None.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..base.safe_yaml import load_yaml
from .calls import ApiCall, MiddlewareCalls
from .plan import Plan, Send, Wait, arun, run
from .request import ChatRequest
from .results import ChatResult, ProviderError, ToolCall, Usage

__all__ = ["ScriptedTransport"]

_TURN_KEYS = {"text", "tool_calls", "delay_s"}
# The longest wait a turn may ask for, in seconds.
MAX_DELAY_S = 3600
_CALL_KEYS = {"name", "arguments", "id"}


class ScriptedTransport(MiddlewareCalls):
    """Replays the turns of ``script_path``; thread-safe (each call takes the next turn)."""

    api_mode = "scripted"

    def __init__(
        self,
        script_path: Path | str,
        *,
        provider: str = "scripted",
        model: str = "scripted",
        hooks: Any = None,
    ) -> None:
        self.path = Path(script_path)
        self.provider = provider
        self.model = model
        self.hooks = hooks
        self.base_url: str | None = None
        self._next = 0
        self._lock = threading.Lock()
        # The wait of each turn that has one, by the turn's index in ``turns``.
        self._delays: dict[int, float] = {}
        self.turns: list[ChatResult] = self._load()

    def __repr__(self) -> str:
        return f"ScriptedTransport({str(self.path)!r}, played={self.played}/{len(self.turns)})"

    @property
    def played(self) -> int:
        """How many turns have been returned so far."""
        return min(self._next, len(self.turns))

    @property
    def remaining(self) -> int:
        return len(self.turns) - self.played

    def close(self) -> None:
        """Nothing to release; here for symmetry with the HTTP transport."""

    # -- loading ------------------------------------------------------------------

    def _fail(self, problem: str) -> ProviderError:
        return ProviderError(
            f"scripted model: script {self.path}: {problem}", provider=self.provider, model=self.model
        )

    def _load(self) -> list[ChatResult]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise self._fail("no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise self._fail(f"cannot be read ({type(exc).__name__}: {exc})") from None
        try:
            data = load_yaml(text)  # the C loader; alias bombs refused
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise self._fail(f"is not valid YAML{where}: {problem}") from None
        except (ValueError, RecursionError) as exc:
            # An integer too long to convert, collections nested too deep for the loader.
            raise self._fail(f"cannot be loaded ({type(exc).__name__}: {str(exc)[:200]})") from None
        if data is None:
            raise self._fail("is empty; expected a YAML list of assistant turns")
        if not isinstance(data, list):
            raise self._fail(f"must be a YAML list of assistant turns, not a {_kind(data)}")
        turns: list[ChatResult] = []
        counter = [0]
        for index, item in enumerate(data, start=1):
            turn, delay = self._turn(index, item, counter)
            if delay:
                self._delays[len(turns)] = delay
            turns.append(turn)
        return turns

    def _turn(self, index: int, item: Any, counter: list[int]) -> tuple[ChatResult, float]:
        """The turn numbered ``index`` (from 1) and its delay in seconds (0 for none)."""
        where = f"turn {index}"
        if isinstance(item, str):
            return self._result(item, [], "stop"), 0.0
        if not isinstance(item, dict):
            raise self._fail(
                f"{where} must be a string (the reply) or a mapping with 'text' and/or 'tool_calls', "
                f"not a {_kind(item)}"
            )
        unknown = sorted(str(k) for k in item if k not in _TURN_KEYS)
        if unknown:
            raise self._fail(
                f"{where} has unknown key(s) {', '.join(unknown)} (allowed: text, tool_calls, delay_s)"
            )
        if "text" not in item and "tool_calls" not in item:
            raise self._fail(f"{where} needs 'text' and/or 'tool_calls'")
        delay = self._delay(where, item.get("delay_s"))
        text = item.get("text")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise self._fail(f"{where}: 'text' must be a string, not a {_kind(text)}")
        raw_calls = item.get("tool_calls")
        if raw_calls is None:
            raw_calls = []
        if not isinstance(raw_calls, list):
            raise self._fail(f"{where}: 'tool_calls' must be a list of {{name, arguments}}")
        calls = []
        for number, raw in enumerate(raw_calls, start=1):
            calls.append(self._call(f"{where}, tool call {number}", raw, counter))
        return self._result(text, calls, "tool_calls" if calls else "stop"), delay

    def _delay(self, where: str, value: Any) -> float:
        """``delay_s`` checked: seconds from 0 to :data:`MAX_DELAY_S`, finite; None means 0."""
        if value is None:
            return 0.0
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (isinstance(value, int) or math.isfinite(value)) and 0 <= value <= MAX_DELAY_S:
                return float(value)
            shown = repr(value) if isinstance(value, float) or abs(value) < 10**30 else "a huge number"
        else:
            shown = f"a {_kind(value)}"
        raise self._fail(
            f"{where}: 'delay_s' must be a number of seconds from 0 to {MAX_DELAY_S}, not {shown}"
        )

    def _call(self, where: str, raw: Any, counter: list[int]) -> ToolCall:
        if not isinstance(raw, dict):
            raise self._fail(f"{where} must be a mapping with 'name' and 'arguments', not a {_kind(raw)}")
        unknown = sorted(str(k) for k in raw if k not in _CALL_KEYS)
        if unknown:
            raise self._fail(
                f"{where} has unknown key(s) {', '.join(unknown)} (allowed: name, arguments, id)"
            )
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self._fail(f"{where} needs a 'name' (the tool to call)")
        arguments = raw.get("arguments")
        if arguments is None:
            encoded = "{}"
        elif isinstance(arguments, dict):
            try:
                encoded = json.dumps(arguments, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise self._fail(f"{where} ('{name}'): arguments cannot be JSON-encoded: {exc}") from None
        elif isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = None
            if not isinstance(decoded, dict):
                raise self._fail(f"{where} ('{name}'): arguments given as text must be a JSON object")
            encoded = arguments
        else:
            raise self._fail(f"{where} ('{name}'): arguments must be a mapping, not a {_kind(arguments)}")
        counter[0] += 1
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{counter[0]}"
        return ToolCall(id=call_id, name=name, arguments=encoded)

    def _result(self, text: str, calls: list[ToolCall], finish_reason: str) -> ChatResult:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [call.as_dict() for call in calls]
        output = _words(text) + sum(_words(c.name) + _words(c.arguments) for c in calls)
        raw = {
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"completion_tokens": output},
        }
        return ChatResult(
            text=text,
            tool_calls=calls,
            usage=Usage(output_tokens=output, total_tokens=output, cost_usd=0.0),
            model=self.model,
            provider=self.provider,
            finish_reason=finish_reason,
            raw=raw,
        )

    # -- playing --------------------------------------------------------------------

    def _take(self, messages: Sequence[Mapping[str, Any]]) -> tuple[ChatResult, float]:
        """The next turn, as a fresh result, and how long to wait before returning it.

        The lock is held only to take the index: the caller waits outside it.
        """
        with self._lock:
            index = self._next
            self._next += 1
        delay = 0.0
        if index < len(self.turns):
            turn = self.turns[index]
            delay = self._delays.get(index, 0.0)
        else:
            count = len(self.turns)
            turn = self._result(
                f"[scripted model] the script {self.path.name} has no more turns "
                f"({count} {'was' if count == 1 else 'were'} played)",
                [],
                "script_exhausted",
            )
        input_tokens = sum(_message_words(m) for m in messages)
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=turn.usage.output_tokens,
            total_tokens=input_tokens + turn.usage.output_tokens,
            cost_usd=0.0,
        )
        raw = json.loads(json.dumps(turn.raw))
        raw["usage"] = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        }
        result = ChatResult(
            text=turn.text,
            tool_calls=[ToolCall(c.id, c.name, c.arguments) for c in turn.tool_calls],
            usage=usage,
            model=self.model,
            provider=self.provider,
            finish_reason=turn.finish_reason,
            raw=raw,
        )
        return result, delay

    def _request(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.extra_body:
            body.update(request.extra_body)
        body["script"] = str(self.path)
        return body

    def _plan(self, request: ChatRequest) -> Plan:
        """The next scripted turn, after its ``delay_s``, between the api hooks (the request is only
        shown to them)."""
        call = ApiCall(
            session_id=request.session_id,
            task_id=request.task_id,
            turn_id=request.turn_id,
            model=self.model,
            provider=self.provider,
            base_url=None,
            api_mode=self.api_mode,
            request=self._request(request),
        )
        yield call.pre()
        result, delay = self._take(request.messages)
        if delay:
            yield Wait(delay)
        yield call.post(result)
        return result

    def _complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """The next scripted turn (see :meth:`_plan`)."""
        return run(self._plan(ChatRequest.of(messages, kwargs)), self.hooks, _no_send, time.sleep)

    async def _acomplete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ChatResult:
        """As :meth:`complete`, awaiting async hook callbacks and the turn's ``delay_s``."""
        return await arun(self._plan(ChatRequest.of(messages, kwargs)), self.hooks, _ano_send, asyncio.sleep)


def _no_send(step: Send) -> None:
    raise AssertionError("the scripted model sends nothing")


async def _ano_send(step: Send) -> None:
    _no_send(step)


def _kind(value: Any) -> str:
    names = {dict: "mapping", list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), type(value).__name__)


def _words(text: str) -> int:
    return len(text.split()) if text else 0


def _message_words(message: Mapping[str, Any]) -> int:
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return _words(content)
    if isinstance(content, list):
        return sum(
            _words(part["text"]) if isinstance(part, dict) and isinstance(part.get("text"), str) else 0
            for part in content
        )
    return 0
