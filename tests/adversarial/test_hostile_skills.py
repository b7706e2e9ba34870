"""``SKILL.md`` files from outside the kernel's control: an oversized one, a front matter that is an
alias bomb or a self-reference.  Each leaves that skill without a description (or refuses to show
it, naming the size) while the other skills are listed and shown; nothing hangs or fills memory.

Real files in a real home, read by a loaded kernel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kernel import Kernel
from kernel.skills import MAX_SKILL_BYTES

BOMB_FRONT = "\n".join(
    ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    + ["description: *a8", "---", "# Bomb", ""]
)


def write_skill(home: Path, name: str, text: str) -> None:
    path = home / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_an_oversized_skill_is_listed_without_a_description_and_not_shown(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    big = "---\ndescription: Too big to show.\n---\n" + "x" * (MAX_SKILL_BYTES + 1)
    write_skill(home, "huge", big)
    write_skill(home, "small", "---\ndescription: Fine.\n---\nsteps\n")
    k = make_kernel()
    assert {s.name: s.description for s in k.skills.all()} == {"huge": "", "small": "Fine."}
    answer = json.loads(k.tools.dispatch("skill_view", {"name": "huge"}))
    assert "content" not in answer
    assert "cannot read skill 'huge'" in answer["error"] and f"{MAX_SKILL_BYTES:,} bytes" in answer["error"]
    assert json.loads(k.tools.dispatch("skill_view", {"name": "small"}))["content"].endswith("steps\n")


def test_a_bombed_or_self_referencing_front_matter_gives_no_description(
    make_kernel: Callable[..., Kernel], home: Path
) -> None:
    write_skill(home, "bomb", BOMB_FRONT)
    write_skill(home, "loop", "---\ndescription: &d [1, *d]\n---\nbody\n")
    write_skill(home, "good", "---\ndescription: Ship it.\n---\nsteps\n")
    k = make_kernel()
    assert {s.name: s.description for s in k.skills.all()} == {"bomb": "", "good": "Ship it.", "loop": ""}
    assert json.loads(k.tools.dispatch("skill_view", {"name": "bomb"}))["content"] == BOMB_FRONT
