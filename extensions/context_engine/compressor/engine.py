"""The ``compressor`` context engine: keep the ends of the conversation, summarise the middle.

The protected parts of a conversation are

* every ``system`` message (none is ever removed; each keeps its place),
* the first ``protect_first_n`` non-system messages (the head), and
* the last ``protect_last_n`` non-system messages (the tail).

Everything between the head and the tail (the middle) is replaced by ONE
``user`` message whose content starts with ``[Summary of N earlier messages]``.
The summary comes from :attr:`CompressorEngine.summarizer` when one is set (a
function ``(middle_messages, focus_topic) -> str``, typically backed by the
active model, see :func:`model_summarizer`), else from a deterministic extract
of the middle (:func:`extract_summary`).  A summarizer that raises or returns
nothing usable falls back to the extract.

An assistant message with ``tool_calls`` and the ``tool`` messages answering it
form one block that is never split: the head grows forward and the tail grows
backward until no block straddles a cut.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernel import ContextEngine

__all__ = [
    "SUMMARY_PREFIX",
    "CompressorEngine",
    "Summarizer",
    "extract_summary",
    "model_summarizer",
    "render_message",
    "split_blocks",
    "summary_header",
]

logger = logging.getLogger(__name__)

#: ``(middle_messages, focus_topic) -> summary text``.
Summarizer = Callable[[list[dict[str, Any]], str | None], str]

SUMMARY_PREFIX = "[Summary of {n} earlier messages]"


def summary_header(count: int) -> str:
    """``[Summary of N earlier messages]`` (``message`` when N is 1): the summary message's first line."""
    return "[Summary of 1 earlier message]" if count == 1 else SUMMARY_PREFIX.format(n=count)


SUMMARIZE_INSTRUCTIONS = (
    "You compress the middle of a conversation between a user, an AI assistant and its tools. "
    "Write a concise summary of the transcript you are given that keeps every fact, decision, "
    "file name, number, open question and tool result the rest of the conversation may rely on. "
    "Write plain text without a preamble."
)


# --------------------------------------------------------------------------
# Rendering messages as text
# --------------------------------------------------------------------------


def _text(content: Any) -> str:
    """The text of a message's ``content``: a string, or a list of parts (text kept, others named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
                else:
                    pieces.append(f"[{part.get('type', 'part')}]")
            else:
                pieces.append(str(part))
        return " ".join(pieces)
    return str(content)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def _call_text(call: Any, limit: int) -> str:
    """``name(arguments)`` for one tool call (OpenAI shape or flat ``{name, arguments}``)."""
    if not isinstance(call, Mapping):
        return _shorten(str(call), limit)
    body = call.get("function") if isinstance(call.get("function"), Mapping) else call
    name = body.get("name") or "?"
    arguments = body.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    return f"{name}({_shorten(arguments, limit)})"


def render_message(message: Mapping[str, Any], limit: int = 200) -> str:
    """One line for one message: ``role: text`` (at most ``limit`` characters of text), tool calls named."""
    role = str(message.get("role") or "?")
    label = role
    if role == "tool" and message.get("name"):
        label = f"tool {message['name']}"
    text = _shorten(_text(message.get("content")), limit)
    calls = message.get("tool_calls") or []
    if calls:
        called = "; ".join(_call_text(call, limit) for call in calls)
        text = f"{text} [called {called}]" if text else f"[called {called}]"
    return f"{label}: {text}" if text else f"{label}: (empty)"


def _mentions(message: Mapping[str, Any], topic: str) -> bool:
    wanted = topic.casefold()
    if wanted in _text(message.get("content")).casefold():
        return True
    return any(wanted in _call_text(call, 10_000).casefold() for call in message.get("tool_calls") or [])


def extract_summary(
    messages: Sequence[Mapping[str, Any]],
    focus_topic: str | None = None,
    *,
    per_message: int = 200,
    max_chars: int = 4000,
) -> str:
    """A deterministic summary: one line per message, those mentioning ``focus_topic`` first.

    Each line is the role and the first ``per_message`` characters of the text
    (tool calls as ``name(arguments)``); lines stop before the total passes
    ``max_chars`` and a last line says how many were left out.
    """
    topic = (focus_topic or "").strip()
    focused = [m for m in messages if topic and _mentions(m, topic)]
    others = [m for m in messages if not (topic and _mentions(m, topic))]
    lines: list[str] = []
    if topic:
        lines.append(f"Focus: {topic}")
        if focused:
            lines.append(f"Messages about {topic}:")
            lines += [f"- {render_message(m, per_message)}" for m in focused]
        else:
            lines.append(f"No message mentioned {topic}.")
        if others:
            lines.append("Other messages:")
    lines += [f"- {render_message(m, per_message)}" for m in others]
    out: list[str] = []
    size = 0
    bullets_total = sum(1 for line in lines if line.startswith("- "))
    bullets_kept = 0
    for line in lines:
        if size + len(line) + 1 > max_chars:
            break
        out.append(line)
        size += len(line) + 1
        bullets_kept += line.startswith("- ")
    if bullets_kept < bullets_total:
        left = bullets_total - bullets_kept
        out.append(f"… {left} more message{'' if left == 1 else 's'} left out")
    return "\n".join(out)


def model_summarizer(client: Any, *, max_tokens: int | None = 1024, per_message: int = 2000) -> Summarizer:
    """A summarizer that asks a chat model: ``client.complete(messages, max_tokens=...)`` → ``.text``.

    ``client`` is a model client such as ``k.providers.model()`` (the
    chat-completions or scripted transport), or a function returning one, called
    at summarising time so that the model is only built when it is needed.
    """

    def summarize(messages: list[dict[str, Any]], focus_topic: str | None) -> str:
        model = client() if callable(client) and not hasattr(client, "complete") else client
        transcript = "\n".join(render_message(m, per_message) for m in messages)
        ask = f"Summarise these {len(messages)} messages"
        ask += f", paying most attention to: {focus_topic}.\n\n" if focus_topic else ".\n\n"
        result = model.complete(
            [
                {"role": "system", "content": SUMMARIZE_INSTRUCTIONS},
                {"role": "user", "content": ask + transcript},
            ],
            max_tokens=max_tokens,
        )
        text = getattr(result, "text", result)
        return text if isinstance(text, str) else ""

    return summarize


# --------------------------------------------------------------------------
# Blocks that must not be split
# --------------------------------------------------------------------------


def _call_ids(message: Mapping[str, Any]) -> set[str]:
    ids = set()
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping) and call.get("id"):
            ids.add(str(call["id"]))
    return ids


def split_blocks(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """``(start, end)`` index pairs (end exclusive) of the units a cut may not go through.

    An assistant message with ``tool_calls`` forms one unit with every later
    ``tool`` message answering one of its call ids and with the ``tool``
    messages that directly follow it (and whatever lies between them); every
    other message is a unit of its own.
    """
    n = len(messages)
    last_answer: dict[str, int] = {}  # tool_call_id -> index of the last tool message answering it
    for index, message in enumerate(messages):
        if message.get("role") == "tool" and message.get("tool_call_id") is not None:
            last_answer[str(message["tool_call_id"])] = index
    blocks: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end = start  # inclusive while growing
        probe = start
        while probe <= end:
            for call_id in _call_ids(messages[probe]):
                end = max(end, last_answer.get(call_id, end))
            if probe == end:
                while end + 1 < n and messages[end + 1].get("role") == "tool":
                    end += 1
            probe += 1
        blocks.append((start, end + 1))
        start = end + 1
    return blocks


# --------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------


class CompressorEngine(ContextEngine):
    """Keep the system messages, the head and the tail; replace the middle with one summary message.

    Attributes (all may be changed after construction):

    ``summarizer``
        ``(middle_messages, focus_topic) -> str`` or ``None`` (deterministic extract).
    ``summary_role``
        ``"user"`` (default) or ``"system"``: the role of the summary message.
    ``summary_max_chars`` / ``extract_chars_per_message``
        The size limits of the deterministic extract.
    ``min_middle``
        Without ``force``, a middle shorter than this is left alone (default 2).
    """

    def __init__(
        self,
        context_length: int = 128_000,
        *,
        threshold_percent: float | None = None,
        protect_first_n: int | None = None,
        protect_last_n: int | None = None,
        summarizer: Summarizer | None = None,
        summary_role: str = "user",
        summary_max_chars: int = 4000,
        extract_chars_per_message: int = 200,
        min_middle: int = 2,
    ) -> None:
        if threshold_percent is not None:
            if not 0 < threshold_percent <= 1:
                raise ValueError(f"threshold_percent must be in (0, 1], not {threshold_percent!r}")
            self.threshold_percent = float(threshold_percent)
        if protect_first_n is not None:
            self.protect_first_n = _non_negative("protect_first_n", protect_first_n)
        if protect_last_n is not None:
            self.protect_last_n = _non_negative("protect_last_n", protect_last_n)
        if summary_role not in ("user", "system"):
            raise ValueError(f"summary_role must be 'user' or 'system', not {summary_role!r}")
        super().__init__(context_length)
        self.summarizer: Summarizer | None = summarizer
        self.summary_role = summary_role
        self.summary_max_chars = summary_max_chars
        self.extract_chars_per_message = extract_chars_per_message
        self.min_middle = min_middle
        self.last_summary_source: str | None = None  # "summarizer" or "extract" after a compression

    @property
    def name(self) -> str:
        return "compressor"

    def use_model(self, client: Any, *, max_tokens: int | None = 1024) -> None:
        """Summarise with a chat model from now on: ``client`` as in :func:`model_summarizer`.

        ``engine.use_model(k.providers.model)`` builds the configured model's
        client only when a summary is first needed.
        """
        self.summarizer = model_summarizer(client, max_tokens=max_tokens)

    # -- bookkeeping -------------------------------------------------------------

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """``prompt_tokens`` (or the last response's prompt tokens) reached ``threshold_tokens``."""
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return tokens > 0 and tokens >= self.threshold_tokens

    def update_from_response(self, usage: Any) -> None:
        """Read ``input_tokens``/``output_tokens``/``total_tokens`` (or ``prompt_``/``completion_``) counts.

        ``usage`` is a mapping or an object with those attributes (e.g. a
        transport ``Usage``); a missing total is input + output.
        """
        if usage is None:
            return
        if not isinstance(usage, Mapping):
            as_dict = getattr(usage, "as_dict", None)
            usage = as_dict() if callable(as_dict) else vars(usage)
        prompt = _count(usage, "input_tokens", "prompt_tokens")
        completion = _count(usage, "output_tokens", "completion_tokens")
        total = _count(usage, "total_tokens")
        self.last_prompt_tokens = prompt
        self.last_completion_tokens = completion
        self.last_total_tokens = total or prompt + completion

    def get_status(self) -> dict[str, Any]:
        return {
            **super().get_status(),
            "last_completion_tokens": self.last_completion_tokens,
            "last_total_tokens": self.last_total_tokens,
            "threshold_percent": self.threshold_percent,
            "protect_first_n": self.protect_first_n,
            "protect_last_n": self.protect_last_n,
            "summarizer": self.summarizer is not None,
            "last_summary_source": self.last_summary_source,
        }

    # -- compression -------------------------------------------------------------

    def compress(
        self,
        messages: list[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """A new list: system messages, head, one summary message, tail (the input is never changed).

        Without ``force`` the list comes back unchanged (as a copy) when
        ``current_tokens`` is given and below ``threshold_tokens``, or when the
        middle would be shorter than ``min_middle``; with ``force`` any middle
        of at least one message is summarised.  Other keyword arguments (such as
        Hermes' ``memory_context``) are accepted and ignored.
        """
        original = copy.deepcopy(list(messages))
        if not force and current_tokens is not None and current_tokens < self.threshold_tokens:
            return original
        positions = [i for i, m in enumerate(original) if m.get("role") != "system"]
        rest = [original[i] for i in positions]
        head, tail = self._cuts(rest)
        middle_count = tail - head
        if middle_count < (1 if force else max(self.min_middle, 1)):
            return original
        middle = rest[head:tail]
        removed = set(positions[head:tail])
        summary = {"role": self.summary_role, "content": self._summary(middle, focus_topic)}
        out: list[dict[str, Any]] = []
        for index, message in enumerate(original):
            if index in removed:
                if index == positions[head]:
                    out.append(summary)
                continue
            out.append(message)
        self.compression_count += 1
        return out

    def _cuts(self, rest: list[dict[str, Any]]) -> tuple[int, int]:
        """``(head_end, tail_start)`` in ``rest``, moved so that no block straddles either cut."""
        n = len(rest)
        head = min(self.protect_first_n, n)
        tail = max(n - self.protect_last_n, 0)
        for start, end in split_blocks(rest):
            if start < head < end:
                head = end
            if start < tail < end:
                tail = start
        return head, max(tail, head)

    def _summary(self, middle: list[dict[str, Any]], focus_topic: str | None) -> str:
        header = summary_header(len(middle))
        text = ""
        if self.summarizer is not None:
            try:
                produced = self.summarizer(copy.deepcopy(middle), focus_topic)
            except Exception as exc:
                logger.warning(
                    "compressor: the summarizer failed (%s: %s); using the extract", type(exc).__name__, exc
                )
            else:
                if isinstance(produced, str) and produced.strip():
                    text = produced.strip()
                else:
                    logger.warning("compressor: the summarizer returned no text; using the extract")
        if text:
            self.last_summary_source = "summarizer"
        else:
            self.last_summary_source = "extract"
            text = extract_summary(
                middle,
                focus_topic,
                per_message=self.extract_chars_per_message,
                max_chars=self.summary_max_chars,
            )
        return f"{header}\n{text}"


def _non_negative(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    return value


def _count(usage: Mapping[str, Any], *names: str) -> int:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return 0
