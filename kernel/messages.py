"""Messages plugins queue for a conversation (``ctx.inject_message``), as a service.

The next model call of the session a message is meant for takes it
(:class:`~kernel.agent.AgentSession` does).  See :mod:`kernel.core.services`.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING

from .core.context import _live
from .core.services import serviceimpl
from .tools import current_call

if TYPE_CHECKING:
    from .core.kernel import Kernel


class Context:
    """The ``ctx.inject_message`` member of this service."""

    @_live
    def inject_message(self, content: str, role: str = "user", *, session_id: str | None = None) -> bool:
        """Queue a message for the conversation: the next model call of a session sees it.

        The session is ``session_id``, else the one whose turn or tool call is in
        progress.  Returns ``True`` when it was queued (``role`` is ``user``,
        ``assistant`` or ``system``, ``content`` a non-empty string, and it is
        clear which conversation it belongs to).
        """
        return self._kernel.inject_message(
            content, role=role, plugin=self._record.name, session_id=session_id
        )


def inject_message(
    kernel: Kernel, content: str, role: str = "user", *, plugin: str = "host", session_id: str | None = None
) -> bool:
    """Queue a message for the next model call of a session (see ``ctx.inject_message``).

    It goes to ``session_id``, else to the session of the call in progress
    (a turn, a tool call); with neither, to the next model call only while at
    most one agent session is open — with several, it is refused, since it
    could reach the wrong conversation.
    """
    if role not in ("user", "assistant", "system") or not isinstance(content, str) or not content.strip():
        kernel.log.warning("inject_message_refused", plugin=plugin, role=role)
        return False
    target = session_id if session_id is not None else current_call().get("session_id")
    with kernel._lock:
        if target is None and len(kernel._agent_sessions) > 1:
            kernel.log.warning(
                "inject_message_refused",
                plugin=plugin,
                role=role,
                reason="no session in progress and several are open; pass session_id",
            )
            return False
        kernel._injected.append((None if target is None else str(target), {"role": role, "content": content}))
    kernel.log.debug("message_injected", plugin=plugin, role=role, chars=len(content), session=target)
    return True


def take_injected(kernel: Kernel, session_id: str | None) -> list[dict[str, str]]:
    """The messages queued for ``session_id`` (or for no session in particular), oldest first."""
    with kernel._lock:
        taken = [m for target, m in kernel._injected if target is None or target == session_id]
        kernel._injected = [(t, m) for t, m in kernel._injected if not (t is None or t == session_id)]
    return taken


def drop_injected(kernel: Kernel, session_id: str) -> None:
    """Forget the messages queued for a session that has closed."""
    with kernel._lock:
        kernel._injected = [(t, m) for t, m in kernel._injected if t != session_id]


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    kernel._injected = []
    kernel._agent_sessions = weakref.WeakSet()
    kernel.inject_message = functools.partial(inject_message, kernel)
    kernel._take_injected = functools.partial(take_injected, kernel)
    kernel._drop_injected = functools.partial(drop_injected, kernel)
