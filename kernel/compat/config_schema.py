"""The ``compat`` section of ``config.yaml`` (``compat.hermes``: the Hermes import shims on or off)."""

from __future__ import annotations

from typing import Any

from ..base.schema import OWNED, mapping

CONFIG_SCHEMA: dict[str, dict[str, Any]] = {
    "compat": mapping({"hermes": OWNED}, expected="a mapping (hermes: true or false)")
}
