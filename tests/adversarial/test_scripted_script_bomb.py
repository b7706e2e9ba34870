"""A scripted model's script is YAML from a file: read within the same bounds as every other YAML file
the kernel reads (the C safe loader, alias bombs refused), not with a loader of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernel import Kernel
from kernel.providers.manager import ProviderSelectionError

# A list of turns whose items share one another ten times over, nine levels deep: 10**9 strings to
# anything that walks it (a copy, a dump, the turn's own checks).
BOMB = "\n".join(
    ["- &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"- &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]" for n in range(8)]
)


def test_an_alias_bomb_in_the_script_is_refused_with_the_file_named(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text(BOMB, encoding="utf-8")
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"model": {"provider": "scripted", "script": str(script)}}), encoding="utf-8"
    )
    with Kernel(home=tmp_path) as k, pytest.raises(ProviderSelectionError) as caught:
        k.providers.model()
    named, _, problem = str(caught.value).partition(str(script))
    assert named and "alias" in problem.lower()


def test_a_script_too_deep_for_the_reader_is_refused_not_a_crash(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"model": {"provider": "scripted", "script": str(script)}}), encoding="utf-8"
    )
    with Kernel(home=tmp_path) as k, pytest.raises(ProviderSelectionError) as caught:
        k.providers.model()
    assert str(script) in str(caught.value)
