"""Messages plugins queue for a conversation (``ctx.inject_message``), as a service.

``k.inbox`` holds them until the next model call of the session they are
meant for takes them.  A session — :class:`~kernel.host.HostSession`, and so
the reference loop and every framework adapter — opens itself there while it
runs, which is how a message without a session id finds the one conversation
it can belong to.  See :mod:`kernel.core.services`.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from .core.api import kernel_of, record_of
from .core.context import ServiceContext, live
from .core.services import serviceimpl
from .tools import current_call

if TYPE_CHECKING:
    from .core.kernel import Kernel

ROLES = ("user", "assistant", "system")


class Context(ServiceContext):
    """The ``ctx.inject_message`` member of this service."""

    @live
    def inject_message(self, content: str, role: str = "user", *, session_id: str | None = None) -> bool:
        """Queue a message for the conversation: the next model call of a session sees it.

        The session is ``session_id``, else the one whose turn or tool call is in
        progress.  Returns ``True`` when it was queued (``role`` is ``user``,
        ``assistant`` or ``system``, ``content`` a non-empty string, and it is
        clear which conversation it belongs to).
        """
        return kernel_of(self).inbox.put(
            content, role=role, plugin=record_of(self).name, session_id=session_id
        )


class Inbox:
    """The messages queued for this kernel's sessions, and the sessions open to receive them."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._lock = threading.Lock()
        self._queued: list[tuple[str | None, dict[str, str]]] = []
        self._open: weakref.WeakSet[Any] = weakref.WeakSet()

    def open(self, session: Any) -> None:
        """``session`` (anything with a ``session_id``) takes part in the routing until :meth:`close`."""
        with self._lock:
            self._open.add(session)

    def close(self, session: Any) -> None:
        """``session`` is gone: it leaves the routing and what was queued for it is dropped."""
        with self._lock:
            self._open.discard(session)
        self.drop(session.session_id)

    def put(
        self, content: str, role: str = "user", *, plugin: str = "host", session_id: str | None = None
    ) -> bool:
        """Queue a message for the next model call of a session (see ``ctx.inject_message``).

        It goes to ``session_id``, else to the session of the call in progress
        (a turn, a tool call); with neither, to the next model call only while at
        most one session is open — with several, it is refused, since it could
        reach the wrong conversation.
        """
        log = self._kernel.log
        if role not in ROLES or type(content) is not str or not content.strip():
            log.warning("inject_message_refused", plugin=plugin, role=str(role)[:20])
            return False
        target = session_id if session_id is not None else current_call().get("session_id")
        with self._lock:
            if target is None and len(self._open) > 1:
                refused = True
            else:
                refused = False
                message = {"role": role, "content": content}
                self._queued.append((None if target is None else str(target), message))
        if refused:
            log.warning(
                "inject_message_refused",
                plugin=plugin,
                role=role,
                reason="no session in progress and several are open; pass session_id",
            )
            return False
        log.debug("message_injected", plugin=plugin, role=role, chars=len(content), session=target)
        return True

    def take(self, session_id: str | None) -> list[dict[str, str]]:
        """The messages queued for ``session_id`` (or for no session in particular), oldest first."""
        with self._lock:
            taken = [m for target, m in self._queued if target is None or target == session_id]
            if taken:
                self._queued = [(t, m) for t, m in self._queued if not (t is None or t == session_id)]
        return taken

    def drop(self, session_id: str) -> None:
        """Forget the messages queued for ``session_id``."""
        with self._lock:
            self._queued = [(t, m) for t, m in self._queued if t != session_id]


@serviceimpl
def service_attach(kernel: Kernel) -> None:
    inbox = Inbox(kernel)
    kernel.host.provide(inbox=inbox, inject_message=inbox.put)
