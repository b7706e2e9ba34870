"""Tools as the model sees them: names, schemas, and results as JSON text."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from .config import _UNSAFE

if TYPE_CHECKING:
    pass


def select_tools(names: list[str], include: list[str] | None, exclude: list[str]) -> list[str]:
    """The tool names the filters keep: those ``include`` matches, else all but those ``exclude`` matches.

    Patterns are names or fnmatch globs.  When both lists are given,
    ``include`` wins: a tool it names is kept even if ``exclude`` names it too.
    """
    if include is not None:
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in include)]
    return [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in exclude)]


def kernel_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, characters outside ``[A-Za-z0-9_]`` replaced by ``_``.

    A name longer than the kernel's 64 characters is cut and ends with a short hash of the full one.
    """
    name = f"mcp__{re.sub(_UNSAFE, '_', server)}__{re.sub(_UNSAFE, '_', tool)}"
    if len(name) > 64:
        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[:55]}_{digest}"
    return name


def tool_schema(name: str, server: str, tool: Any) -> dict[str, Any]:
    """The kernel (OpenAI function) schema of an MCP tool."""
    params = copy.deepcopy(tool.inputSchema) if isinstance(tool.inputSchema, dict) else {}
    params.pop("$schema", None)
    params["type"] = "object"
    if not isinstance(params.get("properties"), dict):
        params["properties"] = {}
    if isinstance(params.get("required"), list):
        params["required"] = [r for r in params["required"] if r in params["properties"]]
    description = (tool.description or getattr(tool, "title", None) or "").strip()
    return {
        "name": name,
        "description": description or f"Tool '{tool.name}' of the MCP server '{server}'.",
        "parameters": params,
    }


def result_json(server: str, tool: str, result: Any) -> str:
    """A ``CallToolResult`` as the JSON text a kernel tool returns.

    ``isError`` gives ``{"error": <text>, "server": ...}``.  Otherwise the
    ``structuredContent`` when the server sent one, else the text (kept as is
    when it is JSON, else ``{"result": text}``); images, audio and resources
    are listed under ``"content"`` (their binary data is not included).
    """
    texts: list[str] = []
    extras: list[dict[str, Any]] = []
    for item in result.content or []:
        kind = getattr(item, "type", None)
        if kind == "text":
            texts.append(item.text)
        elif kind in ("image", "audio"):
            extras.append({"type": kind, "mimeType": item.mimeType, "bytes": _b64_size(item.data)})
        elif kind == "resource_link":
            extras.append({"type": kind, "uri": str(item.uri), "name": item.name, "mimeType": item.mimeType})
        elif kind == "resource":
            res = item.resource
            entry: dict[str, Any] = {"type": kind, "uri": str(res.uri), "mimeType": res.mimeType}
            if getattr(res, "text", None) is not None:
                entry["text"] = res.text
            else:
                entry["bytes"] = _b64_size(getattr(res, "blob", "") or "")
            extras.append(entry)
        else:
            extras.append({"type": str(kind)})
    text = "\n".join(texts)
    if result.isError:
        message = text or f"the tool '{tool}' reported an error"
        return json.dumps({"error": message, "server": server, "tool": tool}, ensure_ascii=False)
    structured = result.structuredContent
    if extras:
        value = structured if structured is not None else (json.loads(text) if _is_json(text) else text)
        return json.dumps({"result": value, "content": extras}, ensure_ascii=False, default=str)
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    if _is_json(text):
        return text
    return json.dumps({"result": text}, ensure_ascii=False)


def _b64_size(data: str) -> int:
    """The number of bytes a base64 text decodes to."""
    return len(data) * 3 // 4 - data[-2:].count("=")


def _is_json(text: str) -> bool:
    if not text.strip():
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _error(message: str, server: str, **extra: Any) -> str:
    return json.dumps({"error": message, "server": server, **extra}, ensure_ascii=False, default=str)
