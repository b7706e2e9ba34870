"""Tracebacks tell where a failure happened, never what the program held (docs/logging.md).

With ``HERMES_PLUGINS_DEBUG`` a failing ``register()`` used to be written with
every frame's local variables: a plugin's ``token = os.environ[...]`` reached
``agent.log`` and stderr in clear text, a failed import was about 250 lines,
and ``hermes-kernel logs -n`` / ``--level`` counted and filtered those lines
instead of records.  The plugins below are real directories loaded by a real
kernel; the CLI runs as a subprocess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import agent_log, run_cli

from kernel import Kernel
from kernel.base.log import RECORD_HEAD, format_traceback

TOKEN = "tok-VALUE-31337"

READS_A_TOKEN = """
import os

def register(ctx):
    token = os.environ["MY_TOKEN"]
    settings = {"api_key": token, "retries": 3}
    raise RuntimeError("the service refused the token")
"""

RECURSES = """
def ping(depth, secret="dive-SECRET-777"):
    return pong(depth + 1, secret)

def pong(depth, secret):
    return ping(depth + 1, secret)

def register(ctx):
    ping(0)
"""

SELF_RECURSES = """
def dive(depth, secret="dive-SECRET-777"):
    return dive(depth + 1, secret)

def register(ctx):
    dive(0)
"""

SECRET_MESSAGE = """
def register(ctx):
    raise ConnectionError(
        "POST https://bot:URLPASS-555@api.example.test/v1?key=QUERYKEY-555 failed; "
        "api_key=MSGKEY-555 password: 'MSGPASS-555'"
    )
"""

RAISING_STR = """
class Unprintable(Exception):
    def __str__(self):
        raise ValueError("__str__ of the exception fails")

def register(ctx):
    raise Unprintable()
"""

FORGES_A_RECORD = """
def register(ctx):
    raise RuntimeError("boom\\n2026-01-01T00:00:00.000000Z [critical ] forged_record plugin=nobody")
"""

STDLIB_EXCEPTION = """
import logging
import os

log = logging.getLogger(__name__)

def register(ctx):
    password = os.environ["MY_TOKEN"]
    try:
        {}["missing"]
    except KeyError:
        log.exception("the plugin caught a failure")
"""


@pytest.fixture
def debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_PLUGINS_DEBUG", "1")
    monkeypatch.setenv("MY_TOKEN", TOKEN)


def records(text: str) -> list[list[str]]:
    """The records of agent.log text: each a head line and its continuation lines."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if RECORD_HEAD.match(line) or not out:
            out.append([line])
        else:
            out[-1].append(line)
    return out


def record_of(text: str, event: str) -> list[str]:
    found = [r for r in records(text) if f"] {event} " in r[0]]
    assert len(found) == 1, text
    return found[0]


def load(home: Path, plugin_dir: Callable[..., Path], code: str, name: str = "hostile") -> Kernel:
    plugin_dir(name, code)
    k = Kernel(home=home)
    k.load()
    return k


def test_a_secret_local_reaches_neither_the_log_nor_stderr(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path], capfd: pytest.CaptureFixture[str]
) -> None:
    with load(home, plugin_dir, READS_A_TOKEN) as k:
        assert not k.plugin("hostile").enabled
    err = capfd.readouterr().err
    text = agent_log(home)
    assert TOKEN not in text and TOKEN not in err, text
    record = record_of(text, "plugin_load_failed")
    body = "\n".join(record)
    init = home / "plugins" / "hostile" / "__init__.py"
    assert f'File "{init}", line 7, in register' in body, body
    assert 'raise RuntimeError("the service refused the token")' in body
    assert record[-1] == "RuntimeError: the service refused the token", body
    assert "locals" not in body and "settings" not in body and "retries" not in body
    assert len(record) < 40, body
    # stderr shows the same record, just as bounded.
    assert body.split("\n", 1)[1] in err


def test_a_deep_recursion_is_bounded_and_says_what_it_left_out(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    with load(home, plugin_dir, RECURSES) as k:
        assert "RecursionError" in (k.plugin("hostile").error or "")
    text = agent_log(home)
    record = record_of(text, "plugin_load_failed")
    assert "dive-SECRET-777" not in text
    assert len(record) <= 70, len(record)
    assert re.search(r"\[\d{3} outer frames left out\]", record[1]), record[1]
    assert record[-1].startswith("RecursionError: maximum recursion depth exceeded")
    # The innermost frames are the ones kept.
    assert record[-3].strip().startswith('File "') and re.search(r"in p[io]ng$", record[-3]), record[-4:]


def test_a_recursion_of_one_frame_is_shown_once_and_counted(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    with load(home, plugin_dir, SELF_RECURSES):
        pass
    record = record_of(agent_log(home), "plugin_load_failed")
    assert len(record) <= 40, len(record)
    assert sum("in dive" in line for line in record) == 3, record
    assert re.search(r"\[the frame above repeated \d{3} more times\]", "\n".join(record)), record
    assert "in register" in "\n".join(record)  # the outer frames are not lost to the repeats


def test_exception_text_is_redacted_in_the_log_the_record_and_plugins_info(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path], capfd: pytest.CaptureFixture[str]
) -> None:
    with load(home, plugin_dir, SECRET_MESSAGE) as k:
        error = k.plugin("hostile").error or ""
    shown = agent_log(home) + capfd.readouterr().err + error
    for secret in ("URLPASS-555", "QUERYKEY-555", "MSGKEY-555", "MSGPASS-555"):
        assert secret not in shown, shown
    assert "ConnectionError" in error and "api.example.test" in error
    info = run_cli(home, "plugins", "info", "hostile")
    assert "ConnectionError" in info.stdout, info.stdout + info.stderr
    for secret in ("URLPASS-555", "QUERYKEY-555", "MSGKEY-555", "MSGPASS-555"):
        assert secret not in info.stdout + info.stderr


def test_an_exception_whose_str_raises_is_still_logged(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path], capfd: pytest.CaptureFixture[str]
) -> None:
    plugin_dir("after")
    with load(home, plugin_dir, RAISING_STR) as k:
        assert not k.plugin("hostile").enabled
        assert k.plugin("after").enabled
    err = capfd.readouterr().err
    assert "Logging error" not in err and "__str__ of the exception fails" not in err, err
    record = record_of(agent_log(home), "plugin_load_failed")
    assert record[-1].startswith("hostile.Unprintable") or "Unprintable" in record[-1], record
    assert any("raise Unprintable()" in line for line in record)


def test_a_plugins_own_logged_exception_follows_the_same_rule(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    with load(home, plugin_dir, STDLIB_EXCEPTION) as k:
        assert k.plugin("hostile").enabled
    text = agent_log(home)
    assert TOKEN not in text
    record = next(r for r in records(text) if "the plugin caught a failure" in r[0])
    assert any('{}["missing"]' in line for line in record), record
    assert record[-1] == "KeyError: 'missing'"


def test_format_traceback_of_an_exception_never_raised() -> None:
    """An exception object that was never raised has no frames: its type and text only."""
    text = format_traceback(ValueError("secret=abc123 in the text"))
    assert text == "ValueError: secret=*** in the text"


# --------------------------------------------------------------------------- hermes-kernel logs


def test_logs_n_counts_records_and_level_keeps_the_traceback_with_its_record(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    with load(home, plugin_dir, READS_A_TOKEN) as k:
        try:
            raise LookupError("failed while looking up")
        except LookupError as exc:
            k.log.error("lookup_failed", plugin="hostile", exc_info=exc)
        k.log.warning("after_the_error", plugin="hostile")
    text = agent_log(home)
    error_record = record_of(text, "lookup_failed")
    assert len(error_record) > 3, error_record

    last = run_cli(home, "logs", "-n", "1")
    assert last.returncode == 0, last.stderr
    assert last.stdout.splitlines() == record_of(text, "after_the_error")

    errors = run_cli(home, "logs", "--level", "error")
    assert errors.stdout.splitlines() == error_record, errors.stdout

    two = run_cli(home, "logs", "--level", "warning", "-n", "2").stdout.splitlines()
    assert two == error_record + record_of(text, "after_the_error")

    as_json = [json.loads(line) for line in run_cli(home, "logs", "--json", "-n", "2").stdout.splitlines()]
    assert [(r["level"], r["event"]) for r in as_json] == [
        ("error", "lookup_failed"),
        ("warning", "after_the_error"),
    ]
    assert as_json[0]["text"].splitlines() == error_record


def test_a_message_cannot_forge_a_record(
    debug: None, home: Path, bundled: Path, plugin_dir: Callable[..., Path]
) -> None:
    """A line break in an exception's text or an event does not start a new record in agent.log."""
    with load(home, plugin_dir, FORGES_A_RECORD) as k:
        k.log.warning("multi\n2026-01-01T00:00:00.000000Z [critical ] forged_event")
    text = agent_log(home)
    heads = [RECORD_HEAD.match(r[0]) for r in records(text)]
    assert all(h is not None and h["level"] != "critical" for h in heads), text
    assert sum("forged" in "\n".join(r) for r in records(text)) == 2
    assert run_cli(home, "logs", "--level", "critical").stdout == ""


def test_logs_follow_keeps_a_traceback_with_its_record(home: Path) -> None:
    """``logs -f --level warning``: a warning's traceback lines are printed, a debug record's are not."""
    import signal
    import subprocess

    from conftest import CLI, cli_env, default_sigint, read_until

    path = home / "logs" / "agent.log"
    path.parent.mkdir(parents=True)
    path.write_text("2026-01-01T00:00:00.000000Z [warning  ] first_record\n", encoding="utf-8")
    proc = subprocess.Popen(
        [*CLI, "logs", "-f", "-n", "1", "--level", "warning"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    try:
        seen = bytearray()
        read_until(proc.stdout.fileno(), "first_record", seen)  # type: ignore[union-attr]
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("2026-01-01T00:00:01.000000Z [debug    ] quiet_record\nquiet traceback line\n")
            handle.flush()
            handle.write(
                "2026-01-01T00:00:02.000000Z [error    ] loud_record\nTraceback (most recent call last):\n"
            )
            handle.write("LookupError: loud traceback line\n")
        read_until(proc.stdout.fileno(), "loud traceback line", seen)  # type: ignore[union-attr]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shown = (seen.decode() + out.decode()).splitlines()
    assert proc.returncode == 130
    assert "quiet traceback line" not in shown and not any("quiet_record" in line for line in shown)
    assert shown[-3:] == [
        "2026-01-01T00:00:02.000000Z [error    ] loud_record",
        "Traceback (most recent call last):",
        "LookupError: loud traceback line",
    ], shown


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr of the field fails")


def test_a_field_that_cannot_be_rendered_still_leaves_its_record(
    debug: None, make_kernel: Callable[..., Kernel], home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """logging's own error report would print the record's fields (secrets included) to stderr."""
    k = make_kernel()
    k.log.warning("odd_field", thing=_BadRepr(), api_key="FIELD-s3cr3t")
    k.log.warning("next_record")
    err = capfd.readouterr().err
    text = agent_log(home)
    assert "Logging error" not in err and "FIELD-s3cr3t" not in err + text, err
    record = record_of(text, "odd_field")
    assert "could not be rendered (RuntimeError)" in record[0]
    assert "] next_record " in text
