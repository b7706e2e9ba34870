"""The documentation site builds strictly and offline, and its API reference covers the public API.

One strict build (``mkdocs build --strict``, as ``make docs`` runs it) into a temporary folder, with every
proxy variable pointing at a closed port so that a fetch at build time would fail; the tests then read
the HTML it wrote.
"""

from __future__ import annotations

import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

import kernel
from kernel import hookspecs, pytest_plugin

MKDOCS_YML = REPO / "mkdocs.yml"
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing answers there
EXTERNAL_ASSET = re.compile(
    r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.IGNORECASE
)


class _ConfigLoader(yaml.SafeLoader):
    """Reads mkdocs.yml, whose ``!!python/...`` and ``!relative`` tags are not needed here."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_ConfigLoader.add_constructor("!relative", lambda loader, node: None)


def _config() -> dict:
    return yaml.load(MKDOCS_YML.read_text(encoding="utf-8"), Loader=_ConfigLoader)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module: strict, with no network reachable through a proxy."""
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[name] = DEAD_PROXY
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    env["NO_MKDOCS_2_WARNING"] = "1"
    env["HOME"] = str(tmp_path_factory.mktemp("home"))
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, warnings
    return out


def _page(site: Path, page: str) -> str:
    """The HTML of a docs page (``cli.md`` is ``cli/index.html``, ``index.md`` is ``index.html``)."""
    stem = page.removesuffix(".md")
    path = site / "index.html" if stem == "index" else site / stem / "index.html"
    return path.read_text(encoding="utf-8")


def _anchors(text: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', text))


def test_the_config_builds_offline_and_strictly() -> None:
    config = _config()
    assert config["strict"] is True
    assert config["theme"]["name"] == "material"
    assert config["theme"]["font"] is False, "theme.font must be false: Google Fonts would be fetched"
    plugins = [next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]]
    assert plugins[:2] == ["search", "mkdocstrings"], plugins
    assert "extra_javascript" not in config and "extra_css" not in config
    assert config["validation"]["anchors"] == "warn", "broken anchors must fail the strict build"


def test_every_nav_page_is_rendered(site: Path) -> None:
    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        items = nav.values() if isinstance(nav, dict) else nav if isinstance(nav, list) else []
        return [page for item in items for page in pages(item)]

    rendered = {page: _page(site, page) for page in pages(_config()["nav"])}
    assert len(rendered) > 30
    empty = [page for page, text in rendered.items() if "<h1" not in text]
    assert not empty, f"pages without a title: {empty}"


def test_nothing_is_loaded_from_another_site(site: Path) -> None:
    offenders = []
    for path in site.rglob("*"):
        if path.suffix not in (".html", ".css", ".js", ".json") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "fonts.googleapis" in text or "fonts.gstatic" in text:
            offenders.append(f"{path.relative_to(site)}: Google Fonts")
        if path.suffix == ".html" and EXTERNAL_ASSET.search(text):
            offenders.append(f"{path.relative_to(site)}: {EXTERNAL_ASSET.search(text).group(0)}")
        if path.suffix == ".css" and re.search(r"@import\s+url\(\s*['\"]?(?:https?:)?//", text):
            offenders.append(f"{path.relative_to(site)}: @import from another site")
    assert not offenders, offenders
    assert (site / "search" / "search_index.json").is_file(), "the search index is built locally"


def test_the_api_reference_covers_kernels_exports(site: Path) -> None:
    anchors = _anchors(_page(site, "reference/kernel.md"))
    missing = []
    for name in kernel.__all__:
        if name == "__version__":
            continue
        obj = getattr(kernel, name)
        canonical = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', name)}"
        if f"kernel.{name}" not in anchors and canonical not in anchors:
            missing.append(name)
    assert not missing, f"reference/kernel.md does not render {missing}"


@pytest.mark.parametrize(
    ("page", "names"),
    [
        ("reference/agent.md", ["kernel.agent.AgentSession", "kernel.agent.TurnResult"]),
        ("reference/testing.md", ["kernel.testing.TestKernel", "kernel.testing.HookRecorder"]),
        (
            "reference/providers.md",
            [
                "kernel.providers.MemoryProvider",
                "kernel.providers.ContextEngine",
                "kernel.providers.ImageGenProvider",
                "kernel.providers.ProviderProfile",
                "kernel.providers.transport.ChatCompletionsTransport",
            ],
        ),
        ("reference/tools.md", ["kernel.tools.ToolRegistry", "kernel.tools.Tool"]),
        (
            "reference/registrations.md",
            ["kernel.registrations.Registrations", "kernel.registrations.SecretSource"],
        ),
    ],
)
def test_the_reference_pages_render_their_objects(site: Path, page: str, names: list[str]) -> None:
    anchors = _anchors(_page(site, page))
    assert [n for n in names if n not in anchors] == []


def test_every_hookspec_is_in_the_reference(site: Path) -> None:
    anchors = _anchors(_page(site, "reference/hookspecs.md"))
    specs = [n for n, f in vars(hookspecs).items() if callable(f) and hasattr(f, "hermes_spec")]
    assert len(specs) > 20
    assert [n for n in specs if f"kernel.hookspecs.{n}" not in anchors] == []


def test_the_fixtures_are_documented_on_the_site(site: Path) -> None:
    text = html.unescape(re.sub(r"<[^>]+>", "", _page(site, "reference/pytest-plugin.md")))
    tree = ast.parse(Path(pytest_plugin.__file__).read_text(encoding="utf-8"))
    fixtures = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert {f.name for f in fixtures} >= {"hermes_home", "hermes_plugin", "hermes_kernel"}
    for node in fixtures:
        docstring = ast.get_docstring(node)
        assert docstring, f"{node.name} has no docstring"
        first_line = docstring.splitlines()[0].replace("``", "")
        assert " ".join(first_line.split()) in " ".join(text.split()), f"{node.name}'s docstring is not shown"


def test_sphinx_roles_become_links(site: Path) -> None:
    """The docstrings' reST roles (``:meth:`load```) are rendered as links, not as raw markup."""
    text = _page(site, "reference/kernel.md")
    shown = html.unescape(re.sub(r"<[^>]+>", "", text))
    assert not re.search(r":(class|meth|func|mod|attr|exc):", shown), "raw reST roles on the page"
    assert 'href="#kernel.Kernel.load"' in text, "`:meth:`load`` in Kernel's docstring should link to it"
