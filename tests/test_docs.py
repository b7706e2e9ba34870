"""The documentation stays true: its Python examples run, and the hook reference matches the hookspecs.

Convention (also described in docs/index.md): every ```python block in README.md and docs/*.md runs as a
script in its own sandboxed subprocess, unless the nearest non-blank line above its opening fence is
``<!-- no-run -->``.  ``<!-- run -->`` marks a block as running explicitly; ``<!-- run: bundled -->`` runs
it with the checkout's bundled plugins (the calculator) instead of an empty bundled directory.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import CLI, REPO, cli_env, run_json

from kernel import Kernel, hookspecs

DOCS = REPO / "docs"
README = REPO / "README.md"
DOC_FILES = [*sorted(DOCS.glob("*.md")), README]

FENCE_OPEN = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
FENCE_CLOSE = "```"
MARKER = re.compile(r"^<!--\s*(no-run|run|run:\s*bundled)\s*-->$")
PLUGIN_FILE_COMMENT = re.compile(r"^# ~/\.hermes/plugins/(\S+)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line number of the opening fence
    lang: str
    code: str
    above: str  # the nearest non-blank line above the fence

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def marker(self) -> str | None:
        match = MARKER.match(self.above)
        return re.sub(r"\s+", "", match.group(1)) if match else None

    @property
    def runs(self) -> bool:
        return self.lang == "python" and self.marker != "no-run"

    @property
    def bundled(self) -> bool:
        return self.marker == "run:bundled"


def parse_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE_OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != FENCE_CLOSE:
            end += 1
        assert end < len(lines), f"{path}:{i + 1}: code fence never closed"
        above = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(path, i + 1, match.group(1), code, above))
        i = end + 1
    return blocks


ALL_BLOCKS = [block for path in DOC_FILES if path.is_file() for block in parse_blocks(path)]
RUNNABLE = [block for block in ALL_BLOCKS if block.runs]


def _sandbox_env(base: Path, bundled: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    for name in ("user", "hermes", "bundled"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(base / "user")
    env["HERMES_HOME"] = str(base / "hermes")
    env["HERMES_BUNDLED_PLUGINS"] = str(REPO / "extensions" if bundled else base / "bundled")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


# --------------------------------------------------------------------------
# The examples run
# --------------------------------------------------------------------------


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_example_runs(block: Block, tmp_path: Path) -> None:
    base = tmp_path / "example"
    work = base / "work"
    work.mkdir(parents=True)
    script = work / "example.py"
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        env=_sandbox_env(base, block.bundled),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (
        f"example {block.id} exited with {proc.returncode}\n--- code ---\n{block.code}"
        f"--- stdout ---\n{proc.stdout}--- stderr ---\n{proc.stderr}"
    )


def test_markers_are_known() -> None:
    typos = [
        f"{b.id}: {b.above}"
        for b in ALL_BLOCKS
        if b.above.startswith("<!--") and "run" in b.above and b.marker is None
    ]
    assert not typos, f"unrecognised run markers (use no-run, run or run: bundled): {typos}"


def test_the_required_examples_are_executed() -> None:
    def runnable_in(name: str) -> list[Block]:
        return [b for b in RUNNABLE if b.path == DOCS / name]

    embedding = [b for b in ALL_BLOCKS if b.path == DOCS / "embedding.md" and b.lang == "python"]
    assert len(embedding) >= 5, "docs/embedding.md should show the API with examples"
    skipped = [b.id for b in embedding if not b.runs]
    assert not skipped, f"every Python example of docs/embedding.md must run: {skipped}"

    writes_a_plugin = [
        b
        for b in runnable_in("plugins.md")
        if "plugin.yaml" in b.code and "__init__.py" in b.code and ".load()" in b.code
    ]
    assert writes_a_plugin, (
        "docs/plugins.md needs a runnable example that writes a plugin directory and loads it"
    )
    for name in ("hooks.md", "logging.md"):
        assert runnable_in(name), f"docs/{name} has no executed example"
    assert any(b.bundled for b in RUNNABLE), "no example runs against the bundled calculator"
    assert any(b.path == README for b in RUNNABLE), "the README's embedding quick start should run"


# --------------------------------------------------------------------------
# The hook reference matches kernel/hookspecs.py
# --------------------------------------------------------------------------

HOOKS_MD = DOCS / "hooks.md"
HOOK_HEADING = re.compile(r"^### `([A-Za-z_][A-Za-z0-9_]*)`\s*$", re.MULTILINE)


def _spec_defs() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(Path(hookspecs.__file__).read_text(encoding="utf-8"))
    names = {n for n, f in vars(hookspecs).items() if callable(f) and hasattr(f, "hermes_spec")}
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names}


SPECS = _spec_defs()
KERNEL_FIRED = {
    "pre_tool_call": "k.tools.dispatch",
    "post_tool_call": "k.tools.dispatch",
    "transform_tool_result": "k.tools.dispatch",
    "pre_llm_call": "k.pre_llm_context",
    "pre_approval_request": "k.tools.dispatch",
    "post_approval_response": "k.tools.dispatch",
    "pre_verify": "AgentSession.run",
    "subagent_start": "AgentSession.delegate",
    "subagent_stop": "AgentSession.delegate",
    **{name: "k.load()" for name in hookspecs.SLOT_HOOKS},
}


def _sections() -> dict[str, str]:
    """The text of each ``### `hook``` section of docs/hooks.md, up to the next heading of level 2 or 3."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    matches = list(HOOK_HEADING.finditer(text))
    for match in matches:
        rest = text[match.end() :]
        stop = re.search(r"^#{2,3} ", rest, flags=re.MULTILINE)
        out[match.group(1)] = rest[: stop.start()] if stop else rest
    return out


def _signature(node: ast.FunctionDef) -> tuple[str, list[tuple[str, str]], str]:
    args = [(a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in node.args.args]
    return node.name, args, ast.unparse(node.returns) if node.returns else ""


def test_the_hookspecs_are_found() -> None:
    assert len(SPECS) == 23, sorted(SPECS)


def test_every_hookspec_has_exactly_one_section() -> None:
    headings = Counter(HOOK_HEADING.findall(HOOKS_MD.read_text(encoding="utf-8")))
    missing = sorted(set(SPECS) - set(headings))
    unknown = sorted(set(headings) - set(SPECS))
    repeated = sorted(name for name, n in headings.items() if n > 1)
    assert not (missing or unknown or repeated), f"missing={missing} unknown={unknown} repeated={repeated}"


@pytest.mark.parametrize("hook", sorted(SPECS))
def test_hook_section_matches_the_hookspec(hook: str) -> None:
    section = _sections().get(hook)
    assert section is not None, f"docs/hooks.md has no section for {hook}"
    blocks = [b for b in parse_blocks(HOOKS_MD) if b.lang == "python" and b.code in section]
    assert blocks, f"the section of {hook} has no signature block"
    documented = ast.parse(blocks[0].code).body
    assert len(documented) == 1 and isinstance(documented[0], ast.FunctionDef), blocks[0].code
    assert _signature(documented[0]) == _signature(SPECS[hook]), (
        f"the signature of {hook} differs from hookspecs.py"
    )

    prose = " ".join(section.split())
    undocumented = [arg for arg, _ in _signature(SPECS[hook])[1] if f"`{arg}`" not in prose]
    assert not undocumented, f"{hook}: arguments missing from the table: {undocumented}"
    assert "**Returns" in prose, f"{hook}: no return meaning"
    assert "**Failure policy:**" in prose, f"{hook}: no failure policy"
    where = KERNEL_FIRED.get(hook)
    if where is not None:
        assert where in prose, f"{hook}: the section should say it fires in {where}"
    else:
        assert "fired by the host via `k.invoke_hook`" in prose.lower(), f"{hook}: who fires it?"


# --------------------------------------------------------------------------
# README and links
# --------------------------------------------------------------------------


def test_readme_opens_with_the_two_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# hermes-kernel"
    assert lines[1] == ""
    assert lines[2] == "```sh"
    assert lines[3].split("#")[0].strip() == "make run"
    assert lines[4].split("#")[0].strip() == "make test"
    assert lines[5] == "```"
    first_block = parse_blocks(README)[0]
    assert first_block.line == 3, "the make commands must be the first commands in the README"


def _slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", outside_code, flags=re.MULTILINE)}


def test_relative_links_resolve() -> None:
    broken = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, broken


def test_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = [p.name for p in DOCS.glob("*.md") if p.name != "index.md"]
    unlisted = [name for name in pages if f"({name})" not in index]
    assert not unlisted, f"docs/index.md does not link {unlisted}"


# --------------------------------------------------------------------------
# The README's plugin quick start works as written
# --------------------------------------------------------------------------


def test_readme_plugin_quick_start(home: Path, bundled: Path) -> None:
    files = []
    for block in parse_blocks(README):
        first = block.code.splitlines()[0] if block.code.strip() else ""
        match = PLUGIN_FILE_COMMENT.match(first)
        if match:
            target = home / "plugins" / match.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            files.append(target)
    assert files, "the README shows no plugin files (a block starting with '# ~/.hermes/plugins/...')"

    k = Kernel(home=home)
    try:
        k.load()
        assert k.plugins, "the README plugin was not discovered"
        for info in k.plugins:
            assert info.enabled and info.error is None, info
            assert info.warnings == [], info.warnings
    finally:
        k.shutdown()

    commands = [
        line.split("#")[0].strip()
        for block in parse_blocks(README)
        if block.lang == "sh" and block.marker != "no-run"
        for line in block.code.splitlines()
        if line.startswith("hermes-kernel ")
    ]
    assert commands, "the README shows no hermes-kernel command"
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    for command in commands:
        argv = [*CLI, *shlex.split(command)[1:]]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{command!r} failed:\n{proc.stdout}\n{proc.stderr}"
        if " call " in f" {command} ":
            result = run_json(proc.stdout.strip().splitlines()[-1])
            assert "error" not in result, result
