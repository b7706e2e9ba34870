"""The documentation stays true: its Python examples run as a user runs them, the hook reference matches
the hookspecs, the site's nav lists every page, and docs/cli.md documents every command of the parser.

Convention (also described in docs/index.md): every ```python block in README.md and docs/*.md runs as a
script in its own sandboxed subprocess, unless the nearest non-blank line above its opening fence is
``<!-- no-run -->``.  The sandbox is a fresh ``HOME``, ``HERMES_HOME`` and working directory, with the
checkout's bundled plugins present, as for a user who installed hermes-kernel (``HERMES_BUNDLED_PLUGINS`` is
unset, so the kernel finds ``extensions/`` itself).  ``<!-- run -->`` marks a block as running explicitly
(``<!-- run: bundled -->`` is an older spelling of it).  ``<!-- run: isolated: REASON -->`` runs a block
with an empty bundled directory instead; the reason, saying why the example cannot run beside the bundled
plugins, is required.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import CLI, REPO, cli_env, run_json

from kernel import Kernel, hookspecs
from kernel.core.sources.discovery import ENTRY_POINTS_VARIABLE

DOCS = REPO / "docs"
README = REPO / "README.md"
DOC_FILES = [*sorted(DOCS.glob("*.md")), README]

FENCE_OPEN = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
FENCE_CLOSE = "```"
MARKER = re.compile(r"^<!--\s*(no-run|run|run:\s*bundled|run:\s*isolated(?::\s*(?P<reason>.*?))?)\s*-->$")
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
        """``no-run``, ``run`` or ``isolated`` (``None`` without a marker)."""
        match = MARKER.match(self.above)
        if match is None:
            return None
        word = re.sub(r"\s+", "", match.group(1)).split(":")[:2]
        return {"run:bundled": "run", "run:isolated": "isolated"}.get(":".join(word), word[0])

    @property
    def isolation_reason(self) -> str:
        """Why an ``isolated`` block cannot run beside the bundled plugins ("" when not given)."""
        match = MARKER.match(self.above)
        return (match.group("reason") or "").strip() if match else ""

    @property
    def runs(self) -> bool:
        return self.lang == "python" and self.marker != "no-run"

    @property
    def isolated(self) -> bool:
        return self.marker == "isolated"


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


def _sandbox_env(base: Path, isolated: bool = False) -> dict[str, str]:
    """A user's environment in ``base``: a fresh home, no HERMES_* variable, so the bundled plugins load.

    ``isolated`` points ``HERMES_BUNDLED_PLUGINS`` at an empty directory instead.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    for name in ("user", "hermes"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(base / "user")
    env["HERMES_HOME"] = str(base / "hermes")
    if isolated:
        (base / "no-bundled").mkdir(exist_ok=True)
        env["HERMES_BUNDLED_PLUGINS"] = str(base / "no-bundled")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env[ENTRY_POINTS_VARIABLE] = "none"  # the plugins installed in the environment are not the docs'
    return env


def _run_script(code: str, base: Path, isolated: bool = False) -> subprocess.CompletedProcess[str]:
    work = base / "work"
    work.mkdir(parents=True)
    script = work / "example.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        env=_sandbox_env(base, isolated),
        capture_output=True,
        text=True,
    )


# --------------------------------------------------------------------------
# The examples run
# --------------------------------------------------------------------------


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_example_runs(block: Block, tmp_path: Path) -> None:
    proc = _run_script(block.code, tmp_path / "example", block.isolated)
    assert proc.returncode == 0, (
        f"example {block.id} exited with {proc.returncode}\n--- code ---\n{block.code}"
        f"--- stdout ---\n{proc.stdout}--- stderr ---\n{proc.stderr}"
    )


def test_markers_are_known() -> None:
    typos = [
        f"{b.id}: {b.above}"
        for b in ALL_BLOCKS
        if b.above.startswith("<!--") and ("run" in b.above or "isolated" in b.above) and b.marker is None
    ]
    assert not typos, f"unrecognised run markers (use no-run, run or run: isolated: REASON): {typos}"


def test_isolated_examples_say_why() -> None:
    unexplained = [b.id for b in ALL_BLOCKS if b.isolated and len(b.isolation_reason.split()) < 3]
    assert not unexplained, (
        "`<!-- run: isolated: REASON -->` needs a reason (why the bundled plugins are in the way): "
        f"{unexplained}"
    )


CHECK_BUNDLED = """
import json
from kernel import Kernel
from kernel.core.sources.discovery import bundled_root

with Kernel() as k:
    k.load()
    print(json.dumps({"root": str(bundled_root()), "plugins": [p.name for p in k.plugins if p.enabled],
                      "tools": [s["function"]["name"] for s in k.tools.schemas()]}))
"""


def test_examples_run_with_the_bundled_plugins_present(tmp_path: Path) -> None:
    """The default sandbox is a user's: the checkout's extensions/ load, the calculator's tools are there."""
    proc = _run_script(CHECK_BUNDLED, tmp_path / "default")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert Path(seen["root"]).resolve() == (REPO / "extensions").resolve()
    extensions = REPO / "extensions"
    shipped = {m.parent.relative_to(extensions).as_posix() for m in extensions.glob("**/plugin.yaml")}
    assert shipped and shipped <= set(seen["plugins"]), (sorted(shipped), seen["plugins"])
    assert {"calculate", "unit_convert"} <= set(seen["tools"])


def test_an_isolated_example_sees_no_bundled_plugin(tmp_path: Path) -> None:
    proc = _run_script(CHECK_BUNDLED, tmp_path / "isolated", isolated=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["plugins"] == []


def test_the_isolated_marker_is_parsed(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run: isolated: counts the plugins of an empty kernel -->\n```python\npass\n```\n\n"
        "<!-- run: bundled -->\n```python\npass\n```\n\n<!-- no-run -->\n```python\npass\n```\n",
        encoding="utf-8",
    )
    first, second, third = parse_blocks(page)
    assert (first.marker, first.isolated, first.isolation_reason) == (
        "isolated",
        True,
        "counts the plugins of an empty kernel",
    )
    assert (second.marker, second.isolated, second.runs) == ("run", False, True)
    assert (third.marker, third.runs) == ("no-run", False)


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
    assert any("calculate" in b.code and not b.isolated for b in RUNNABLE), (
        "no example uses the bundled calculator"
    )
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


def test_the_hook_count_is_right() -> None:
    match = re.search(
        r"There are (\d+) hooks: (\d+) lifecycle hooks and (\d+) provider-slot hooks", HOOKS_MD.read_text()
    )
    assert match, "docs/hooks.md should say how many hooks there are"
    total, lifecycle, slots = map(int, match.groups())
    assert (total, lifecycle, slots) == (
        len(SPECS),
        len(SPECS) - len(hookspecs.SLOT_HOOKS),
        len(hookspecs.SLOT_HOOKS),
    )


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


def test_readme_plugin_quick_start(home: Path) -> None:
    """The README's plugin, written where it says, loads and its commands work, beside the bundled plugins."""
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

    names = {path.relative_to(home / "plugins").parts[0] for path in files}
    k = Kernel(home=home)
    try:
        k.load()
        ours = [info for info in k.plugins if info.name in names]
        assert [info.name for info in ours] == sorted(names), "the README plugin was not discovered"
        for info in ours:
            assert info.enabled and info.error is None, info
            assert info.warnings == [], info.warnings
        assert k.plugin("calculator").enabled, "the bundled plugins should be there, as for a user"
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
    env = cli_env(home)
    for command in commands:
        argv = [*CLI, *shlex.split(command)[1:]]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{command!r} failed:\n{proc.stdout}\n{proc.stderr}"
        if " call " in f" {command} ":
            result = run_json(proc.stdout.strip().splitlines()[-1])
            assert "error" not in result, result


# --------------------------------------------------------------------------
# The site's nav lists every page
# --------------------------------------------------------------------------

MKDOCS_YML = REPO / "mkdocs.yml"


class _ConfigLoader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose ``!!python/...`` and ``!relative`` tags are not needed here."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_ConfigLoader.add_constructor("!relative", lambda loader, node: None)


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    return []


def test_every_page_is_in_the_nav() -> None:
    config = yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=_ConfigLoader)
    nav = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_ext" not in p.parts)
    assert "index.md" in pages and "reference/kernel.md" in pages
    missing = [page for page in pages if page not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav (add them): {missing}"
    unknown = [page for page in nav if not page.startswith(("http:", "https:")) and page not in pages]
    assert not unknown, f"mkdocs.yml's nav names pages that do not exist: {unknown}"
    repeated = sorted(page for page, n in Counter(nav).items() if n > 1)
    assert not repeated, f"pages listed twice in the nav: {repeated}"


# --------------------------------------------------------------------------
# docs/cli.md documents every command of the parser
# --------------------------------------------------------------------------

CLI_MD = DOCS / "cli.md"


@dataclass(frozen=True)
class Command:
    path: str  # "plugins install"; "" for hermes-kernel itself
    aliases: tuple[str, ...]
    options: tuple[tuple[str, ...], ...]  # the option strings of each optional argument


def _cli_parser() -> argparse.ArgumentParser:
    """The real parser of ``hermes-kernel`` (its built-in commands), from kernel.cli."""
    from kernel import cli

    for name in ("build_parser", "make_parser", "_parser"):
        factory = getattr(cli, name, None)
        if callable(factory):
            made = factory()
            parser = made[0] if isinstance(made, tuple) else made
            assert isinstance(parser, argparse.ArgumentParser), made
            return parser
    raise AssertionError("kernel.cli has no parser factory (build_parser or _parser)")


def _commands(
    parser: argparse.ArgumentParser, path: str = "", aliases: tuple[str, ...] = ()
) -> list[Command]:
    """``parser``'s command and, recursively, its subcommands (each once, with its aliases)."""
    options = tuple(
        tuple(a.option_strings)
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS
    )
    found = [Command(path, aliases, options)]
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        names: dict[int, list[str]] = {}
        for name, sub in action.choices.items():  # the command's own name first, then its aliases
            names.setdefault(id(sub), []).append(name)
        for name, sub in action.choices.items():
            first, *others = names[id(sub)]
            if name == first:
                found.extend(_commands(sub, f"{path} {name}".strip(), tuple(others)))
    return found


def _backticked(text: str) -> list[str]:
    return [" ".join(span.split()) for span in re.findall(r"`([^`\n]+)`", text)]


def _names(span: str, path: str) -> bool:
    """Whether a backtick span names the command ``path`` (``plugins list``, ``plugins list [--json]``)."""
    return span == path or span.startswith(f"{path} ")


def _cli_scopes() -> tuple[str, dict[str, str]]:
    """The text before the first section, and for each command path the text documenting it: its
    section (a heading naming ``hermes-kernel <path>``, up to the next heading) and its table rows."""
    text = CLI_MD.read_text(encoding="utf-8")
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    intro = outside_code.split("\n## ", 1)[0]
    scopes: dict[str, str] = {}
    parts = re.split(r"^(#{2,6} .*)$", outside_code, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        for span in _backticked(heading):
            if span.startswith("hermes-kernel "):
                path = span.removeprefix("hermes-kernel ")
                scopes[path] = scopes.get(path, "") + heading + body
    for row in re.findall(r"^\|(.+)\|\s*$", outside_code, flags=re.MULTILINE):
        first_cell = row.split("|", 1)[0]
        for span in _backticked(first_cell):
            scopes[span.split(" [")[0]] = scopes.get(span.split(" [")[0], "") + "\n" + row
    return intro, scopes


def _documented(path: str, scopes: dict[str, str]) -> str | None:
    """The documentation of ``path``: every scope naming it (``plugins list`` is in ``plugins list NAME``)."""
    texts = [text for name, text in scopes.items() if _names(name, path)]
    return "\n".join(texts) if texts else None


CLI_COMMANDS = _commands(_cli_parser())


def test_the_parser_is_walked() -> None:
    paths = {c.path for c in CLI_COMMANDS}
    expected = {
        "plugins list",
        "plugins install",
        "tools call",
        "hooks test",
        "gateway run",
        "gateway status",
    }
    assert expected <= paths, sorted(paths)


@pytest.mark.parametrize("command", [c for c in CLI_COMMANDS if c.path], ids=lambda c: c.path)
def test_every_command_is_in_cli_md(command: Command) -> None:
    _, scopes = _cli_scopes()
    text = _documented(command.path, scopes)
    assert text is not None, (
        f"docs/cli.md does not document `hermes-kernel {command.path}`: give it a heading "
        f"(### `hermes-kernel {command.path}`) or a row in the command table"
    )
    spans = _backticked(text)
    for alias in command.aliases:
        parent = command.path.rpartition(" ")[0]
        assert any(s in (alias, f"{parent} {alias}".strip()) for s in spans), (
            f"docs/cli.md: `{command.path}` does not mention its alias `{alias}`"
        )


@pytest.mark.parametrize("command", CLI_COMMANDS, ids=lambda c: c.path or "hermes-kernel")
def test_every_option_is_in_cli_md(command: Command) -> None:
    intro, scopes = _cli_scopes()
    text = intro if not command.path else (_documented(command.path, scopes) or "")
    where = "the part before the first section" if not command.path else f"the section of `{command.path}`"
    missing = []
    for strings in command.options:
        longs = [s for s in strings if s.startswith("--")]
        for option in longs or strings[:1]:
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                missing.append(option)
    assert not missing, f"docs/cli.md: {where} does not mention {missing}"


def test_bundled_plugins_commands_are_documented(tmp_path: Path) -> None:
    """What the bundled plugins add to ``hermes-kernel`` (the sqlite memory's ``sqlite ...``) is in docs/."""
    k = Kernel(home=tmp_path / "hermes", config={"memory": {"provider": "sqlite"}})
    try:
        k.load()
        setups = {name: command.setup_fn for name, command in k.cli_commands.items()}
        memory_cli = k.providers.memory_cli()
        if memory_cli is not None:
            setups[memory_cli[0]] = memory_cli[1]
    finally:
        k.shutdown()
    assert "sqlite" in setups, sorted(setups)
    docs = "\n".join(path.read_text(encoding="utf-8") for path in DOC_FILES)
    undocumented = []
    for name, setup in sorted(setups.items()):
        parser = argparse.ArgumentParser(prog=f"hermes-kernel {name}")
        setup(parser)
        for command in _commands(parser, name):
            if f"hermes-kernel {command.path}" not in docs:
                undocumented.append(command.path)
    assert not undocumented, f"plugin commands no page documents: {undocumented}"
