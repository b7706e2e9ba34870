"""Shell hooks' names, defaults and bounds."""

from __future__ import annotations

import re

SURFACE = "config:shell-hooks"
KIND = "shell-hooks"
DEFAULT_TIMEOUT = 60.0
MIN_TIMEOUT = 1.0
MAX_TIMEOUT = 300.0
# Events that carry a tool name: ``when.tools`` and ``matcher`` apply only to these.
TOOL_EVENTS = frozenset({"pre_tool_call", "post_tool_call", "transform_tool_result"})
# Sub-sections of ``hooks:`` that real Hermes uses for other things; not events.
RESERVED_KEYS = ("output_spill", "outbound")
EXIT_BLOCK = 2
REASON_CHARS = 400
SHOWN_CHARS = 2000
KILL_GRACE = 5.0
# What a hook leaves running in its process group gets SIGTERM and this long, then SIGKILL.
END_GRACE = 2.0
# Output still arriving after the command ended (from a process outside its group) is read this long.
DRAIN_AFTER_EXIT = 0.25
TEST_SESSION = "hooks-test"
# What is kept of a run's output (the rest is read and dropped), and the longest argument passed.
MAX_STDOUT = 1024 * 1024
MAX_STDERR = 64 * 1024
MAX_ARGUMENT = 32 * 1024

_PLACEHOLDER = re.compile(r"\{(tool_name|session_id|event)\}")
_ENTRY_KEYS = frozenset({"command", "when", "matcher", "timeout", "fail_closed", "failClosed", "detach"})
_STDIN_KEYS = ("hook_event_name", "tool_input", "extra")
