"""The ``agent`` section of ``config.yaml``, read by the agent loop and the sessions hosts run."""

from __future__ import annotations

from typing import Any

from ..base.schema import flag, mapping, text, whole, words

_AGENT = mapping(
    {
        "system_prompt": text("a string (the system prompt)"),
        "max_iterations": whole(1, "a whole number of at least 1", "max_iterations: 20"),
        "coding": flag("coding: true"),
        "max_verify_nudges": whole(0, "a whole number (0 or more)", "max_verify_nudges: 3"),
    },
    hermes=words(
        """
        max_turns budget_warning_ratio run_budget_seconds gateway_timeout gateway_turn_lease_timeout
        agent_cache restart_drain_timeout cron_drain_timeout restart_after_turn_timeout
        build_wait_timeout api_max_retries empty_response_guard service_tier fast_auto_seconds
        tool_use_enforcement execution_guidance intent_ack_continuation stall_guards
        task_completion_guidance parallel_tool_call_guidance environment_probe bot_mode_protocol
        environment_hint coding_context coding_instructions verify_guidance verify_on_stop
        gateway_timeout_warning clarify_timeout gateway_notify_interval session_stall_timeout
        sanitizer_heal_escalation_threshold reconnect_attention_after
        gateway_auto_continue_freshness gateway_startup_restore_drain_timeout
        gateway_startup_warmup_timeout local_stream_stale_timeout image_input_mode disabled_toolsets
        reasoning_overrides reasoning_echo reasoning_effort turn_liveness
    """
    ),
    lenient=True,
)


CONFIG_SCHEMA: dict[str, dict[str, Any]] = {"agent": _AGENT}
