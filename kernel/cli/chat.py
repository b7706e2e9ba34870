"""``hermes-kernel chat``, ``run`` and ``demo``: talking to the model through the agent loop.

All three drive :class:`kernel.agent.AgentSession` on a loaded kernel, so every
hook fires where ``docs/hooks.md`` says.  ``chat`` is an interactive session
(slash commands through ``k.commands``, readline history, Ctrl-C stops the
running turn), ``run`` is one non-interactive turn, and ``demo`` plays the
bundled scripted conversation offline in a temporary home.  Imports of the
agent loop and friends happen inside the handlers, so that ``hermes-kernel
plugins list`` does not pay for them.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import Kernel
from ..base.redact import redacted, shown
from . import output
from .common import HookFailures, left_off_notice

if TYPE_CHECKING:
    from ..agent import AgentSession, TurnResult

PROMPT = "you> "
HISTORY_FILE = ".chat_history"
HISTORY_LENGTH = 1000
#: The longest tool argument / result text shown on one line.
PREVIEW_CHARS = 300
#: The demo wraps its hook lists at this width.
DEMO_WIDTH = 100

#: The questions the demo asks; the replies are in the bundled ``demo.yaml``.
DEMO_QUESTIONS = (
    "What is 2 to the power of 16?",
    "What is 100 degrees Fahrenheit in Celsius?",
    "What is the square root of two times pi?",
    "How many gigabytes are 1.5 terabytes?",
    "And 9**9**9**9?",
)
#: Asked after ``/new``: the answer comes from memory (turn 1).
DEMO_MEMORY_QUESTION = (
    "Earlier we worked out 2 to the power of 16. What was the result, and what is half of it?"
)
#: Where the demo script lives, relative to the bundled plugins' root.
DEMO_SCRIPT = Path("model-providers") / "scripted" / "demo.yaml"


def add_commands(commands: Any) -> None:
    """Add ``chat``, ``run`` and ``demo`` to the ``hermes-kernel`` parser."""
    chat = commands.add_parser(
        "chat",
        help="talk to the configured model in an interactive session",
        description=(
            "An interactive session with the model of config.yaml (model.provider), the loaded plugins' "
            "tools and hooks. Lines starting with / are slash commands (/help lists them); Ctrl-C stops "
            "the running turn, Ctrl-C at the prompt or Ctrl-D leaves. Without a terminal it reads one "
            "message per line from stdin."
        ),
    )
    chat.set_defaults(handler=_chat)

    run = commands.add_parser(
        "run",
        help="one turn, non-interactive: print the model's reply",
        description=(
            "Send PROMPT as one user turn through the agent loop and print the reply. "
            "Exit status 1 (with the reason on stderr) when the turn cannot run."
        ),
    )
    run.add_argument("prompt", help="the user message ('-' reads it from stdin)")
    run.add_argument(
        "--json",
        action="store_true",
        help="print the turn as JSON: reply, tool calls with results, injected context, usage, iterations",
    )
    run.set_defaults(handler=_run)

    demo = commands.add_parser(
        "demo",
        help="a scripted conversation through the whole pipeline, offline, in a temporary home",
        description=(
            "Play the bundled scripted conversation (calculator questions, then one answered from memory) "
            "with the scripted model, the sqlite memory and the bundled calculator, in a temporary home. "
            "Shows each turn's injected context, tool calls, hooks and reply, then the /plugins table."
        ),
    )
    demo.set_defaults(handler=_demo)


# --------------------------------------------------------------------------- helpers


def tool_groups(kernel: Kernel) -> list[tuple[str, list[str]]]:
    """``[(plugin, [tool, ...]), ...]`` of the available tools, plugins by name."""
    groups: dict[str, list[str]] = {}
    for tool in kernel.tools.all():
        if kernel.tools.available(tool)[0]:
            groups.setdefault(tool.plugin, []).append(tool.name)
    return sorted(groups.items(), key=lambda item: item[0].casefold())


def model_line(kernel: Kernel) -> str:
    """``provider / model`` of the configured model (with why it cannot be used yet, if so), or
    ``none`` and why there is none."""
    from ..providers.hermes_config import shown_name

    config = kernel.providers.model_config()
    try:
        client = kernel.providers.model()
    except Exception as exc:
        if config.get("provider") and config.get("model"):
            return f"{shown_name(config['provider'])} / {config['model']} (not usable yet: {exc})"
        return f"none ({exc})"
    provider = getattr(client, "provider", None) or shown_name(config.get("provider"))
    return f"{provider} / {getattr(client, 'model', None) or '?'}"


def compress_hooks(names: list[str]) -> str:
    """Hook names in the order they first fired, ``×n`` for repeats: ``pre_api_request×2``."""
    counts = Counter(names)
    return ", ".join(name if counts[name] == 1 else f"{name}×{counts[name]}" for name in dict.fromkeys(names))


def _preview(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _usage_line(result: TurnResult) -> str:
    usage = result.usage
    calls = f"{result.iterations} model call{'s' if result.iterations != 1 else ''}"
    return f"{calls}, {usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out"


def install_host_commands(kernel: Kernel, session: AgentSession, chat: Chat | None = None) -> None:
    """Answer the host's built-in slash commands (``/new``, ``/model``, ...) for ``session``."""
    commands = kernel.commands

    def new(_args: str, reason: str = "new") -> str:
        old = session.session_id
        new_id = session.reset(reason)
        kept = " (the memory keeps what it learned)" if kernel.providers.selected("memory") else ""
        return f"New session {new_id} (was {old}): the conversation starts over{kept}."

    def model(args: str) -> str:
        config = kernel.providers.model_config()
        wanted = args.strip()
        if not wanted:
            from ..providers.hermes_config import shown_name

            provider = shown_name(config.get("provider") or "none")
            return (
                f"Model: {model_line(kernel)} (model.provider: {provider}). "
                "Change it for this chat with /model NAME, or for good in config.yaml (model.model)."
            )
        section = kernel.config.get("model")
        if not isinstance(section, dict):
            section = kernel.config["model"] = {}
        before = section.get("model")
        section["model"] = wanted
        try:
            kernel.providers.model()
        except Exception as exc:
            if before is None:
                section.pop("model", None)
            else:
                section["model"] = before
            return f"Model not changed: {exc}"
        return (
            f"Model is now {model_line(kernel)} for this chat (not saved; set model.model in "
            "config.yaml to keep it)."
        )

    def status(_args: str) -> str:
        memory = kernel.providers.selected("memory") or "none"
        engine = kernel.providers.selected("context_engine") or "none"
        return (
            f"Session {session.session_id}: {session.turns} turn(s), {len(session.messages)} message(s). "
            f"Model: {model_line(kernel)}. Memory: {memory}. Context engine: {engine}. "
            f"Tools: {len(kernel.tools.schemas())}. Home: {kernel.home}"
        )

    def history(_args: str) -> str:
        return format_history(session.messages)

    def config(_args: str) -> str:
        import yaml

        text = yaml.safe_dump(redacted(copy.deepcopy(kernel.config)), sort_keys=False, allow_unicode=True)
        return f"Configuration ({kernel.home / 'config.yaml'}, secrets hidden):\n{text.rstrip() or '{}'}"

    def compress(args: str) -> str:
        try:
            engine = kernel.providers.context_engine()
        except ValueError as exc:
            return f"No context engine: {exc}"
        if engine is None:
            return "No context engine is configured (context.engine in config.yaml)."
        before = len(session.messages)
        session.compress(args or None)  # the memory's on_pre_compress first, as in a turn
        return (
            f"Compressed the conversation with '{engine.name}': {before} -> {len(session.messages)} messages."
        )

    def stop(_args: str) -> str:
        return "No turn is running. Press Ctrl-C during a turn to stop it."

    def leave(_args: str) -> str:
        if chat is not None:
            chat.done = True
        return "Bye."

    def clear(_args: str) -> None:
        if chat is not None and chat.out.isatty():
            chat.out.write("\033[H\033[2J")
            chat.out.flush()

    commands.set_host_handler("new", new)
    commands.set_host_handler("reset", lambda args: new(args, "reset"))
    commands.set_host_handler("model", model)
    commands.set_host_handler("status", status)
    commands.set_host_handler("history", history)
    commands.set_host_handler("config", config)
    commands.set_host_handler("compress", compress)
    commands.set_host_handler("stop", stop)
    commands.set_host_handler("quit", leave)
    commands.set_host_handler("exit", leave)
    commands.set_host_handler("clear", clear)


def format_history(messages: list[dict[str, Any]]) -> str:
    """The conversation as text: user and assistant messages, tool calls and results."""
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "user":
            lines.append(f"you: {content}")
        elif role == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                lines.append(
                    f"  [tool call] {function.get('name')} {_preview(function.get('arguments', ''))}"
                )
            if content:
                lines.append(f"assistant: {content}")
        elif role == "tool":
            lines.append(f"  [tool result] {_preview(content)}")
    return "\n".join(lines) if lines else "No messages yet."


# --------------------------------------------------------------------------- run


def _run(args: argparse.Namespace) -> int:
    from ..agent import AgentError, AgentSession
    from .common import loaded_kernel

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        print("error: the prompt is empty", file=sys.stderr)
        return 2
    kernel = loaded_kernel()
    try:
        notice = left_off_notice(kernel)
        if notice is not None:
            print(notice, file=sys.stderr)
        failures = HookFailures(kernel)
        session = AgentSession(kernel, platform="cli")
        try:
            result = session.run(prompt)
        except AgentError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a provider failure the agent loop did not wrap
            print(f"error: the turn failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        finally:
            session.close()
            failures.report()
    finally:
        kernel.shutdown()
    if args.json:
        output.emit_json(result.to_dict())
    else:
        print(result.reply)
    if result.stopped:
        print(f"warning: the turn stopped early ({result.stopped})", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- chat


class Chat:
    """The ``hermes-kernel chat`` loop over one kernel and one session."""

    def __init__(
        self,
        kernel: Kernel,
        session: AgentSession,
        *,
        interactive: bool,
        inp: TextIO | None = None,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.kernel = kernel
        self.session = session
        self.interactive = interactive
        self.inp = inp or sys.stdin
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.done = False
        self._readline: Any = None
        self.failures = HookFailures(kernel)
        self.completer = SlashCompleter(kernel)

    # -- output ------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        """Print ``text``: replies, plugin names and errors are text from outside, so control
        characters are shown as escapes and URLs masked (see :func:`kernel.base.redact.shown`)."""
        self.out.write(shown(text) + "\n")
        self.out.flush()

    def warn(self, text: str) -> None:
        self.out.flush()
        self.err.write(shown(text) + "\n")
        self.err.flush()

    def banner(self) -> str:
        lines = [f"hermes-kernel chat (home: {self.kernel.home})", f"Model: {model_line(self.kernel)}"]
        groups = tool_groups(self.kernel)
        if groups:
            lines.append("Tools:")
            lines += [f"  {plugin}: {', '.join(names)}" for plugin, names in groups]
        else:
            lines.append("Tools: none")
        failed = [p.name for p in self.kernel.plugins if not p.enabled]
        if failed:
            lines.append(f"Not loaded: {', '.join(failed)} (see /plugins)")
        lines.append("Type a message, /help for commands; /quit or Ctrl-D leaves, Ctrl-C stops a turn.")
        return "\n".join(lines)

    # -- input -------------------------------------------------------------------------

    def _history_path(self) -> Path:
        return self.kernel.home / HISTORY_FILE

    def _start_readline(self) -> None:
        try:
            import readline
        except ImportError:  # not on every platform
            return
        self._readline = readline
        self.completer.install(readline)
        try:
            readline.set_history_length(HISTORY_LENGTH)
            if self._history_path().is_file():
                readline.read_history_file(str(self._history_path()))
        except (OSError, ValueError):
            pass

    def _save_history(self) -> None:
        if self._readline is None:
            return
        try:
            self._history_path().parent.mkdir(parents=True, exist_ok=True)
            self._readline.write_history_file(str(self._history_path()))
        except (OSError, ValueError):
            pass

    def read_line(self) -> str | None:
        """The next line, or ``None`` at end of input (raises KeyboardInterrupt on Ctrl-C)."""
        if self.interactive:
            try:
                return input(output.prompt(PROMPT))
            except EOFError:
                self.say()
                return None
        line = self.inp.readline()
        return None if line == "" else line.rstrip("\r\n")

    # -- the loop ----------------------------------------------------------------------

    def loop(self) -> int:
        if self.interactive:
            self._start_readline()
        self.say(self.banner())
        try:
            while not self.done:
                try:
                    line = self.read_line()
                except KeyboardInterrupt:
                    self.say()
                    break
                if line is None:
                    break
                self.handle(line)
                self.failures.report(self.warn)
        finally:
            self._save_history()
        return 0

    def handle(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        if text.startswith("/"):
            try:
                reply = self.kernel.commands.run(text, session_id=self.session.session_id)
            except KeyboardInterrupt:
                self.warn("Interrupted: the command was stopped.")
                return
            if reply:
                self.say(reply)
            return
        self.turn(text)

    def turn(self, text: str) -> None:
        from ..agent import AgentError

        kept = len(self.session.messages)
        try:
            result = self.session.run(text)
        except KeyboardInterrupt:
            # Leave no half turn behind (a tool call without its result would upset the model).
            del self.session.messages[kept:]
            self.say()
            self.warn("Interrupted: the turn was stopped and left out of the conversation.")
            return
        except AgentError as exc:
            self.warn(f"error: {exc}")
            return
        except Exception as exc:  # a provider failure the agent loop did not wrap
            self.warn(f"error: the turn failed: {type(exc).__name__}: {exc}")
            return
        for call in result.tool_calls:
            self.say(f"  [{call.name}] {_preview(call.arguments)} -> {_preview(call.result)}")
        self.say(result.reply)
        if result.stopped:
            self.warn(f"warning: the turn stopped early ({result.stopped})")


class SlashCompleter:
    """Tab completion in ``chat``: slash commands (the host's and plugins'), then the arguments of
    a command that knows them (``/model`` the model names its provider declares; no network)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._matches: list[str] = []
        self._readline: Any = None

    def install(self, readline: Any) -> None:
        """Make ``readline`` complete with this completer on Tab (GNU readline or libedit)."""
        self._readline = readline
        readline.set_completer(self.complete)
        readline.set_completer_delims(" \t\n")
        if "libedit" in (getattr(readline, "__doc__", None) or ""):
            readline.parse_and_bind("bind ^I rl_complete")
        else:
            readline.parse_and_bind("tab: complete")

    def candidates(self, line: str, word: str) -> list[str]:
        """What ``word``, the last word of ``line`` (the text before the cursor), may become."""
        text = line.lstrip()
        if not text.startswith("/"):
            return []
        head, space, _rest = text.partition(" ")
        if not space:
            names = {f"/{command.name}" for command in self.kernel.commands.all()}
            return sorted(name for name in names if name.startswith(word))
        return [value for value in self.arguments(head[1:]) if value.startswith(word)]

    def arguments(self, command: str) -> list[str]:
        """The values the first argument of ``/command`` may take, when the command knows them."""
        if command.strip().lower() == "model":
            return model_names(self.kernel)
        return []

    def complete(self, word: str, state: int) -> str | None:
        """readline's completer: the ``state``-th completion of ``word``."""
        if state == 0:
            try:
                buffer = self._readline.get_line_buffer()[: self._readline.get_endidx()]
                self._matches = self.candidates(buffer, word)
            except Exception:  # a completer must never break the prompt
                self._matches = []
            if len(self._matches) == 1:  # Python's readline appends nothing: the space ends the word
                self._matches = [self._matches[0] + " "]
        return self._matches[state] if state < len(self._matches) else None


def model_names(kernel: Kernel) -> list[str]:
    """The model names ``/model`` may switch to: the configured one and those its provider declares."""
    config = kernel.providers.model_config()
    names = [config.get("model")]
    provider = config.get("provider")
    if provider:
        try:
            profile = kernel.providers.get_provider_profile(str(provider))
        except Exception:  # unknown or broken provider: only the configured name
            profile = None
        if profile is not None:
            names += [profile.default_model, *profile.fallback_models]
    return sorted({str(name) for name in names if name})


def _chat(args: argparse.Namespace) -> int:
    from ..agent import AgentSession
    from .common import loaded_kernel

    kernel = loaded_kernel()
    try:
        session = AgentSession(kernel, platform="cli")
        chat = Chat(kernel, session, interactive=sys.stdin.isatty())
        notice = left_off_notice(kernel)
        if notice is not None:
            chat.warn(notice)
        install_host_commands(kernel, session, chat)
        try:
            return chat.loop()
        finally:
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C while closing
                session.close()
                chat.failures.report(chat.warn)
    finally:
        kernel.shutdown()


# --------------------------------------------------------------------------- demo


def demo_config(script: Path) -> dict[str, Any]:
    """The embedded defaults the demo runs on."""
    return {
        "model": {"provider": "scripted", "script": str(script)},
        "memory": {"provider": "sqlite"},
    }


def _demo(args: argparse.Namespace) -> int:
    from .. import Kernel
    from ..core.sources.discovery import bundled_root

    script = bundled_root() / DEMO_SCRIPT
    if not script.is_file():
        print(f"error: the demo script is missing: {script}", file=sys.stderr)
        return 1
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="hermes-kernel-demo-") as home,
        Kernel(home=home, config=demo_config(script)) as kernel,
    ):
        return play_demo(kernel, script)


def play_demo(kernel: Kernel, script: Path) -> int:
    """Play the demo conversation on ``kernel`` (configured with :func:`demo_config`), printing each step."""
    from ..agent import AgentError, AgentSession
    from ..testing import HookRecorder

    kernel.load()
    for problem in kernel.problems:
        print(f"warning: {problem}", file=sys.stderr)
    recorder = HookRecorder().attach(kernel)
    session = AgentSession(kernel, platform="cli", session_id="demo-session-1")
    install_host_commands(kernel, session)
    print("hermes-kernel demo: the agent loop on the embedded defaults, offline, no API key")
    print(f"  home:    {kernel.home} (temporary)")
    print(f"  model:   {model_line(kernel)} (script: {script})")
    memory = kernel.providers.selected("memory") or "none"
    engine = kernel.providers.selected("context_engine") or "none"
    print(f"  memory:  {memory}    context engine: {engine}")
    for index, (plugin, names) in enumerate(tool_groups(kernel)):
        label = "tools:" if index == 0 else ""
        print(f"  {label:<8} {plugin}: {', '.join(names)}")
    try:
        for number, question in enumerate(DEMO_QUESTIONS, start=1):
            _demo_turn(number, session, question, recorder)
        print()
        print("-- /new: a new session; the conversation starts over, the memory stays")
        recorder.clear()
        print(f"  {'reply:':<10} {kernel.commands.run('/new', session_id=session.session_id)}")
        print(_labelled("hooks:", compress_hooks(recorder.names())))
        _demo_turn(len(DEMO_QUESTIONS) + 1, session, DEMO_MEMORY_QUESTION, recorder)
    except AgentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        session.close("demo failed")
        return 1
    recorder.clear()
    session.close("demo finished")
    print()
    print("-- the session is closed")
    print(_labelled("hooks:", compress_hooks(recorder.names())))
    kernel.unregister(HookRecorder.NAME)
    print()
    print("-- /plugins")
    print(kernel.commands.run("/plugins", session_id=session.session_id))
    return 0


def _labelled(label: str, text: str) -> str:
    """``  label     text``, a long text wrapped under itself."""
    return textwrap.fill(
        text,
        width=DEMO_WIDTH,
        initial_indent=f"  {label:<10} ",
        subsequent_indent=" " * 13,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _demo_turn(number: int, session: AgentSession, question: str, recorder: Any) -> None:
    print()
    print(f"-- {number}. you: {question}")
    recorder.clear()
    result = session.run(question)
    label = "context:"
    for line in result.context.splitlines():
        print(f"  {label:<10} {line}")
        label = ""
    for call in result.tool_calls:
        print(f"  {'tool:':<10} {call.name}({call.arguments}) -> {call.result}")
    print(_labelled("hooks:", compress_hooks(recorder.names())))
    print(f"  {'usage:':<10} {_usage_line(result)}")
    print(f"  {'reply:':<10} {result.reply}")
