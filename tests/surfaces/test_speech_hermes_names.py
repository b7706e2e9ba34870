"""A Hermes home's speech choices carry over: Hermes Agent's built-in speech providers.

Hermes Agent 0.19 synthesizes with ``edge`` (its default) and transcribes with ``local`` out of the
box, so a Hermes ``config.yaml`` often says ``tts: {provider: edge}`` and ``stt: {provider: local}``.
hermes-kernel has no built-in speech provider: such a name that no plugin offers is a warning that
says so and names the fix, never an error that fails ``doctor``.  Every check runs the real CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, run_json, write_plugin


def doctor(home: Path) -> tuple[int, list[dict[str, Any]]]:
    proc = run_cli(home, "doctor", "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, run_json(proc.stdout)["findings"]


def about(findings: list[dict[str, Any]], word: str) -> list[dict[str, Any]]:
    return [f for f in findings if word in f["problem"]]


@pytest.mark.parametrize(
    ("config", "name"),
    [
        ("tts:\n  provider: edge\n", "edge"),
        ("stt:\n  provider: local\n", "local"),
        ("tts:\n  provider: ElevenLabs\n", "ElevenLabs"),
        ("stt:\n  provider: groq\n  local:\n    model: base\n", "groq"),
    ],
)
def test_a_hermes_built_in_speech_name_is_a_warning_not_an_error(home: Path, config: str, name: str) -> None:
    (home / "config.yaml").write_text(config, encoding="utf-8")
    code, findings = doctor(home)
    assert code == 0, findings
    assert [f for f in findings if f["level"] == "error"] == []
    (warning,) = [f for f in about(findings, f"'{name}'") if f["level"] == "warning"]
    text = warning["problem"] + " " + warning["fix"]
    assert "Hermes Agent" in text and "built-in" in text and "plugin" in text
    kind = "tts" if config.startswith("tts") else "stt"
    assert f"{kind}.providers.{name}" in text, "the command-provider fix is named too"


def test_both_hermes_defaults_at_once_leave_doctor_clean_and_offer_no_speech_tool(home: Path) -> None:
    (home / "config.yaml").write_text("tts:\n  provider: edge\nstt:\n  provider: local\n", encoding="utf-8")
    code, findings = doctor(home)
    assert code == 0 and [f for f in findings if f["level"] == "error"] == [], findings
    warnings = [f for f in findings if f["level"] == "warning"]
    assert len(about(warnings, "'edge'")) == 1 and len(about(warnings, "'local'")) == 1, findings
    tools = run_cli(home, "tools", "list", "--json")
    assert tools.returncode == 0, tools.stderr
    assert "text_to_speech" not in tools.stdout and "transcribe_audio" not in tools.stdout


def test_a_name_that_is_no_hermes_built_in_is_still_an_error(home: Path) -> None:
    (home / "config.yaml").write_text("tts:\n  provider: edgy\n", encoding="utf-8")
    code, findings = doctor(home)
    assert code == 1
    assert [f for f in about(findings, "'edgy'") if f["level"] == "error"], findings


def test_a_plugin_offering_a_hermes_built_in_name_is_used_without_a_warning(home: Path) -> None:
    write_plugin(
        home / "plugins",
        "edge-voice",
        """
        from agent.tts_provider import TTSProvider


        class Edge(TTSProvider):
            @property
            def name(self):
                return "edge"

            def synthesize(self, text, output_path, **kwargs):
                return output_path


        def register(ctx):
            ctx.register_tts_provider(Edge())
        """,
        manifest={"name": "edge-voice", "version": "1.0.0"},
    )
    (home / "config.yaml").write_text(
        "plugins:\n  enabled: [edge-voice]\ntts:\n  provider: edge\n", encoding="utf-8"
    )
    code, findings = doctor(home)
    assert code == 0, findings
    assert [f for f in about(findings, "'edge'") if f["level"] in ("warning", "error")] == [], findings
    tools = run_cli(home, "tools", "list", "--json")
    assert "text_to_speech" in tools.stdout, tools.stdout + tools.stderr
