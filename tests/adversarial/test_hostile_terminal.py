"""Hostile terminals and hostile text for the command line: stdout that cannot encode what is printed
(``PYTHONIOENCODING=ascii``, ``LC_ALL=C``), lone surrogates, NUL bytes and terminal controls in what
plugins register, a plugin that prints megabytes while a command prints JSON, undecodable input and
log lines built to break a parser.

Nothing crashes, JSON stays valid JSON (what cannot be encoded becomes a ``\\uXXXX`` escape, which JSON
reads back as the same text), and no terminal control reaches the terminal raw.  Every command is a
real subprocess.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CLI, REPO, cli_env, read_rest, write_plugin

DEADLOCK = 120

ASCII = {"PYTHONIOENCODING": "ascii"}
# The C locale without Python's UTF-8 coercion: stdio is ASCII.
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}

FANCY = "Café ✓ 😀 naïve"

HOSTILE_TOOL = """
DESCRIPTION = "lone \\udcff surrogate, NUL \\x00, ESC \\x1b[2J, CSI \\x9b, RLO \\u202e"


def register(ctx):
    result = "not json: \\udcff \\x1b[31m red"
    ctx.register_tool("hostile", "odd", {"description": DESCRIPTION}, lambda args, **kw: result)
"""

FANCY_TOOL = f"""
def register(ctx):
    ctx.register_tool("fancy_tool", "fancy", {{"description": {FANCY!r}}}, lambda args, **kw: "{{}}",
                      requires_env=["HK_FANCY_KEY"])
"""

FAILING_WITH_CONTROLS = """
def register(ctx):
    def post_tool_call(**kwargs):
        raise ValueError("line one\\n\\x1b[2Jline two " + "x" * 5000)

    ctx.register_hook("post_tool_call", post_tool_call)
"""


def cli(home: Path, *args: str, stdin: str | bytes = "", **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = cli_env(home, **env)
    for key in [k for k, v in env.items() if v == ""]:
        environ.pop(key, None)
    return subprocess.run(
        [*CLI, *args],
        env=environ,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=DEADLOCK,
        check=False,
    )


def sane(proc: subprocess.CompletedProcess[bytes], code: int = 0) -> tuple[str, str]:
    """Its exit code is ``code``, no traceback, no raw terminal control; stdout and stderr as text."""
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err
    for control in (b"\x1b", b"\x00", b"\x9b", "\u202e".encode()):
        assert control not in proc.stdout + proc.stderr, control
    return out, err


# --------------------------------------------------------------------------- stdout that cannot encode


@pytest.mark.parametrize("env", [ASCII, C_LOCALE], ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"])
def test_demo_degrades_on_an_ascii_stdout(home, env):
    out, _ = sane(cli(home, "demo", **env))
    assert proc_ascii(out)
    assert "\\u2713 calculator v1.0.0 (2 tools, 1 hook)" in out  # the check mark, escaped
    assert "pre_api_request\\u00d72" in out


def proc_ascii(text: str) -> bool:
    return all(ord(char) < 128 for char in text)


@pytest.mark.parametrize("env", [ASCII, C_LOCALE], ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"])
def test_chat_plugins_on_an_ascii_stdout(home, env):
    script = home / "script.yaml"
    script.write_text(yaml.safe_dump(["Bonjour, ça va ✓"]), encoding="utf-8")
    (home / "config.yaml").write_text("model: {provider: scripted, script: script.yaml}\n", encoding="utf-8")
    out, _ = sane(cli(home, "chat", stdin="/plugins\nsalut\n/help\n", **env))
    assert proc_ascii(out)
    assert "\\u2713 calculator" in out and "Bonjour, \\u00e7a va \\u2713" in out and "/help \\u2014" in out


@pytest.mark.parametrize(
    "argv",
    [["plugins", "list", "--refresh"], ["doctor"], ["plugins", "info", "fancy"], ["tools", "list"]],
    ids=" ".join,
)
def test_listings_on_an_ascii_stdout(home, bundled, argv):
    manifest = {"name": "fancy", "version": "1.0", "description": FANCY, "provides_tools": ["fancy_tool"]}
    write_plugin(home / "plugins", "fancy", FANCY_TOOL, manifest=manifest)
    out, _ = sane(cli(home, *argv, HERMES_BUNDLED_PLUGINS=str(bundled), **ASCII), code=0)
    assert proc_ascii(out) and "fancy" in out
    if argv[-1] in ("fancy", "list"):  # plugins info and tools list show the description
        assert "Caf\\u00e9 \\u2713 \\ud83d\\ude00 na\\u00efve" in out


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_json_on_a_narrow_stdout_reads_back_as_the_same_text(home, bundled, encoding):
    """Escapes JSON understands, surrogate pairs beyond the BMP included: the text round-trips."""
    write_plugin(
        home / "plugins", "fancy", manifest={"name": "fancy", "version": "1.0", "description": FANCY}
    )
    proc = cli(
        home,
        "plugins",
        "list",
        "--refresh",
        "--json",
        HERMES_BUNDLED_PLUGINS=str(bundled),
        PYTHONIOENCODING=encoding,
    )
    sane(proc)
    [fancy] = [p for p in json.loads(proc.stdout.decode(encoding)) if p["name"] == "fancy"]
    assert fancy["description"] == FANCY


def test_undecodable_input_to_chat_on_an_ascii_terminal(home):
    (home / "script.yaml").write_text(yaml.safe_dump(["Got it."]), encoding="utf-8")
    (home / "config.yaml").write_text("model: {provider: scripted, script: script.yaml}\n", encoding="utf-8")
    out, _ = sane(cli(home, "chat", stdin=b"\xff\xfe caf\xc3\xa9 \x80\n/status\n", **ASCII))
    assert "Got it." in out and "1 turn(s)" in out


# --------------------------------------------------------------------------- hostile text from plugins


def test_surrogates_nul_and_controls_in_a_tool_are_shown_not_obeyed(home, bundled):
    write_plugin(home / "plugins", "odd", HOSTILE_TOOL)
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    out, _ = sane(cli(home, "tools", "list", **env))
    assert "lone \\udcff surrogate, NUL \\x00, ESC \\x1b[2J, CSI \\x9b, RLO \\u202e" in out
    proc = cli(home, "tools", "list", "--json", **env)
    sane(proc)
    [tool] = json.loads(proc.stdout)
    assert (
        tool["function"]["description"]
        == "lone \udcff surrogate, NUL \x00, ESC \x1b[2J, CSI \x9b, RLO \u202e"
    )
    proc = cli(home, "tools", "call", "hostile", **env)
    out, _ = sane(proc)
    assert "\\udcff" in out and "\\u001b[31m" in out


def test_a_failed_hook_with_controls_and_a_huge_message_is_one_escaped_line(home):
    write_plugin(home / "plugins", "noisyfail", FAILING_WITH_CONTROLS)
    proc = cli(home, "tools", "call", "calculate", '{"expression": "1+1"}')
    _, err = sane(proc)
    [line] = [text for text in err.splitlines() if "hook failed" in text]
    assert "(ValueError: line one \\x1b[2Jline two xxx" in line and line.endswith("logs/agent.log")
    assert len(line) < 600


def test_controls_in_a_plugin_command_help_are_escaped(home, bundled):
    write_plugin(
        home / "plugins",
        "screamer",
        """
def register(ctx):
    ctx.register_cli_command("scream", "clears \\x1b[2J the screen", lambda p: None, print,
                             description="desc \\x1b]0;title\\x07 here")
""",
    )
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    sane(cli(home, "plugins", "list", "--refresh", **env))  # --help lists what this load saved
    out, _ = sane(cli(home, "--help", **env))
    assert "clears \\x1b[2J the screen" in out
    out, _ = sane(cli(home, "scream", "--help", **env))
    assert "desc \\x1b]0;title\\x07 here" in out


MEGA = """
import os
import sys

CHUNK = "spam " * 200_000  # a megabyte a line
print(CHUNK)
sys.stdout.write(CHUNK + "\\n")
os.write(1, CHUNK.encode() + b"\\n")


def register(ctx):
    print(CHUNK)
"""


@pytest.mark.parametrize(
    "argv", [["plugins", "list", "--refresh", "--json"], ["doctor", "--json"], ["--help"]], ids=" ".join
)
def test_a_plugin_printing_megabytes_leaves_stdout_to_the_command(home, bundled, argv):
    write_plugin(home / "plugins", "mega", MEGA)
    proc = cli(home, *argv, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert b"spam spam" not in proc.stdout
    # --help imports no plugin code, so nothing is printed at all.
    assert proc.stderr.count(b"spam " * 200_000) == (0 if "--help" in argv else 4)
    if "--help" in argv:
        assert proc.stdout.startswith(b"usage: hermes-kernel")
    else:
        json.loads(proc.stdout)


# --------------------------------------------------------------------------- hostile logs, completion lines


def test_log_lines_built_to_break_the_parser(home):
    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b"2026-01-01T00:00:00.000000Z [warning  ] deep [hermes_kernel.k1] x=" + b"[" * 200_000 + b"\n"
        b"2026-01-01T00:00:01.000000Z [warning  ] quote [hermes_kernel.k1] a='unterminated b=2\n"
        b"2026-01-01T00:00:02.000000Z [error    ] bytes [hermes_kernel.k1] v=\xff\xfe\x1b[2J c=1\n"
        b"2026-01-01T00:00:03.000000Z [error    ] huge [hermes_kernel.k1] n=" + b"9" * 100_000 + b"\n"
    )
    proc = cli(home, "logs", "--json")
    sane(proc)
    deep, quote, raw, huge = (json.loads(line) for line in proc.stdout.splitlines())
    assert deep["fields"]["x"] == "[" * 200_000
    assert quote["fields"] == {"a": "'unterminated b=2"}
    assert raw["fields"]["c"] == 1 and "\x1b[2J" in raw["fields"]["v"] and "\ufffd" in raw["fields"]["v"]
    assert huge["fields"]["n"] == "9" * 100_000
    out, _ = sane(cli(home, "logs"))
    assert "\\x1b[2J" in out


@pytest.mark.parametrize(
    "line", ['hermes-kernel "unterminated', "hermes-kernel plugins '", "hermes-kernel \x00 --"]
)
def test_hostile_completion_lines_answer_without_crashing(home, bundled, tmp_path, line):
    answer = tmp_path / "answer.txt"
    env = cli_env(
        home,
        HERMES_BUNDLED_PLUGINS=str(bundled),
        _ARGCOMPLETE="1",
        COMP_LINE=line.replace("\x00", ""),
        COMP_POINT=str(len(line.replace("\x00", ""))),
        _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
    )
    proc = subprocess.run([*CLI], env=env, capture_output=True, timeout=DEADLOCK, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert answer.is_file()


TITLE_SETTER = """
import sys

print("\\x1b]0;pwned\\x07 at import")
sys.stderr.write("\\x1b[2J cleared\\n")


def register(ctx):
    pass
"""


def test_plugin_output_while_a_spinner_runs_is_still_escaped(home, bundled):
    """While the MCP servers connect (a spinner on the terminal, rich printing stderr above it), what a
    plugin writes is shown as escapes, not obeyed."""
    write_plugin(home / "plugins", "titler", TITLE_SETTER)
    server = REPO / "tests" / "fixtures" / "mcp" / "server.py"
    entry = {"command": sys.executable, "args": [str(server), "--hang-start", "1"], "connect_timeout": 60}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"slowpoke": entry}}), encoding="utf-8")
    master, slave = pty.openpty()
    env = cli_env(home, TERM="xterm-256color", HERMES_BUNDLED_PLUGINS=str(bundled))
    proc = subprocess.Popen(
        [*CLI, "tools", "list"], env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    seen = bytearray()
    try:
        read_rest(master, seen)
        assert proc.wait(timeout=DEADLOCK) == 0, seen.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    screen = seen.decode("utf-8", "replace")
    assert "Connecting to MCP servers: slowpoke" in screen and "mcp__slowpoke__echo" in screen
    assert "\x1b]0;pwned" not in screen and "\x1b[2J" not in screen
    assert "\\x1b]0;pwned\\x07 at import" in screen and "\\x1b[2J cleared" in screen
