"""Model provider ``scripted``: replays a YAML script of assistant turns, offline.

Select it with ``model: {provider: scripted, script: PATH}`` in config.yaml
(a relative ``PATH`` is resolved against the Hermes home).  Each call to the
model returns the next turn of the script; when the script runs out the model
says so instead of inventing a reply.  ``demo.yaml`` beside this file is the
conversation used by the demo: four calculator questions, each answered by a
tool call and then a sentence stating the tool's result.
"""

from __future__ import annotations

from pathlib import Path

from kernel.providers import ProviderProfile, register_provider

#: The bundled demo conversation (calculator tool calls and their answers).
DEMO_SCRIPT = Path(__file__).with_name("demo.yaml")

PROFILE = ProviderProfile(
    name="scripted",
    api_mode="scripted",
    display_name="Scripted (offline replay)",
    description=(
        "Offline and deterministic: replays the assistant turns of the YAML file named by model.script."
    ),
    auth_type="none",
    default_model="scripted",
)

register_provider(PROFILE)
