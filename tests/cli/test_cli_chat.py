"""``hermes-kernel run``, ``chat`` and ``demo`` as real subprocesses (``chat`` also through a real pty).

The bundled plugins of the checkout are used (HERMES_BUNDLED_PLUGINS unset): the scripted model, the
calculator and the sqlite memory.  A test plugin in the home logs the session hooks to
``<home>/hooks.log`` (one JSON object a line), adds a line of context in ``pre_llm_call`` and, for a
message containing "slow", announces itself on stderr and sleeps so that Ctrl-C can hit the turn
(its tool ``slow_tool`` does the same inside the tool loop).
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLI, REPO, cli_env, default_sigint, run_cli, write_plugin

HOOKLOG = """
import json
import sys
import time
from pathlib import Path

LOGGED = ("on_session_start", "on_session_end", "on_session_reset", "on_session_finalize")


def register(ctx):
    log = Path(ctx.home) / "hooks.log"

    def write(hook, kw):
        entry = {
            "hook": hook,
            "session_id": kw.get("session_id"),
            "reason": kw.get("reason"),
            "completed": kw.get("completed"),
            "interrupted": kw.get("interrupted"),
            "message": kw.get("user_message"),
        }
        with log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\\n")

    def logger(hook):
        def callback(**kw):
            write(hook, kw)
        return callback

    for hook in LOGGED:
        ctx.register_hook(hook, logger(hook))

    def pre_llm_call(**kw):
        write("pre_llm_call", kw)
        if "slow" in (kw.get("user_message") or ""):
            sys.stderr.write("SLOW TURN STARTED\\n")
            sys.stderr.flush()
            time.sleep(60)
        return {"context": "HOOK CONTEXT from hooklog"}

    ctx.register_hook("pre_llm_call", pre_llm_call)

    def slow_tool(args, **kw):
        sys.stderr.write("SLOW TOOL STARTED\\n")
        sys.stderr.flush()
        time.sleep(60)
        return json.dumps({"done": True})

    ctx.register_tool("slow_tool", "test", {"description": "Take a long time."}, slow_tool)
"""

SCRIPT = [
    {"text": "Computing.", "tool_calls": [{"name": "calculate", "arguments": {"expression": "2**10"}}]},
    "2**10 is 1024.",
    "Second answer.",
]


def hooks(home: Path) -> list[dict[str, Any]]:
    path = home / "hooks.log"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def hook_names(home: Path) -> list[str]:
    return [entry["hook"] for entry in hooks(home)]


def write_home(home: Path, script: list[Any] | None = SCRIPT, model: dict[str, Any] | None = None) -> Path:
    """``config.yaml`` selecting the scripted model with ``script`` (None: no model), and the hook log."""
    config: dict[str, Any] = {}
    if script is not None:
        (home / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False), encoding="utf-8")
        config["model"] = {"provider": "scripted", "script": "script.yaml"}
    if model is not None:
        config["model"] = model
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    write_plugin(home / "plugins", "hooklog", HOOKLOG)
    return home


def cli(home: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, stdin=stdin, **env)


def subsequence(items: list[str], *expected: str) -> None:
    """``expected`` occur in ``items`` in this order (other items may come between)."""
    it = iter(items)
    missing = [e for e in expected if not any(item == e for item in it)]
    assert not missing, f"{list(expected)} is not a subsequence of {items} (missing from {missing[0]!r})"


def in_order(text: str, *needles: str) -> None:
    """Each needle occurs in ``text``, after the previous one."""
    at = 0
    for needle in needles:
        found = text.find(needle, at)
        assert found >= 0, f"{needle!r} not found after position {at} in:\n{text}"
        at = found + len(needle)


# --------------------------------------------------------------------------- run


def test_run_prints_the_reply(home):
    write_home(home)
    proc = cli(home, "run", "What is 2**10?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "2**10 is 1024.\n"
    names = hook_names(home)
    subsequence(names, "on_session_start", "pre_llm_call", "on_session_end", "on_session_finalize")
    assert names[-1] == "on_session_finalize" and names.count("pre_llm_call") == 1
    assert hooks(home)[1]["message"] == "What is 2**10?"


def test_run_json_is_a_transcript(home):
    write_home(home)
    proc = cli(home, "run", "What is 2**10?", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["reply"] == "2**10 is 1024."
    assert data["session_id"] and data["turn_id"]
    assert data["iterations"] == 2 and data["stopped"] is None
    assert "HOOK CONTEXT from hooklog" in data["context"]
    [call] = data["tool_calls"]
    assert call["name"] == "calculate" and call["id"] == "call_1"
    assert json.loads(call["arguments"]) == {"expression": "2**10"}
    assert json.loads(call["result"])["result"] == 1024
    usage = data["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_run_reads_the_prompt_from_stdin(home):
    write_home(home, ["Hello from the script."])
    proc = cli(home, "run", "-", stdin="a prompt on stdin\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from the script.\n"
    assert hooks(home)[1]["message"].strip() == "a prompt on stdin"


def test_run_without_a_model_fails_with_one_clear_line(home):
    write_home(home, script=None)
    proc = cli(home, "run", "hello")
    assert proc.returncode == 1
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "model.provider" in errors[0]
    assert "Traceback" not in proc.stderr
    # The session was still closed.
    assert hook_names(home)[-1] == "on_session_finalize"


def test_run_with_an_unknown_provider_names_it(home):
    write_home(home, script=None, model={"provider": "no-such-provider", "model": "m"})
    proc = cli(home, "run", "hello")
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no-such-provider" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_with_a_missing_script_fails_cleanly(home):
    write_home(home, script=None, model={"provider": "scripted", "script": "absent.yaml"})
    proc = cli(home, "run", "hello")
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "absent.yaml" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_when_the_script_is_exhausted_says_so(home):
    write_home(home, [SCRIPT[0]])  # a tool call, then nothing left
    proc = cli(home, "run", "What is 2**10?", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert "no more turns" in data["reply"] and "script.yaml" in data["reply"]
    assert len(data["tool_calls"]) == 1


def test_run_reports_the_iteration_cap(home):
    loop = [{"tool_calls": [{"name": "calculate", "arguments": {"expression": "1+1"}}]}] * 5
    write_home(home, loop)
    config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    config["agent"] = {"max_iterations": 2}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = cli(home, "run", "loop", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stopped"] == "max_iterations" and data["iterations"] == 2
    assert "max_iterations" in proc.stderr


def test_run_help():
    proc = subprocess.run([*CLI, "run", "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert "--json" in proc.stdout and "prompt" in proc.stdout


# --------------------------------------------------------------------------- demo

DEMO_RESULTS = ("65536", "37.7778", "4.44288293815837", "1536")


def test_demo_plays_the_scripted_conversation(home):
    proc = cli(home, "demo")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for value in DEMO_RESULTS:
        assert f'"result": {value}' in out, value
    # The seed's questions, in order, then the one answered from memory after /new.
    in_order(
        out,
        "you: What is 2 to the power of 16?",
        "calculate(",
        "2**16 = 65536.",
        "you: What is 100 degrees Fahrenheit in Celsius?",
        "unit_convert(",
        "you: What is the square root of two times pi?",
        "you: How many gigabytes are 1.5 terabytes?",
        "too large",
        "/new",
        "on_session_reset",
        "you: Earlier we worked out 2 to the power of 16.",
        "Recalled from memory",
        "What is 2 to the power of 16?",
        '"result": 32768',
        "half of it is 32768",
        "on_session_finalize",
        "Plugins (",
    )
    # The memory recall appears on the later turn only.
    assert out.count("Recalled from memory") == 1
    for hook in ("on_session_start", "pre_llm_call", "pre_api_request×2", "post_api_request×2"):
        assert hook in out, hook
    for hook in ("pre_tool_call", "post_tool_call", "transform_tool_result", "post_llm_call"):
        assert hook in out, hook
    assert "transform_llm_output" in out and "on_session_end" in out
    # The /plugins table, with the embedded defaults and without the demo's own recorder.
    table = out[out.index("Plugins (") :]
    assert "✓ calculator v1.0.0 (2 tools, 1 hook)" in table
    assert "memory/sqlite" in table and "model-providers/scripted" in table
    assert "hook-recorder" not in table
    # It ran in a temporary home: the real one is untouched.
    assert list(home.iterdir()) == []


def test_demo_finds_its_script_through_the_bundled_root(home, tmp_path):
    copy = tmp_path / "copied-extensions"
    shutil.copytree(REPO / "extensions", copy, ignore=shutil.ignore_patterns("__pycache__"))
    proc = cli(home, "demo", HERMES_BUNDLED_PLUGINS=str(copy))
    assert proc.returncode == 0, proc.stderr
    assert str(copy / "model-providers" / "scripted" / "demo.yaml") in proc.stdout
    assert "half of it is 32768" in proc.stdout


def test_demo_without_its_script_fails_clearly(home, tmp_path):
    empty = tmp_path / "no-extensions"
    empty.mkdir()
    proc = cli(home, "demo", HERMES_BUNDLED_PLUGINS=str(empty))
    assert proc.returncode == 1
    assert "demo.yaml" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- chat through pipes


def test_chat_through_pipes(home):
    write_home(home)
    lines = ["/help", "What is 2**10?", "/plugins", "/new", "And now?", "/quit", "never sent"]
    proc = cli(home, "chat", stdin="".join(f"{line}\n" for line in lines))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # The banner: the tools by plugin and the model.
    banner = out[: out.index("Commands:")]
    assert "calculator: calculate, unit_convert" in banner
    assert "scripted / scripted" in banner
    in_order(
        out,
        "Commands:",
        "/help",
        "/new",
        "/quit",
        '[calculate] {"expression": "2**10"}',
        "2**10 is 1024.",
        "Plugins (",
        "✓ calculator v1.0.0",
        "New session",
        "Second answer.",
        "Bye.",
    )
    assert "no more turns" not in out  # "never sent" was not sent
    log = hooks(home)
    names = [e["hook"] for e in log]
    subsequence(
        names,
        "on_session_start",
        "pre_llm_call",
        "on_session_end",
        "on_session_reset",
        "on_session_start",
        "pre_llm_call",
        "on_session_end",
        "on_session_finalize",
    )
    assert names.count("pre_llm_call") == 2 and names.count("on_session_reset") == 1
    assert names[-1] == "on_session_finalize"
    starts = [e["session_id"] for e in log if e["hook"] == "on_session_start"]
    [reset] = [e for e in log if e["hook"] == "on_session_reset"]
    assert len(starts) == 2 and starts[0] != starts[1]
    assert reset["reason"] == "new" and reset["session_id"] == starts[1]
    assert log[-1]["session_id"] == starts[1]


def test_chat_slash_commands_of_the_host(home):
    write_home(home)
    lines = ["What is 2**10?", "/history", "/status", "/model", "/reset", "/history", "/bogus"]
    proc = cli(home, "chat", stdin="".join(f"{line}\n" for line in lines))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    in_order(
        out,
        "2**10 is 1024.",
        "you: What is 2**10?",
        "[tool call] calculate",
        "[tool result]",
        "assistant: 2**10 is 1024.",
        "Session ",
        "1 turn(s)",
        "Model: scripted / scripted",
        "New session",
        "No messages yet.",
        "Unknown command /bogus",
    )
    log = hooks(home)
    assert [e["reason"] for e in log if e["hook"] == "on_session_reset"] == ["reset"]
    # End of input without /quit still closes the session.
    assert log[-1]["hook"] == "on_session_finalize"


def test_chat_model_switch_lasts_for_this_chat_only(home):
    write_home(home, model={"provider": "openai-compatible", "model": "m1", "base_url": "http://127.0.0.1:9"})
    before = (home / "config.yaml").read_text(encoding="utf-8")
    proc = cli(home, "chat", stdin="/model\n/model m2\n/status\n")
    assert proc.returncode == 0, proc.stderr
    in_order(
        proc.stdout,
        "openai-compatible / m1",
        "Model is now openai-compatible / m2",
        "Model: openai-compatible / m2",
    )
    assert (home / "config.yaml").read_text(encoding="utf-8") == before


def test_chat_keeps_going_after_an_agent_error(home):
    write_home(home, script=None)
    proc = cli(home, "chat", stdin="hello\n/tools\n")
    assert proc.returncode == 0, proc.stderr
    assert "error: no model provider configured" in proc.stderr
    assert "Tools (" in proc.stdout and "calculate" in proc.stdout
    assert "Model: none" in proc.stdout


def test_chat_plugin_slash_command(home):
    write_home(home)
    write_plugin(
        home / "plugins",
        "echoer",
        """
def register(ctx):
    ctx.register_command("echo", lambda args: "echo: " + args, description="Echo the arguments")
""",
    )
    proc = cli(home, "chat", stdin="/help\n/echo hi there\n")
    assert proc.returncode == 0, proc.stderr
    in_order(proc.stdout, "/echo — Echo the arguments", "echo: hi there")


def test_chat_through_pipes_sigint_interrupts_the_turn_and_on_session_end_fires(home):
    write_home(home)
    proc = subprocess.Popen(
        [*CLI, "chat"],
        env=cli_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write("please be slow\n")
        proc.stdin.flush()
        seen = ""
        deadline = time.monotonic() + 60
        while "SLOW TURN STARTED" not in seen:  # bounded wait for the hook to start sleeping
            left = deadline - time.monotonic()
            assert left > 0, f"the slow turn never started; stderr: {seen}"
            ready, _, _ = select.select([proc.stderr], [], [], min(left, 0.5))
            if ready:
                line = proc.stderr.readline()
                assert line, f"chat ended early; stderr: {seen}"
                seen += line
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate("What is 2**10?\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Interrupted: the turn was stopped" in err
    assert "2**10 is 1024." in out  # the next line was a normal turn
    log = hooks(home)
    assert log[-1]["hook"] == "on_session_finalize"
    # Every run ends with on_session_end, an interrupted one with interrupted=True.
    ends = [(e["completed"], e["interrupted"]) for e in log if e["hook"] == "on_session_end"]
    assert ends[:2] == [(False, True), (True, False)], ends


# --------------------------------------------------------------------------- chat through a pty


class Terminal:
    """The master side of a pty with a child process: bounded reads for synchronisation."""

    def __init__(self, home: Path) -> None:
        env = cli_env(home, TERM="dumb")
        argv = [*CLI, "chat"]
        pid, fd = pty.fork()
        if pid == 0:  # the child: its stdin, stdout and stderr are the pty
            try:
                default_sigint()
                os.chdir(home)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.seen = 0
        self.status: int | None = None

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def _read(self, wait: float) -> int:
        """Read what arrives within ``wait`` seconds: bytes read, 0 for none, -1 at end of output."""
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return 0
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return -1
        self.output += data
        return len(data) if data else -1

    def expect(self, needle: str, patience: float = 60.0) -> str:
        """Read until ``needle`` appears after the previous match; return the text up to it."""
        wanted = needle.encode()
        deadline = time.monotonic() + patience
        while True:
            found = self.output.find(wanted, self.seen)
            if found >= 0:
                chunk = self.output[self.seen : found + len(wanted)]
                self.seen = found + len(wanted)
                return chunk.decode("utf-8", "replace")
            left = deadline - time.monotonic()
            if left <= 0 or self._read(min(left, 0.5)) < 0:
                pytest.fail(f"{needle!r} did not appear; the terminal showed:\n{self.text()}")

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def exited(self, patience: float) -> bool:
        """Drain the output for up to ``patience`` seconds or until the child has exited."""
        deadline = time.monotonic() + patience
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                while self._read(0) > 0:  # what it wrote last
                    pass
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._read(min(left, 0.1))
        return True

    def wait(self, patience: float = 60.0) -> int:
        """The child's exit code, once it has exited (bounded wait)."""
        if not self.exited(patience):
            pytest.fail(f"the chat did not exit; the terminal showed:\n{self.text()}")
        assert self.status is not None
        return self.status

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def terminal(home):
    made: list[Terminal] = []

    def start(script: list[Any] = SCRIPT) -> Terminal:
        write_home(home, script)
        made.append(Terminal(home))
        return made[-1]

    yield start
    for term in made:
        term.close()


def test_chat_in_a_terminal_ctrl_c_stops_a_turn_and_ctrl_d_leaves(home, terminal):
    slow_tool = {"tool_calls": [{"name": "slow_tool", "arguments": {}}]}
    term = terminal([SCRIPT[0], SCRIPT[1], slow_tool, "Second answer."])
    banner = term.expect("you> ")
    assert "calculator: calculate, unit_convert" in banner
    term.send(b"What is 2**10?\r")
    term.expect("2**10 is 1024.")
    term.expect("you> ")

    # Ctrl-C while a pre_llm_call hook sleeps.
    term.send(b"please be slow\r")
    term.expect("SLOW TURN STARTED")
    term.send(b"\x03")
    term.expect("Interrupted: the turn was stopped")
    term.expect("you> ")

    # Ctrl-C while a tool runs, in the middle of the tool loop.
    term.send(b"use the tool\r")
    term.expect("SLOW TOOL STARTED")
    term.send(b"\x03")
    term.expect("Interrupted: the turn was stopped")
    term.expect("you> ")

    # The REPL is alive and the interrupted turns left nothing behind.
    term.send(b"/history\r")
    history = term.expect("you> ")
    assert "What is 2**10?" in history and "2**10 is 1024." in history
    assert "please be slow" not in history.split("/history", 1)[1]
    assert "use the tool" not in history.split("/history", 1)[1]
    assert "slow_tool" not in history.split("/history", 1)[1]
    term.send(b"And now?\r")
    term.expect("Second answer.")
    term.expect("you> ")

    term.send(b"\x04")
    assert term.wait() == 0, term.text()
    assert "Traceback" not in term.text()
    log = hooks(home)
    assert log[-1]["hook"] == "on_session_finalize"
    assert [e["message"] for e in log if e["hook"] == "pre_llm_call"] == [
        "What is 2**10?",
        "please be slow",
        "use the tool",
        "And now?",
    ]
    # The turn interrupted in the tool loop ended with on_session_end(interrupted=True).
    ends = [(e["completed"], e["interrupted"]) for e in log if e["hook"] == "on_session_end"]
    assert (False, True) in ends and ends[0] == ends[-1] == (True, False), ends
    # readline history, saved on exit.
    saved = (home / ".chat_history").read_text(encoding="utf-8")
    assert "What is 2**10?" in saved and "And now?" in saved


def test_chat_in_a_terminal_ctrl_c_at_the_prompt_leaves(home, terminal):
    term = terminal()
    term.expect("you> ")
    # CPython's readline notices a SIGINT that lands just before it starts waiting for input only
    # at the next signal or key, so Ctrl-C is pressed again if the first one went unnoticed.
    for _ in range(10):
        term.send(b"\x03")
        if term.exited(3.0):
            break
    assert term.wait() == 0, term.text()
    assert "Traceback" not in term.text()
    assert hook_names(home) == ["on_session_finalize"]


def test_chat_in_a_terminal_recalls_the_history_of_an_earlier_chat(home, terminal):
    (home / ".chat_history").write_text("What is 2**10?\n", encoding="utf-8")
    term = terminal()
    term.expect("you> ")
    term.send(b"\x1b[A\r")  # the up arrow brings back the saved line
    term.expect("2**10 is 1024.")
    term.expect("you> ")
    term.send(b"/quit\r")
    term.expect("Bye.")
    assert term.wait() == 0, term.text()


NOTER = """
import pathlib
from agent.memory_provider import MemoryProvider

class Noter(MemoryProvider):
    name = "noter"
    def is_available(self):
        return True
    def initialize(self, session_id, **kwargs):
        self.home = pathlib.Path(kwargs["hermes_home"])
    def get_tool_schemas(self):
        return []
    def on_pre_compress(self, messages):
        (self.home / "pre_compress.txt").write_text(str(len(messages)))
        return "the user likes short answers"
"""


def test_chat_compress_lets_the_memory_speak_first(home):
    """``/compress`` in ``chat`` goes through the session: the memory provider's ``on_pre_compress``
    sees the conversation before the engine compresses it (as in a turn)."""
    write_home(home)
    write_plugin(home / "plugins" / "memory", "noter", NOTER, manifest="")
    config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    config["memory"] = {"provider": "noter"}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = cli(home, "chat", stdin="What is 2**10?\n/compress\n")
    assert proc.returncode == 0, proc.stderr
    assert "Compressed the conversation with 'compressor'" in proc.stdout
    assert int((home / "pre_compress.txt").read_text()) >= 3


ECHOER = """
def register(ctx):
    ctx.register_command("echo", lambda args: "echo: " + args, description="Echo the arguments")
"""


def test_chat_in_a_terminal_completes_slash_commands_and_their_arguments(home):
    """Tab completes the host's and plugins' slash commands, and /model's argument from the model
    names of the configured provider (here the configured one)."""
    write_home(home, SCRIPT, model={"provider": "scripted", "script": "script.yaml", "model": "replay-one"})
    write_plugin(home / "plugins", "echoer", ECHOER)
    term = Terminal(home)
    try:
        term.expect("you> ")
        term.send(b"/he\t")
        term.expect("/help ")  # completed, and the word ended
        term.send(b"\r")
        in_order(term.expect("you> "), "Commands:", "/echo — Echo the arguments")
        term.send(b"/ec\thi there\r")  # a plugin's command
        term.expect("echo: hi there")
        term.expect("you> ")
        term.send(b"/model rep\t\r")
        term.expect("Model is now scripted / replay-one")
        term.expect("you> ")
        term.send(b"/quit\r")
        term.expect("Bye.")
        assert term.wait() == 0, term.text()
    finally:
        term.close()
    assert "Traceback" not in term.text()
