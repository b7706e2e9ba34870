"""The bundled ``compressor`` context engine (``context.engine: compressor``, the default).

``register(ctx)`` offers one :class:`~.engine.CompressorEngine`, configured from
the ``context`` section of config.yaml:

* ``context.context_length`` (int, default 128000),
* ``context.threshold_percent`` (number in (0, 1], default 0.75),
* ``context.protect_first_n`` (int, default 3) and ``context.protect_last_n`` (int, default 6).

An invalid value is logged and the default is used.  The engine summarises with
the model when the context offers one as ``ctx.llm`` (an object with
``complete(messages, ...)``); until the kernel has that, the summary is the
deterministic extract, and a host may set ``engine.summarizer`` itself, e.g.
``engine.use_model(k.providers.model)``.
"""

from __future__ import annotations

from typing import Any

from .engine import CompressorEngine, extract_summary, model_summarizer, split_blocks

__all__ = ["CompressorEngine", "extract_summary", "model_summarizer", "register", "split_blocks"]

_INT_KEYS = ("context_length", "protect_first_n", "protect_last_n")


def _settings(ctx: Any) -> dict[str, Any]:
    section = ctx.config.get("context") if hasattr(ctx.config, "get") else None
    if not isinstance(section, dict):
        return {}
    out: dict[str, Any] = {}
    for key in _INT_KEYS:
        value = section.get(key)
        if value is None:
            continue
        minimum = 1 if key == "context_length" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            ctx.logger.warning(
                "context.%s must be an integer >= %d, not %r; using the default", key, minimum, value
            )
            continue
        out[key] = value
    percent = section.get("threshold_percent")
    if percent is not None:
        if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent <= 1:
            ctx.logger.warning(
                "context.threshold_percent must be in (0, 1], not %r; using the default", percent
            )
        else:
            out["threshold_percent"] = float(percent)
    return out


def register(ctx: Any) -> None:
    settings = _settings(ctx)
    engine = CompressorEngine(settings.pop("context_length", 128_000), **settings)
    llm = getattr(ctx, "llm", None)
    if llm is not None and hasattr(llm, "complete"):
        engine.summarizer = model_summarizer(llm)
    ctx.register_context_engine(engine)
