"""What a reply's text carries besides words: media directives, images, local files, and the rule for
which paths may be sent (installed by the Hermes module ``gateway.platforms.base``)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("kernel.gateway.base")  # the adapters' module, where plugins look for it

#: The check a media path passes before an adapter sends the file (``validate_media_delivery_path`` of
#: the Hermes module ``gateway.platforms.base``, installed when that module is served).
MEDIA_PATH_CHECK: list[Callable[[str], str | None] | None] = [None]


def truncate_message(
    content: str, max_length: int = 4096, len_fn: Callable[[str], int] | None = None
) -> list[str]:
    """``content`` in pieces of at most ``max_length`` (measured by ``len_fn``, else characters),
    cut at line ends, then spaces; a code block cut in two is closed and reopened."""
    measure = len_fn or len
    if measure(content) <= max_length or max_length <= 0:
        return [content] if content else []
    pieces: list[str] = []
    rest, fence = content, ""
    while rest:
        head = fence + rest
        if measure(head) <= max_length:
            pieces.append(head)
            break
        budget = max_length - (4 if fence or "```" in head else 0)
        cut = _fitting(head, budget, measure)
        line_end = head.rfind("\n", len(fence) + 1, cut + 1)
        space = head.rfind(" ", len(fence) + 1, cut + 1)
        cut = line_end if line_end > len(fence) else space if space > len(fence) else cut
        piece = head[:cut].rstrip()
        fences = re.findall(r"^```(\S*)", piece, flags=re.MULTILINE)
        opened = len(fences) % 2 == 1
        pieces.append(piece + "\n```" if opened else piece)
        fence = f"```{fences[-1]}\n" if opened else ""
        rest = head[cut:].lstrip(" \n") if not fence else head[cut:].lstrip("\n")
    return [p for p in pieces if p.strip()]


def extract_images(content: str) -> tuple[list[tuple[str, str]], str]:
    """The ``(url, alt)`` of each markdown ``![alt](url)`` and HTML ``<img src>`` image of
    ``content``, and the text without them."""
    found: list[tuple[str, str]] = []

    def take(url: str, alt: str) -> str:
        found.append((url, alt))
        return ""

    text = _MARKDOWN_IMAGE.sub(lambda m: take(m["url"], m["alt"]), content)
    text = _HTML_IMAGE.sub(lambda m: take(m["url"], m["alt"] or ""), text)
    return found, re.sub(r"\n{3,}", "\n\n", text).strip()


def extract_media(content: str) -> tuple[list[tuple[str, bool]], str]:
    """The ``MEDIA:<path>`` directives of a reply as ``(path, is_voice)`` (voice when the reply
    says ``[[audio_as_voice]]``), and the text without them or the ``[[...]]`` markers."""
    voice = "[[audio_as_voice]]" in content
    text = content.replace("[[audio_as_voice]]", "").replace("[[as_document]]", "")
    media: list[tuple[str, bool]] = []

    def take(match: re.Match[str]) -> str:
        media.append((_unquote(match["path"]), voice))
        return ""

    text = MEDIA_TAG_CLEANUP_RE.sub(take, text)
    text = MEDIA_EXTENSIONLESS_TAG_RE.sub(take, text)
    return media, re.sub(r"\n{3,}", "\n\n", text).strip()


def strip_media_directives_for_display(text: str) -> str:
    """``text`` without media directives: a known-extension ``MEDIA:`` tag always goes, one
    without an extension only when its path could be delivered (else it stays, to debug)."""
    if "MEDIA:" not in text and "[[" not in text:
        return text
    cleaned = text.replace("[[audio_as_voice]]", "").replace("[[as_document]]", "")
    cleaned = MEDIA_TAG_CLEANUP_RE.sub("", cleaned)

    def maybe(match: re.Match[str]) -> str:
        path = _unquote(match["path"])
        return "" if validate_media_delivery_path(path) else match.group(0)

    cleaned = MEDIA_EXTENSIONLESS_TAG_RE.sub(maybe, cleaned)
    return re.sub(r"\n{3,}", "\n\n", cleaned).rstrip()


def extract_local_files(content: str) -> tuple[list[str], str]:
    """Absolute or ``~/`` paths of existing files with a media or document extension named in
    ``content`` (outside code), and the text without them."""
    outside_code = re.sub(r"```.*?```|`[^`\n]*`", lambda m: " " * len(m.group(0)), content, flags=re.S)
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in _LOCAL_FILE.finditer(outside_code):
        path = match.group(0)
        if os.path.isfile(os.path.expanduser(path)) and path not in found:
            found.append(path)
            spans.append(match.span())
    text = content
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return found, re.sub(r"[ \t]{2,}", " ", text).strip() if found else content


def validate_media_delivery_path(path: str) -> str | None:
    """The resolved path when the file may be sent back (the rule of ``gateway.platforms.base``,
    which installs it in :data:`MEDIA_PATH_CHECK`); without it, nothing is (fail closed)."""
    check = MEDIA_PATH_CHECK[0]
    return check(path) if check is not None else None


def filter_media_delivery_paths(media_files: Any) -> list[tuple[str, bool]]:
    """The ``(path, is_voice)`` pairs whose path may be sent, paths resolved; others are logged."""
    kept = []
    for path, is_voice in media_files or []:
        safe = validate_media_delivery_path(str(path))
        if safe:
            kept.append((safe, bool(is_voice)))
        else:
            _log.warning("not sending media %s: not a deliverable file", path)
    return kept


def filter_local_delivery_paths(file_paths: Any) -> list[str]:
    """The paths that may be sent, resolved; others are logged and dropped."""
    pairs = ((path, False) for path in file_paths or [])
    return [path for path, _ in filter_media_delivery_paths(pairs)]


_MEDIA_EXTS = (
    "png|jpe?g|gif|webp|bmp|svg|mp4|mov|webm|mkv|avi|ogg|opus|mp3|m4a|wav|flac|aac|"
    "pdf|md|txt|csv|log|json|xml|ya?ml|html|docx|xlsx|pptx|zip"
)
_QUOTED_PATH = r"`[^`\n]+`|\"[^\"\n]+\"|'[^'\n]+'"
#: A ``MEDIA:<path>`` directive of a reply whose path has a known media or document extension.
MEDIA_TAG_CLEANUP_RE = re.compile(
    r"[`\"']?MEDIA:\s*(?P<path>"
    + _QUOTED_PATH
    + r"|(?:~/|/|[A-Za-z]:[/\\])[^\n]*?\.(?:"
    + _MEDIA_EXTS
    + r"))"
    r"(?=[\s`\"',;:)\]}]|$)[`\"']?",
    re.IGNORECASE,
)
#: A ``MEDIA:<path>`` directive whose path has no known extension.
MEDIA_EXTENSIONLESS_TAG_RE = re.compile(
    r"[`\"']?MEDIA:\s*(?P<path>" + _QUOTED_PATH + r"|(?:~/|/|[A-Za-z]:[/\\])[^\s`\"']+)[`\"']?[^\S\n]*",
    re.IGNORECASE,
)
_MARKDOWN_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<url>https?://[^)\s]+)\)")
_HTML_IMAGE = re.compile(
    r"<img\b[^>]*?\bsrc=[\"'](?P<url>https?://[^\"']+)[\"'][^>]*?(?:\balt=[\"'](?P<alt>[^\"']*)[\"'][^>]*)?/?>"
    r"(?:\s*</img>)?",
    re.IGNORECASE,
)
_LOCAL_FILE = re.compile(r"(?<![\w/:])(?:~/|/)[^\s`\"'<>()\[\]]+\.(?:" + _MEDIA_EXTS + r")\b", re.IGNORECASE)


def _unquote(path: str) -> str:
    path = path.strip()
    return path[1:-1] if len(path) > 1 and path[0] == path[-1] and path[0] in "`\"'" else path


def _fitting(text: str, budget: int, measure: Callable[[str], int]) -> int:
    """The longest prefix length of ``text`` that ``measure`` keeps within ``budget`` (at least 1)."""
    if measure is len:
        return max(min(budget, len(text)), 1)
    low, high = 1, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
