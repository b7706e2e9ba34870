"""The ``config.yaml`` sections of the Hermes features this service registers: ``secrets``,
``browser`` and ``auxiliary``."""

from __future__ import annotations

from typing import Any

from ..base.schema import mapping, names, text, words

_SECRETS = mapping(
    {"sources": names("a list of secret source names", "sources: [onepassword]")},
    hermes=("bitwarden", "onepassword"),
    lenient=True,  # other keys are the secret sources' own sections
)

_BROWSER = mapping(
    {"cloud_provider": text("a browser provider name (or local)", "cloud_provider: local")},
    hermes=words(
        """
        backend inactivity_timeout command_timeout snapshot_threshold record_sessions headed
        allow_private_urls engine auto_local_for_private_urls cdp_url use_real_profile
        real_profile_autoclose real_profile_pin allow_unsafe_evaluate restrict_evaluate
        dialog_policy dialog_timeout_s camofox extension_control
    """
    ),
    lenient=True,
)


CONFIG_SCHEMA: dict[str, dict[str, Any]] = {
    "secrets": _SECRETS,
    "browser": _BROWSER,
    "auxiliary": mapping(values={}, expected="a mapping of auxiliary task names to their settings"),
}
