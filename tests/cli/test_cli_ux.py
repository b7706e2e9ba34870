"""The command line as a user meets it: ``--version``, shell completion, "did you mean", plain help texts,
exit codes, a home left alone, failed hooks shown, JSON kept clean of plugins' output, JSON that carries
what the text shows, and rich tables and colour on a terminal (plain text through a pipe).

Every command runs as a real subprocess (``python -m kernel`` or the installed console script), on a
pseudo-terminal where terminal behaviour matters, against a temporary home with real plugin folders.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pluggy
import pytest
import yaml
from conftest import CLI, REPO, cli_env, default_sigint, read_rest, read_until, run_cli, write_plugin

from kernel.hookspecs import __version__

SCRIPT = Path(sys.executable).parent / "hermes-kernel"
DEADLOCK = 120  # a safety net against a hung child only
ESC = "\x1b["

WEATHER = """
def setup(parser):
    actions = parser.add_subparsers(dest="action", required=True)
    status = actions.add_parser("status", help="Show the ``weather`` service status")
    status.add_argument("--city", default="Oslo", help="the city (see `weather cities`)")
    actions.add_parser("forecast", help="The forecast")


def handle(args):
    print(f"weather {args.action} for {getattr(args, 'city', '-')}")


def register(ctx):
    ctx.register_cli_command(
        "weather-cli", "Weather service tools", setup, handle,
        description="Inspect the ``weather`` service: see `hermes-kernel weather-cli status`.",
    )
"""

# The README's quick-start plugin: a tool, and a post_tool_call hook that prints.
HELLO = """
import json


def hello(args, **kwargs):
    return json.dumps({"greeting": f"Hello, {args.get('name', 'world')}!"})


def log_call(tool_name, duration_ms, **kwargs):
    print(f"{tool_name} took {duration_ms} ms")


def register(ctx):
    schema = {
        "description": "Say hello to someone.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    ctx.register_tool("hello", "hello", schema, hello)
    ctx.register_hook("post_tool_call", log_call)
"""
HELLO_MANIFEST = {
    "name": "hello",
    "version": "0.1.0",
    "provides_tools": ["hello"],
    "provides_hooks": ["post_tool_call"],
}

# Prints at import and in register(), through print, file descriptor 1 and a child process.
NOISY = """
import os
import subprocess
import sys

print("NOISY PRINT AT IMPORT")
os.write(1, b"NOISY FD1 AT IMPORT\\n")
subprocess.run([sys.executable, "-c", "print('NOISY CHILD AT IMPORT')"], check=True)


def register(ctx):
    print("NOISY PRINT IN REGISTER")
    sys.stdout.write("NOISY STDOUT WRITE\\n")
"""
NOISE = ("NOISY PRINT AT IMPORT", "NOISY FD1 AT IMPORT", "NOISY CHILD AT IMPORT", "NOISY PRINT IN REGISTER")

FAILING_HOOK = """
def register(ctx):
    def post_tool_call(**kwargs):
        raise ValueError("the audit log is full")

    ctx.register_hook("post_tool_call", post_tool_call)
"""

TOOL_SCRIPT = [
    {"text": "Computing.", "tool_calls": [{"name": "calculate", "arguments": {"expression": "2**10"}}]},
    "2**10 is 1024.",
    {"text": "Again.", "tool_calls": [{"name": "calculate", "arguments": {"expression": "3**3"}}]},
    "3**3 is 27.",
]


# --------------------------------------------------------------------------- helpers


def cli(home: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, stdin=stdin, **env)


def ok(proc: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def scripted_home(home: Path, script: list[Any]) -> None:
    (home / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False), encoding="utf-8")
    config = {"model": {"provider": "scripted", "script": "script.yaml"}}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def in_pty(
    home: Path, *args: str, env: dict[str, str] | None = None, columns: int = 160, **extra: str
) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal of ``columns``; everything shown."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environ = env if env is not None else cli_env(home, TERM="xterm-256color", **extra)
    environ.pop("COLUMNS", None)
    environ.pop("LINES", None)
    proc = subprocess.Popen(
        [*CLI, *args], env=environ, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    seen = bytearray()
    try:
        read_rest(master, seen)
        code = proc.wait(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, seen.decode("utf-8", "replace")


def completions(line: str, home: Path, tmp_path: Path, **extra: str) -> list[str]:
    """What the installed console script answers to the shell for ``line`` (argcomplete's protocol:
    ``_ARGCOMPLETE``, ``COMP_LINE``, ``COMP_POINT``; the answer in ``_ARGCOMPLETE_STDOUT_FILENAME``)."""
    answer = tmp_path / "completions.txt"
    env = cli_env(
        home,
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL="bash",
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
        **extra,
    )
    proc = subprocess.run(
        [str(SCRIPT)], env=env, capture_output=True, text=True, timeout=DEADLOCK, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [word.strip() for word in answer.read_text(encoding="utf-8").split("\v") if word.strip()]


def files_under(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots for p in root.rglob("*"))


# --------------------------------------------------------------------------- --version


def test_version_is_one_line_with_python_and_pluggy(home):
    expected = (
        f"hermes-kernel {__version__} (Python {platform.python_version()}, pluggy {pluggy.__version__})\n"
    )
    for argv in ([*CLI, "--version"], [str(SCRIPT), "--version"]):
        proc = ok(subprocess.run(argv, env=cli_env(home), capture_output=True, text=True, timeout=DEADLOCK))
        assert proc.stdout == expected and proc.stderr == ""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert __version__ == project["version"]


def test_a_plugin_command_keeps_its_own_version_option(home, bundled):
    code = """
def setup(parser):
    parser.add_argument("--version", action="store_true")


def register(ctx):
    ctx.register_cli_command("versioned", "Has a --version", setup, lambda args: print("versioned 9.9"))
"""
    write_plugin(home / "plugins", "versioned", code)
    proc = ok(cli(home, "versioned", "--version", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert proc.stdout == "versioned 9.9\n"


# --------------------------------------------------------------------------- shell completion


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nospace -o default -o bashdefault -F _python_argcomplete hermes-kernel"),
        ("zsh", "#compdef hermes-kernel"),
        ("fish", "complete --command hermes-kernel"),
    ],
)
def test_completion_prints_the_activation_code(home, shell, marker):
    proc = ok(cli(home, "completion", shell))
    assert marker in proc.stdout and "_ARGCOMPLETE" in proc.stdout
    assert "\\x1b" not in proc.stdout  # printed as is, not escaped


def test_completion_of_unknown_shell_is_a_usage_error(home):
    proc = ok(cli(home, "completion", "tcsh"), code=2)
    assert "invalid choice: 'tcsh'" in proc.stderr


def test_the_console_script_completes_commands_and_subcommands(home, bundled, tmp_path):
    assert completions("hermes-kernel plu", home, tmp_path, HERMES_BUNDLED_PLUGINS=str(bundled)) == [
        "plugins"
    ]
    actions = completions("hermes-kernel plugins ", home, tmp_path, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert {"list", "ls", "install", "info", "enable", "disable", "remove"} <= set(actions), actions
    options = completions("hermes-kernel logs --le", home, tmp_path, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert options == ["--level"]
    top = completions("hermes-kernel --ver", home, tmp_path, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert top == ["--version"]


def test_a_plugin_cli_command_completes_too(home, bundled, tmp_path):
    write_plugin(home / "plugins", "weather", WEATHER)
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    # Never loaded: its command is not known yet (completing a command's name imports no plugin).
    assert completions("hermes-kernel wea", home, tmp_path, **env) == []
    ok(cli(home, "plugins", "list", "--refresh", **env))
    saved = (home / "cache" / "plugins-state.json").read_bytes()
    assert completions("hermes-kernel wea", home, tmp_path, **env) == ["weather-cli"]
    assert set(completions("hermes-kernel weather-cli ", home, tmp_path, **env)) >= {"status", "forecast"}
    assert completions("hermes-kernel weather-cli status --ci", home, tmp_path, **env) == ["--city"]
    # Completing never writes the plugin list a real command saves.
    assert (home / "cache" / "plugins-state.json").read_bytes() == saved


def test_bash_completes_through_the_activation_code(home, bundled, tmp_path):
    """The real thing: bash evaluates ``hermes-kernel completion bash`` and runs its completion function
    the way Tab does; the script answers on file descriptor 8."""
    write_plugin(home / "plugins", "weather", WEATHER)
    script = textwrap.dedent(
        """
        eval "$(hermes-kernel completion bash)"
        complete -p hermes-kernel
        for line in "hermes-kernel plu" "hermes-kernel plugins in" "hermes-kernel weather-cli fo"; do
            COMP_LINE="$line"
            COMP_POINT=${#COMP_LINE}
            COMPREPLY=()
            _python_argcomplete hermes-kernel
            echo "$line => ${COMPREPLY[*]}"
        done
        """
    )
    env = cli_env(
        home, HERMES_BUNDLED_PLUGINS=str(bundled), PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}"
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLOCK,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-F _python_argcomplete hermes-kernel" in proc.stdout
    answers = dict(line.split(" => ") for line in proc.stdout.splitlines() if " => " in line)
    assert answers["hermes-kernel plu"].split() == ["plugins"]
    assert set(answers["hermes-kernel plugins in"].split()) == {"info", "install"}
    assert answers["hermes-kernel weather-cli fo"].split() == ["forecast"]


# --------------------------------------------------------------------------- did you mean


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plugin", "list"], "error: unknown command 'plugin' — did you mean 'plugins'?"),
        (["plugins", "lsit"], "error: unknown command 'lsit' — did you mean 'list'"),
        (["tools", "cal", "x"], "error: unknown command 'cal' — did you mean 'call'?"),
        (["hooks", "tset"], "error: unknown command 'tset' — did you mean 'test'?"),
        (["gateway", "stats"], "error: unknown command 'stats' — did you mean 'status'?"),
        (["weather-clj", "status"], "error: unknown command 'weather-clj' — did you mean 'weather-cli'?"),
        (["weather-cli", "statsu"], "error: unknown command 'statsu' — did you mean 'status'?"),
        (["xyzzy"], "error: unknown command 'xyzzy' (choose from: chat, completion, demo, doctor,"),
    ],
)
def test_a_mistyped_command_gets_the_closest_ones_at_every_level(home, bundled, argv, expected):
    write_plugin(home / "plugins", "weather", WEATHER)
    proc = ok(cli(home, *argv, HERMES_BUNDLED_PLUGINS=str(bundled)), code=2)
    assert expected in proc.stderr, proc.stderr
    assert proc.stdout == ""


# --------------------------------------------------------------------------- plain help texts


def _command_paths() -> list[list[str]]:
    """Every command and subcommand of the built-in parser (its tree, read from the parser itself)."""
    import argparse

    from kernel.cli import _parser

    parser, _ = _parser()
    paths: list[list[str]] = []

    def walk(node: argparse.ArgumentParser, path: list[str]) -> None:
        paths.append(path)
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if child.prog.split()[-1] == name:  # aliases name the same parser
                        walk(child, [*path, name])

    walk(parser, [])
    return paths


COMMAND_PATHS = _command_paths()


def test_the_command_tree_is_the_documented_one():
    names = {" ".join(path) for path in COMMAND_PATHS}
    assert {"plugins install", "plugins list", "tools call", "logs", "completion", "gateway run"} <= names


def test_a_command_of_the_clis_own_is_parsed_by_its_own_part(home, bundled):
    """Each command of the CLI's own, built alone, is what the whole parser has for it (what it
    imports is checked in tests/core/test_plugins_state.py)."""
    import argparse

    from kernel.cli import BUILTIN_COMMANDS, _parser

    _, commands = _parser()
    assert set(commands.choices) == BUILTIN_COMMANDS
    for name in BUILTIN_COMMANDS:
        _, alone = _parser(name)
        assert name in alone.choices
        assert alone.choices[name].format_help() == commands.choices[name].format_help()
        subs = [a for a in alone.choices[name]._actions if isinstance(a, argparse._SubParsersAction)]
        whole = [a for a in commands.choices[name]._actions if isinstance(a, argparse._SubParsersAction)]
        assert [sorted(a.choices) for a in subs] == [sorted(a.choices) for a in whole]


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "top")
def test_help_reads_as_plain_text(home, bundled, path):
    proc = ok(cli(home, *path, "--help", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert proc.stdout.startswith("usage: hermes-kernel")
    assert "`" not in proc.stdout, proc.stdout


def test_plugins_install_help_keeps_its_words_without_markup(home):
    text = ok(cli(home, "plugins", "install", "--help")).stdout
    assert "pip:REQUIREMENT" in text and "plugin.yaml" in text and "``" not in text


def test_a_plugin_command_help_reads_as_plain_text(home, bundled):
    write_plugin(home / "plugins", "weather", WEATHER)
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    top = ok(cli(home, "weather-cli", "--help", **env)).stdout
    assert "Inspect the weather service: see hermes-kernel weather-cli status." in top
    sub = ok(cli(home, "weather-cli", "status", "--help", **env)).stdout
    assert "the city (see weather cities)" in sub and "`" not in top + sub


# --------------------------------------------------------------------------- exit codes


def test_logs_follow_exits_130_on_sigint(home):
    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True)
    path.write_text("2026-01-01T00:00:00.000000Z [warning  ] first_record\n", encoding="utf-8")
    proc = subprocess.Popen(
        [*CLI, "logs", "-f"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], DEADLOCK)
        assert ready and "first_record" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- the home is left alone


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["plugins", "--help"],
        ["--version"],
        ["completion", "bash"],
        ["plugins", "install", "--help"],
        ["chat", "-h"],
    ],
    ids=" ".join,
)
def test_printing_help_version_or_completion_writes_nothing(tmp_path, argv):
    user_home = tmp_path / "fresh-user"
    user_home.mkdir()
    hermes = tmp_path / "fresh-hermes"
    hermes.mkdir()
    env = cli_env(hermes, HOME=str(user_home))
    ok(subprocess.run([*CLI, *argv], env=env, capture_output=True, text=True, timeout=DEADLOCK))
    env.pop("HERMES_HOME")  # ~/.hermes, the default home, is not created either
    ok(subprocess.run([*CLI, *argv], env=env, capture_output=True, text=True, timeout=DEADLOCK))
    assert files_under(hermes, user_home) == []


def test_top_level_help_saves_no_plugin_list(home, bundled):
    """``--help`` lists the plugins' commands from the last load (it loads none) and saves nothing."""
    write_plugin(home / "plugins", "weather", WEATHER)
    proc = ok(cli(home, "--help", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert "weather-cli" not in proc.stdout  # never loaded here: not known yet, and the help says so
    assert "plugins list --refresh" in " ".join(proc.stdout.split())
    assert not (home / "cache" / "plugins-state.json").exists()
    assert not (home / "logs").exists()
    ok(cli(home, "plugins", "list", "--refresh", HERMES_BUNDLED_PLUGINS=str(bundled)))
    saved = {p: p.read_bytes() for p in (home / "cache").iterdir()}
    proc = ok(cli(home, "--help", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert "weather-cli" in proc.stdout
    assert {p: p.read_bytes() for p in (home / "cache").iterdir()} == saved


# --------------------------------------------------------------------------- failed hooks are shown


def _failing_home(home: Path) -> None:
    scripted_home(home, TOOL_SCRIPT)
    write_plugin(home / "plugins", "auditor", FAILING_HOOK)


def _hook_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "hook failed" in line]


def test_run_shows_a_failed_hook_on_stderr_once(home):
    _failing_home(home)
    proc = ok(cli(home, "run", "What is 2**10?"))
    assert proc.stdout == "2**10 is 1024.\n"
    log = home / "logs" / "agent.log"
    assert _hook_warnings(proc.stderr) == [
        "warning: plugin 'auditor': its post_tool_call hook failed (ValueError: the audit log is full) "
        f"and is disabled; see {log}"
    ]
    assert "hook_failed" in log.read_text(encoding="utf-8")


def test_chat_shows_a_failed_hook_after_the_turn_once(home):
    _failing_home(home)
    proc = ok(cli(home, "chat", stdin="What is 2**10?\nAnd 3**3?\n"))
    assert "2**10 is 1024." in proc.stdout and "3**3 is 27." in proc.stdout
    [warning] = _hook_warnings(proc.stderr)
    assert warning.startswith("warning: plugin 'auditor': its post_tool_call hook failed (ValueError:")


def test_tools_call_shows_a_failed_hook_and_keeps_its_json(home):
    write_plugin(home / "plugins", "auditor", FAILING_HOOK)
    proc = ok(cli(home, "tools", "call", "calculate", '{"expression": "6*7"}'))
    assert json.loads(proc.stdout)["result"] == 42
    assert len(_hook_warnings(proc.stderr)) == 1


# --------------------------------------------------------------------------- JSON stays JSON


def test_the_readme_plugin_printing_in_a_hook_leaves_tools_call_json(home):
    write_plugin(home / "plugins", "hello", HELLO, manifest=HELLO_MANIFEST)
    proc = ok(cli(home, "tools", "call", "hello", '{"name": "Ada"}'))
    assert json.loads(proc.stdout) == {"greeting": "Hello, Ada!"}
    assert re.search(r"^hello took \d+ ms$", proc.stderr, re.M), proc.stderr


def test_the_readme_plugin_printing_in_a_hook_leaves_run_json(home):
    write_plugin(home / "plugins", "hello", HELLO, manifest=HELLO_MANIFEST)
    scripted_home(home, [{"tool_calls": [{"name": "hello", "arguments": {"name": "Ada"}}]}, "Said hello."])
    proc = ok(cli(home, "run", "--json", "Greet Ada"))
    data = json.loads(proc.stdout)
    assert data["reply"] == "Said hello." and json.loads(data["tool_calls"][0]["result"])["greeting"]
    assert "hello took" in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["plugins", "list", "--json", "--refresh"],
        ["doctor", "--json"],
        ["tools", "list", "--json"],
        ["providers", "list", "--json"],
        ["hooks", "list", "--json"],
        ["gateway", "status", "--json"],
        ["plugins", "info", "noisy", "--json"],
    ],
    ids=" ".join,
)
def test_a_plugin_printing_at_import_leaves_json_output_valid(home, bundled, argv):
    write_plugin(home / "plugins", "noisy", NOISY)
    proc = cli(home, *argv, HERMES_BUNDLED_PLUGINS=str(bundled))
    assert proc.returncode in (0, 1), proc.stderr  # doctor: 1 when it found errors
    json.loads(proc.stdout)
    for noise in NOISE:
        assert noise not in proc.stdout and noise in proc.stderr, noise


def test_a_plugin_printing_at_import_stays_out_of_help(home, bundled):
    write_plugin(home / "plugins", "noisy", NOISY)
    write_plugin(home / "plugins", "weather", WEATHER)
    ok(cli(home, "plugins", "list", "--refresh", HERMES_BUNDLED_PLUGINS=str(bundled)))
    proc = ok(cli(home, "--help", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert "weather-cli" in proc.stdout
    # --help imports no plugin: nothing of the noise anywhere.
    assert not any(noise in proc.stdout + proc.stderr for noise in NOISE)


def test_a_plugin_printing_at_import_stays_out_of_a_text_listing(home, bundled):
    write_plugin(home / "plugins", "noisy", NOISY)
    proc = ok(cli(home, "plugins", "list", "--refresh", HERMES_BUNDLED_PLUGINS=str(bundled)))
    assert proc.stdout.splitlines()[0].split() == [
        "NAME",
        "VERSION",
        "KIND",
        "SOURCE",
        "STATUS",
        "TOOLS",
        "HOOKS",
    ]
    assert not any(noise in proc.stdout for noise in NOISE)


# --------------------------------------------------------------------------- JSON carries what the text shows


def test_logs_json_carries_every_field_the_text_shows(home):
    write_plugin(home / "plugins", "auditor", FAILING_HOOK)
    ok(cli(home, "tools", "call", "calculate", '{"expression": "1+1"}'))
    text = ok(cli(home, "logs", "--level", "warning")).stdout.splitlines()
    records = [
        json.loads(line) for line in ok(cli(home, "logs", "--level", "warning", "--json")).stdout.splitlines()
    ]
    assert len(text) == len(records) and text
    for line, record in zip(text, records, strict=True):
        assert record["text"] == line
        time_shown, rest = line.split(" [", 1)
        assert record["time"] == time_shown and record["level"] == rest.split("]", 1)[0].strip()
        assert f"] {record['event']} [{record['logger']}]" in line
        for key in re.findall(r"(?<= )([a-z_]+)=", line.split(f"[{record['logger']}]", 1)[1]):
            assert key in record["fields"], (key, record)
    [failure] = [r for r in records if r["event"] == "hook_failed"]
    assert failure["fields"]["plugin"] == "auditor" and failure["fields"]["hook"] == "post_tool_call"
    assert failure["fields"]["error"] == "ValueError: the audit log is full"
    assert failure["logger"].startswith("hermes_kernel.k")


def test_logs_json_reads_quoted_and_bracketed_values(home):
    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True)
    path.write_text(
        "2026-01-01T00:00:00.000000Z [warning  ] manifest_drift [hermes_kernel.k1] "
        "hooks=['a b', 'c=d'] plugin=x note='it\\'s x=1' count=3 path=/a b/c\n"
        "2026-01-01T00:00:01.000000Z [error    ] something odd happened [plugin.logger] \n",
        encoding="utf-8",
    )
    first, second = (json.loads(line) for line in ok(cli(home, "logs", "--json")).stdout.splitlines())
    assert first["event"] == "manifest_drift" and first["logger"] == "hermes_kernel.k1"
    assert first["fields"] == {
        "hooks": ["a b", "c=d"],
        "plugin": "x",
        "note": "it's x=1",
        "count": 3,
        "path": "/a b/c",
    }
    assert (second["event"], second["logger"], second["fields"]) == (
        "something odd happened",
        "plugin.logger",
        {},
    )


GATED_TOOL = """
import json


def register(ctx):
    ctx.register_tool("forecast", "weather", {"description": "The forecast.\\nSecond line."},
                      lambda args, **kw: json.dumps({}), requires_env=["HK_UX_WEATHER_KEY"])
    ctx.register_tool("radar", "weather", {"description": "The radar picture."},
                      lambda args, **kw: json.dumps({}))
"""


def test_tools_list_json_carries_every_field_the_text_shows(home, bundled):
    write_plugin(home / "plugins", "weather", GATED_TOOL)
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    text = ok(cli(home, "tools", "list", **env)).stdout.splitlines()
    records = json.loads(ok(cli(home, "tools", "list", "--json", **env)).stdout)
    assert len(text) == len(records)
    pattern = re.compile(r"^(\S+)  \[([^/\]]+)/([^\]]+)\]  (.*?)(?:  \(unavailable: (.*)\))?$")
    for line, record in zip(text, records, strict=True):
        name, plugin, toolset, summary, reason = pattern.match(line).groups()
        assert (record["function"]["name"], record["plugin"], record["toolset"]) == (name, plugin, toolset)
        assert record["summary"] == summary and record["type"] == "function"
        assert record["available"] is (reason is None) and record["reason"] == reason
    by_name = {r["function"]["name"]: r for r in records}
    assert by_name["forecast"]["reason"] == "missing environment variable(s): HK_UX_WEATHER_KEY"
    assert by_name["forecast"]["function"]["description"] == "The forecast.\nSecond line."
    assert by_name["radar"]["available"] is True and by_name["radar"]["reason"] is None


# --------------------------------------------------------------------------- rich on a terminal, plain piped

BOX = "─"  # rich's table rule

PLAIN_LISTING = """\
NAME     VERSION  KIND        SOURCE  STATUS   TOOLS  HOOKS
auditor  0.1.0    standalone  user    enabled  0      1
    warning: registers hook(s) not in provides_hooks of {manifest}: post_tool_call
weather  0.1.0    standalone  user    enabled  2      0
    warning: registers tool(s) not in provides_tools of {weather}: forecast, radar
"""


@pytest.fixture
def listed_home(home: Path, bundled: Path) -> Path:
    write_plugin(home / "plugins", "auditor", FAILING_HOOK)
    write_plugin(home / "plugins", "weather", GATED_TOOL)
    return home


def test_plugins_list_through_a_pipe_is_exactly_the_plain_table(listed_home, bundled):
    proc = ok(cli(listed_home, "plugins", "list", "--refresh", HERMES_BUNDLED_PLUGINS=str(bundled)))
    plugins = listed_home / "plugins"
    assert proc.stdout == PLAIN_LISTING.format(
        manifest=plugins / "auditor" / "plugin.yaml", weather=plugins / "weather" / "plugin.yaml"
    )


def test_plugins_list_on_a_terminal_is_a_rich_table_in_colour(listed_home, bundled):
    code, screen = in_pty(listed_home, "plugins", "list", "--refresh", HERMES_BUNDLED_PLUGINS=str(bundled))
    assert code == 0, screen
    assert BOX in screen and ESC in screen
    assert "\x1b[32menabled\x1b[0m" in screen  # the status in green
    assert "auditor: warning: registers hook(s)" in screen
    assert "Traceback" not in screen


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["plugins", "list"], {"NO_COLOR": "1"}),
        (["--no-color", "plugins", "list"], {}),
        (["plugins", "list", "--no-color"], {}),
    ],
    ids=["NO_COLOR", "--no-color first", "--no-color last"],
)
def test_no_color_on_a_terminal_draws_the_table_without_escape_codes(listed_home, bundled, argv, extra):
    code, screen = in_pty(listed_home, *argv, HERMES_BUNDLED_PLUGINS=str(bundled), **extra)
    assert code == 0, screen
    assert BOX in screen and "auditor" in screen and "weather" in screen
    assert "\x1b" not in screen, repr(screen)


def test_a_dumb_terminal_gets_the_plain_text(listed_home, bundled):
    env = cli_env(listed_home, TERM="dumb", HERMES_BUNDLED_PLUGINS=str(bundled))
    code, screen = in_pty(listed_home, "plugins", "list", "--refresh", env=env)
    assert code == 0, screen
    assert screen.replace("\r\n", "\n").startswith("NAME     VERSION  KIND        SOURCE")
    assert BOX not in screen and "\x1b" not in screen


def test_tools_and_providers_lists_on_a_terminal(listed_home, bundled):
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    code, screen = in_pty(listed_home, "tools", "list", **env)
    assert code == 0 and BOX in screen and ESC in screen, screen
    assert "missing environment variable(s): HK_UX_WEATHER_KEY" in screen
    plain = ok(cli(listed_home, "tools", "list", **env)).stdout
    assert BOX not in plain and "\x1b" not in plain and plain.startswith("forecast  [weather/weather]")
    code, screen = in_pty(listed_home, "providers", "list")  # the real bundled providers
    assert code == 0 and BOX in screen and "SLOT" in screen and "scripted" in screen, screen


def test_doctor_and_logs_are_coloured_by_level_on_a_terminal(listed_home, bundled):
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    ok(cli(listed_home, "tools", "call", "radar", "{}", **env))  # the failing hook logs hook_failed
    code, screen = in_pty(listed_home, "logs", **env)
    assert code == 0, screen
    assert re.search(r"\x1b\[33m[^\n]*hook_failed", screen), repr(screen)  # warnings in yellow
    write_plugin(listed_home / "plugins", "broken", "import hk_no_such_module\n")
    code, screen = in_pty(listed_home, "doctor", **env)
    assert code == 1, screen
    assert re.search(r"\x1b\[1;31m\[error\] plugin 'broken'", screen), repr(screen)
    assert re.search(r"\x1b\[33m\[warn\]  tool 'forecast'", screen), repr(screen)
    plain = cli(listed_home, "doctor", **env).stdout
    assert "\x1b" not in plain and "[error] plugin 'broken': import failed" in plain


def test_an_mcp_connect_shows_progress_on_a_terminal_only(home, bundled):
    server = REPO / "tests" / "fixtures" / "mcp" / "server.py"
    entry = {"command": sys.executable, "args": [str(server), "--hang-start", "1.5"], "connect_timeout": 60}
    (home / "config.yaml").write_text(yaml.safe_dump({"mcp_servers": {"slowpoke": entry}}), encoding="utf-8")
    env = {"HERMES_BUNDLED_PLUGINS": str(bundled)}
    code, screen = in_pty(home, "tools", "list", **env)
    assert code == 0, screen
    assert "Connecting to MCP servers: slowpoke" in screen and "mcp__slowpoke__echo" in screen
    piped = ok(cli(home, "tools", "list", **env))
    assert "Connecting" not in piped.stdout + piped.stderr and "mcp__slowpoke__echo" in piped.stdout


SLOW_PLATFORM = """
import asyncio

from kernel.gateway import BasePlatformAdapter, SendResult


class Slow(BasePlatformAdapter):
    async def connect(self, *, is_reconnect=False):
        await asyncio.sleep(1.5)
        self._mark_connected()
        return True

    async def send(self, chat_id, content, reply_to=None, metadata=None):
        return SendResult(success=True)

    async def disconnect(self):
        self._mark_disconnected()


def register(ctx):
    ctx.register_platform(name="slowchat", label="Slow chat", adapter_factory=Slow)
"""


def _slow_platform_home(home: Path) -> None:
    write_plugin(
        home / "plugins" / "platforms",
        "slowchat",
        SLOW_PLATFORM,
        manifest={"name": "slowchat", "kind": "platform"},
    )
    config = {"gateway": {"platforms": {"slowchat": {"enabled": True}}}}
    (home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def _gateway_until_connected(env: dict[str, str], *, terminal: bool) -> tuple[int, str]:
    """``gateway run`` until it says the platform connected, then SIGINT; its exit code and output."""
    if terminal:
        master, slave = pty.openpty()
        streams: dict[str, Any] = {"stdin": slave, "stdout": slave, "stderr": slave}
    else:
        master, slave = os.pipe()
        streams = {"stdin": subprocess.DEVNULL, "stdout": slave, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(
        [*CLI, "gateway", "run"], env=env, start_new_session=True, preexec_fn=default_sigint, **streams
    )
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, "connected slowchat", seen)
        proc.send_signal(signal.SIGINT)
        read_rest(master, seen)
        code = proc.wait(timeout=DEADLOCK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, seen.decode("utf-8", "replace")


def test_gateway_connects_show_progress_on_a_terminal_only(home, bundled):
    _slow_platform_home(home)
    env = cli_env(home, TERM="xterm-256color", HERMES_BUNDLED_PLUGINS=str(bundled))
    code, screen = _gateway_until_connected(env, terminal=True)
    assert code == 0, screen
    assert "Connecting slowchat" in screen and "hermes-kernel gateway: connected slowchat" in screen
    code, text = _gateway_until_connected(env, terminal=False)
    assert code == 0, text
    assert text.splitlines() == [
        "hermes-kernel gateway: starting slowchat; Ctrl-C to stop",
        "hermes-kernel gateway: connected slowchat",
        "hermes-kernel gateway: stopped",
    ]


def test_the_chat_prompt_is_coloured_on_a_colour_terminal(home):
    scripted_home(home, ["Hello."])
    env = cli_env(home, TERM="xterm-256color")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "chat"], env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True
    )
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, "you>\x1b[0m ", seen)
        os.write(master, b"\x04")  # Ctrl-D leaves
        assert proc.wait(timeout=DEADLOCK) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert "\x1b[1;36myou>\x1b[0m " in seen.decode("utf-8", "replace")
