"""A gateway without a broker recognises a message delivered again by its id: no second turn, and the
first reply sent again (the broker does the same for a scaled-out gateway)."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from ..base.safe_yaml import utf8_size

if TYPE_CHECKING:
    from ..core.kernel import Kernel

#: Message ids a gateway without a broker remembers (the latest): one delivered again runs no turn.
SEEN_MESSAGES = 10000
#: The UTF-8 bytes of first replies a gateway without a broker keeps for those ids, to send one again
#: to a duplicate delivery (the oldest forgotten first; one forgotten, its duplicate gets nothing).
KEPT_REPLY_BYTES = 64 * 1024 * 1024


class RecentMessages:
    """The ids of the latest messages handled, and the first replies to them (both bounded)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        #: ``(platform, chat, message id)`` of the latest messages handled.
        self.seen: collections.OrderedDict[tuple[str, str, str], None] = collections.OrderedDict()
        #: The first replies of the latest of those messages, and their size (``KEPT_REPLY_BYTES``).
        self.kept: collections.OrderedDict[tuple[str, str, str], str] = collections.OrderedDict()
        self.kept_bytes = 0

    def clear(self) -> None:
        """Forget every id and reply (message ids are remembered while a run lasts)."""
        self.seen.clear()
        self.kept.clear()
        self.kept_bytes = 0

    def seen_before(self, platform: str, chat: str, message_id: Any) -> bool:
        """Whether the message was handled already (answered or in progress): the platform delivered
        it again.  Its first delivery's turn and reply are its only ones."""
        if message_id is None or message_id == "":  # no id: nothing to recognise it by
            return False
        key = (platform, chat, str(message_id))
        if key in self.seen:
            self.kernel.log.info(
                "gateway_message_duplicate",
                platform=platform,
                chat=chat,
                message=key[2],
                detail="handled already: no second turn; it gets the first reply (sent again once "
                "answered, else when it comes)",
            )
            return True
        self.seen[key] = None
        if len(self.seen) > SEEN_MESSAGES:
            old, _ = self.seen.popitem(last=False)
            self._forget_reply(old)
        return False

    def keep_reply(self, platform: str, chat: str, message_id: Any, text: str) -> None:
        """Keep ``text``, the first reply to a message id seen, for its duplicates (bounded in bytes)."""
        key = (platform, chat, str(message_id))
        if message_id is None or message_id == "" or key not in self.seen or key in self.kept:
            return
        self.kept[key] = text
        self.kept_bytes += utf8_size(text)
        while self.kept_bytes > KEPT_REPLY_BYTES and self.kept:
            self._forget_reply(next(iter(self.kept)))

    def kept_reply(self, platform: str, chat: str, message_id: Any) -> str | None:
        """The first reply kept for the message id, if any."""
        if message_id is None or message_id == "":
            return None
        return self.kept.get((platform, chat, str(message_id)))

    def _forget_reply(self, key: tuple[str, str, str]) -> None:
        text = self.kept.pop(key, None)
        if text is not None:
            self.kept_bytes -= utf8_size(text)
