"""Hostile registrations: what breaks in a plugin's auxiliary task, browser or dashboard provider, secret
source or Slack handler fails that registration (or that plugin) only, and no secret value leaks.

Hermes' rules are kept: the Slack handler and the auxiliary task raise ``ValueError`` for what they
refuse, the browser provider for a bad name; a secret source or a dashboard-auth provider that does not
fit is ignored with a warning, never raised.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CLI, agent_log, cli_env, write_plugin

from kernel import Kernel
from kernel.agent import AgentSession
from kernel.cli.chat import install_host_commands

pytestmark = pytest.mark.usefixtures("bundled")

BYSTANDER = (
    "def register(ctx):\n    ctx.register_auxiliary_task('calm_task', display_name='Calm', description='')\n"
)

HUGE = "x" * 100_000
BAD_NAMES = [42, None, "", "   ", "a\x00b", "line\nbreak", HUGE]
BAD_IDS = ["int", "none", "empty", "blank", "nul", "newline", "huge"]

MEMBERS = """
from kernel.registrations import BrowserProvider, DashboardAuthProvider, SecretSource, FetchResult

def browser(provider_name):
    class Provider(BrowserProvider):
        name = property(lambda self: provider_name)
        def is_available(self): return True
        def create_session(self, task_id): return {}
        def close_session(self, session_id): return True
        def emergency_cleanup(self, session_id): pass
    return Provider()

def login(provider_name, display="Login"):
    class Login(DashboardAuthProvider):
        name = provider_name
        display_name = display
        def start_login(self, *, redirect_uri): pass
        def complete_login(self, **kw): pass
        def verify_session(self, *, access_token): pass
        def refresh_session(self, *, refresh_token): pass
        def revoke_session(self, *, refresh_token): pass
    return Login()

def source(source_name, secrets=None, fetch=None):
    class Source(SecretSource):
        name = source_name
        def fetch(self, cfg, home_path):
            return fetch(cfg) if fetch else FetchResult(secrets=dict(secrets or {}))
    return Source()
"""


def plugin(plugin_dir: Callable[..., Path], name: str, body: str) -> Path:
    """A plugin whose ``register(ctx)`` is ``body`` (indented), with the helpers of ``MEMBERS``."""
    code = MEMBERS + "\ndef register(ctx):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    return plugin_dir(name, code)


def loaded(make_kernel: Callable[..., Kernel], plugin_dir: Callable[..., Path], **kw: str) -> Kernel:
    plugin_dir("calm", BYSTANDER)
    k = make_kernel(**kw)
    assert k.plugin("calm").enabled, k.plugin("calm").error
    return k


# --------------------------------------------------------------------------- what is not callable


def test_a_slack_handler_that_is_not_callable_fails_its_plugin_only(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin(plugin_dir, "slacky", "ctx.register_slack_action_handler('approve', 'not a function')")
    k = loaded(make_kernel, plugin_dir)
    assert "ValueError" in k.plugin("slacky").error and "not callable" in k.plugin("slacky").error
    assert k.registrations.slack_action_handlers() == []


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        ("ctx.register_browser_provider(object())", "browser provider ignored"),
        (
            "ctx.register_browser_provider(type('B', (), {'name': 'b', 'is_available': 1})())",
            "browser provider",
        ),
        (
            "ctx.register_secret_source(type('S', (), {'name': 's', 'fetch': 'nope'})())",
            "secret source ignored",
        ),
        ("ctx.register_dashboard_auth_provider(42)", "dashboard auth provider ignored"),
    ],
    ids=["browser-object", "browser-attribute", "secret", "dashboard"],
)
def test_providers_whose_methods_are_not_callable_are_ignored_with_a_warning(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], call: str, kind: str
) -> None:
    plugin(plugin_dir, "odd", call)
    k = loaded(make_kernel, plugin_dir)
    info = k.plugin("odd")
    assert info.enabled and info.error is None  # as in Hermes: ignored, the plugin loads
    assert any(w.startswith(kind) for w in info.warnings), info.warnings
    assert k.registrations.all(plugin="odd") == []


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_IDS)
def test_bad_auxiliary_task_keys_fail_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], name: object
) -> None:
    plugin(plugin_dir, "aux", f"ctx.register_auxiliary_task({name!r}, display_name='d', description='')")
    k = loaded(make_kernel, plugin_dir)
    error = k.plugin("aux").error or ""
    assert "ValueError" in error and "auxiliary task key" in error
    assert len(error) < 1000  # a huge name is not copied into the error
    assert [t.key for t in k.registrations.auxiliary_tasks()] == ["calm_task"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_IDS)
def test_bad_browser_provider_names_fail_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], name: object
) -> None:
    plugin(plugin_dir, "browsy", f"ctx.register_browser_provider(browser({name!r}))")
    k = loaded(make_kernel, plugin_dir)
    error = k.plugin("browsy").error or ""
    assert "ValueError" in error and "browser provider name" in error and len(error) < 1000
    assert k.registrations.browser_providers() == []


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_IDS)
def test_bad_slack_action_ids_fail_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], name: object
) -> None:
    plugin(plugin_dir, "slacky", f"ctx.register_slack_action_handler({name!r}, print)")
    k = loaded(make_kernel, plugin_dir)
    error = k.plugin("slacky").error or ""
    assert "ValueError" in error and "action_id" in error and len(error) < 1000
    assert k.registrations.slack_action_handlers() == []


@pytest.mark.parametrize(
    "matcher",
    ["{'callback_id': 'x'}", "{}", "{'action_id': {'action_id': 'x'}}", "[1, 2]", "re.compile(b'bytes')"],
    ids=["unknown-key", "empty", "nested", "list", "bytes-pattern"],
)
def test_slack_matchers_bolt_could_not_use_fail_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], matcher: str
) -> None:
    plugin(plugin_dir, "slacky", f"import re\nctx.register_slack_action_handler({matcher}, print)")
    k = loaded(make_kernel, plugin_dir)
    assert "ValueError" in (k.plugin("slacky").error or "")


@pytest.mark.parametrize("name", [*BAD_NAMES, "UPPER", "has-dash"], ids=[*BAD_IDS, "upper", "dash"])
def test_bad_secret_source_names_are_ignored_with_a_warning(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path, name: object
) -> None:
    plugin(plugin_dir, "vaulty", f"ctx.register_secret_source(source({name!r}, {{'HK_HOSTILE_S': 'v'}}))")
    (home / "config.yaml").write_text(f"secrets:\n  {json.dumps(str(name)[:50])}: {{enabled: true}}\n")
    k = loaded(make_kernel, plugin_dir)
    info = k.plugin("vaulty")
    assert info.enabled and k.registrations.secret_sources() == []
    assert len(info.warnings) == 1 and info.warnings[0].startswith("secret source ignored")
    assert len(info.warnings[0]) < 1000
    assert "HK_HOSTILE_S" not in k.environ


@pytest.mark.parametrize("name", BAD_NAMES, ids=BAD_IDS)
def test_bad_dashboard_auth_provider_names_are_ignored_with_a_warning(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], name: object
) -> None:
    plugin(plugin_dir, "gate", f"ctx.register_dashboard_auth_provider(login({name!r}))")
    k = loaded(make_kernel, plugin_dir)
    info = k.plugin("gate")
    assert info.enabled and k.registrations.dashboard_auth_providers() == []
    assert info.warnings[0].startswith("dashboard auth provider ignored") and len(info.warnings[0]) < 1000


@pytest.mark.parametrize(
    "call",
    [
        "ctx.register_auxiliary_task('t', display_name='x' * 5000, description='')",
        "ctx.register_auxiliary_task('t', display_name=42, description='')",
        "ctx.register_auxiliary_task('t', display_name='ok', description='bad\\x00text')",
        "ctx.register_auxiliary_task('t', display_name='ok', description='', defaults=[('a', 1)])",
        "ctx.register_auxiliary_task('t', display_name='ok', description='', defaults={1: 'x'})",
    ],
    ids=["huge-display", "int-display", "nul-description", "list-defaults", "int-defaults-key"],
)
def test_bad_auxiliary_task_texts_and_defaults_fail_the_plugin(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], call: str
) -> None:
    plugin(plugin_dir, "aux", call)
    k = loaded(make_kernel, plugin_dir)
    assert "ValueError" in (k.plugin("aux").error or "")
    assert k.registrations.auxiliary_task("t") is None


# --------------------------------------------------------------------------- attribute access that raises

EXPLODING = """
class Exploding:
    def __getattr__(self, name):
        raise RuntimeError("boom: " + name)

class ExplodingName:
    @property
    def name(self):
        raise KeyError("no name for you")
    def is_available(self): return True
    def create_session(self, task_id): return {}
    def close_session(self, session_id): return True
    def emergency_cleanup(self, session_id): pass
    def fetch(self, cfg, home_path): return {}
    def start_login(self, **kw): pass
    def complete_login(self, **kw): pass
    def verify_session(self, **kw): pass
    def refresh_session(self, **kw): pass
    def revoke_session(self, **kw): pass
    display_name = "x"
"""


@pytest.mark.parametrize(
    "member", ["register_browser_provider", "register_secret_source", "register_dashboard_auth_provider"]
)
@pytest.mark.parametrize("cls", ["Exploding", "ExplodingName"])
def test_a_provider_whose_attribute_access_raises_fails_its_plugin_only(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], member: str, cls: str
) -> None:
    """As in Hermes, where the exception escapes the registration: the plugin fails with an error naming
    the attribute, and nothing of it is kept."""
    plugin_dir("boom", EXPLODING + f"\ndef register(ctx):\n    ctx.{member}({cls}())\n")
    k = loaded(make_kernel, plugin_dir)
    error = k.plugin("boom").error or ""
    assert "ValueError" in error and "raised" in error and ("RuntimeError" in error or "KeyError" in error)
    assert k.registrations.all(plugin="boom") == []


# --------------------------------------------------------------------------- secret sources that misbehave

SECRETS_CONFIG = """
secrets:
  sources: [bad, good]
  bad: {enabled: true, timeout_seconds: 0.5}
  good: {enabled: true}
"""


@pytest.mark.parametrize(
    ("fetch", "error"),
    [
        (
            "lambda cfg: (_ for _ in ()).throw(RuntimeError('token s3cr3t-in-message'))",
            "fetch raised RuntimeError",
        ),
        ("lambda cfg: 'not a result'", "fetch returned str instead of a FetchResult"),
        ("lambda cfg: None", "fetch returned NoneType instead of a FetchResult"),
        ("lambda cfg: __import__('time').sleep(5)", "did not return within 0.5 s"),
        ("lambda cfg: FetchResult(error='vault down', error_kind='network')", "vault down"),
    ],
    ids=["raises", "string", "none", "hangs", "error"],
)
def test_a_failing_secret_source_is_reported_and_the_others_still_apply(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path, fetch: str, error: str
) -> None:
    plugin(
        plugin_dir,
        "vaults",
        f"ctx.register_secret_source(source('bad', fetch={fetch}))\n"
        "ctx.register_secret_source(source('good', {'HK_HOSTILE_GOOD': 'g-value'}))",
    )
    (home / "config.yaml").write_text(SECRETS_CONFIG, encoding="utf-8")
    k = loaded(make_kernel, plugin_dir)
    assert k.plugin("vaults").enabled
    assert k.environ["HK_HOSTILE_GOOD"] == "g-value"
    bad = next(s for s in k.registrations.secret_report.sources if s.name == "bad")
    assert error in bad.error and bad.applied == []
    assert "s3cr3t-in-message" not in agent_log(home) + json.dumps(k.registrations.secret_report.to_dict())


def test_what_a_source_returns_that_is_not_a_valid_variable_is_skipped(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    secrets = {
        "HK_HOSTILE_OK": "fine",
        "HK_HOSTILE_INT": 42,
        "HK_HOSTILE_NONE": None,
        "HK_HOSTILE_NUL": "a\x00b",
        "HK_HOSTILE_BIG": "v" * 100_000,
        "NOT A NAME": "x",
        "1STARTS_WITH_DIGIT": "x",
        7: "seven",
    }
    plugin(plugin_dir, "vault", f"ctx.register_secret_source(source('good', {secrets!r}))")
    (home / "config.yaml").write_text("secrets:\n  good: {enabled: true}\n", encoding="utf-8")
    k = loaded(make_kernel, plugin_dir)
    [report] = k.registrations.secret_report.sources
    assert report.applied == ["HK_HOSTILE_OK"] and k.environ["HK_HOSTILE_OK"] == "fine"
    assert sorted(report.skipped_invalid) == sorted(
        n for n in secrets if isinstance(n, str) and n != "HK_HOSTILE_OK"
    )
    assert not any(n in os.environ for n in secrets if isinstance(n, str) and n != "HK_HOSTILE_OK")


def test_a_source_whose_optional_methods_raise_falls_back_to_the_defaults(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir(
        "vault",
        """
from kernel.registrations import FetchResult, SecretSource

class Touchy(SecretSource):
    name = "touchy"
    def is_enabled(self, cfg):
        raise RuntimeError("no")
    def fetch(self, cfg, home_path):
        return FetchResult(secrets={"HK_HOSTILE_T": "t"})

class Grumpy(SecretSource):
    name = "grumpy"
    def protected_env_vars(self, cfg):
        raise RuntimeError("no")
    def override_existing(self, cfg):
        raise RuntimeError("no")
    def fetch_timeout_seconds(self, cfg):
        return float("nan")
    def fetch(self, cfg, home_path):
        return FetchResult(secrets={"HK_HOSTILE_G": "g"}, warnings=["hello", 42])

def register(ctx):
    ctx.register_secret_source(Touchy())
    ctx.register_secret_source(Grumpy())
""",
    )
    (home / "config.yaml").write_text("secrets:\n  touchy: {enabled: true}\n  grumpy: {enabled: true}\n")
    k = loaded(make_kernel, plugin_dir)
    assert "HK_HOSTILE_T" not in k.environ  # is_enabled raised: not run
    assert k.environ["HK_HOSTILE_G"] == "g"
    [report] = k.registrations.secret_report.sources
    assert "hello" in report.warnings and any("protected_env_vars() raised" in w for w in report.warnings)


def test_a_source_error_that_repeats_a_value_is_masked(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin(
        plugin_dir,
        "vault",
        "ctx.register_secret_source(source('leaky', fetch=lambda cfg: FetchResult(\n"
        "    secrets={'HK_HOSTILE_L': 'leaked-value-99'}, error='could not use leaked-value-99\\x1b[31m')))",
    )
    (home / "config.yaml").write_text("secrets:\n  leaky: {enabled: true}\n", encoding="utf-8")
    k = loaded(make_kernel, plugin_dir)
    [report] = k.registrations.secret_report.sources
    assert report.error == "could not use *** [31m"
    assert "leaked-value-99" not in agent_log(home) and "HK_HOSTILE_L" not in k.environ


# --------------------------------------------------------------------------- two plugins, one name


def test_two_plugins_registering_the_same_auxiliary_task_the_second_fails(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    for name in ("alpha", "beta"):
        plugin(
            plugin_dir, name, "ctx.register_auxiliary_task('shared_task', display_name='S', description='')"
        )
    k = loaded(make_kernel, plugin_dir)
    assert "already registered by plugin 'alpha'" in (k.plugin("beta").error or "")
    assert k.registrations.auxiliary_task("shared_task").plugin == "alpha"


def test_a_second_browser_provider_of_a_name_replaces_the_first_until_it_goes(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    """Hermes' browser registry: registering a name again replaces it.  Here both plugins are told, and
    the first one's comes back when the second is unloaded."""
    for name in ("alpha", "beta"):
        plugin(plugin_dir, name, "ctx.register_browser_provider(browser('shared'))")
    k = loaded(make_kernel, plugin_dir)
    reg = k.registrations
    [active] = reg.browser_providers()
    assert reg.browser_provider("shared") is active
    assert reg.of_plugin("beta")["browser_providers"][0]["active"] is True
    assert reg.of_plugin("alpha")["browser_providers"][0]["active"] is False
    assert any("replaces the one of plugin 'alpha'" in w for w in k.plugin("beta").warnings)
    assert any("is replaced by the one of plugin 'beta'" in w for w in k.plugin("alpha").warnings)
    k.unregister("beta")
    assert reg.of_plugin("alpha")["browser_providers"][0]["active"] is True
    assert reg.browser_provider("shared") is not active


def test_a_second_secret_source_of_a_name_is_ignored(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin(plugin_dir, "alpha", "ctx.register_secret_source(source('shared', {'HK_HOSTILE_WHO': 'alpha'}))")
    plugin(plugin_dir, "beta", "ctx.register_secret_source(source('shared', {'HK_HOSTILE_WHO': 'beta'}))")
    (home / "config.yaml").write_text("secrets:\n  shared: {enabled: true}\n", encoding="utf-8")
    k = loaded(make_kernel, plugin_dir)
    assert k.environ["HK_HOSTILE_WHO"] == "alpha"
    assert k.plugin("beta").enabled
    assert any("already registered by plugin 'alpha'" in w for w in k.plugin("beta").warnings)
    assert [e.plugin for e in k.registrations.all("secret_sources")] == ["alpha"]


def test_a_second_secret_source_with_a_taken_scheme_is_ignored(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin(
        plugin_dir,
        "schemes",
        "one, two = source('one'), source('two')\none.scheme = two.scheme = 'op'\n"
        "ctx.register_secret_source(one)\nctx.register_secret_source(two)",
    )
    k = loaded(make_kernel, plugin_dir)
    assert [s.name for s in k.registrations.secret_sources()] == ["one"]
    assert any("the scheme 'op://' belongs to source 'one'" in w for w in k.plugin("schemes").warnings)


def test_two_plugins_handling_one_slack_action_the_first_handles_it(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    """Hermes keeps both; ``slack_bolt`` runs the first listener that matches."""
    for name in ("alpha", "beta"):
        plugin_dir(
            name,
            "import hook_sink\n"
            f"def handler(ack, body, action):\n    hook_sink.calls.append({name!r})\n"
            "def register(ctx):\n    ctx.register_slack_action_handler('approve', handler)\n",
        )
    k = loaded(make_kernel, plugin_dir)
    assert [h.plugin for h in k.registrations.slack_action_handlers()] == ["alpha", "beta"]
    assert any("handled by plugin 'alpha' first" in w for w in k.plugin("beta").warnings)
    asyncio.run(k.registrations.dispatch_slack_action(lambda: None, {}, {"action_id": "approve"}))
    k.unregister("alpha")
    asyncio.run(k.registrations.dispatch_slack_action(lambda: None, {}, {"action_id": "approve"}))
    assert sink.calls == ["alpha", "beta"]


def test_a_slack_handler_that_raises_is_contained_and_slack_is_acknowledged(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir(
        "slacky",
        "async def handler(ack, body, action):\n    raise RuntimeError('handler broke')\n"
        "def register(ctx):\n    ctx.register_slack_action_handler('approve', handler)\n",
    )
    k = loaded(make_kernel, plugin_dir)
    acks: list[int] = []

    async def ack() -> None:
        acks.append(1)

    assert asyncio.run(k.registrations.dispatch_slack_action(ack, {}, {"action_id": "approve"})) is True
    assert acks == [1]
    assert "slack_action_failed" in agent_log(home) and "handler broke" in agent_log(home)


def test_a_second_dashboard_auth_provider_of_a_name_is_ignored(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin(plugin_dir, "alpha", "ctx.register_dashboard_auth_provider(login('shared', 'Alpha'))")
    plugin(plugin_dir, "beta", "ctx.register_dashboard_auth_provider(login('shared', 'Beta'))")
    k = loaded(make_kernel, plugin_dir)
    assert [p.display_name for p in k.registrations.dashboard_auth_providers()] == ["Alpha"]
    assert k.plugin("beta").enabled
    assert any("already registered by plugin 'alpha'" in w for w in k.plugin("beta").warnings)


# --------------------------------------------------------------------------- no secret leaks

LEAKY = """
import logging
from kernel.registrations import FetchResult, SecretSource

class Vault(SecretSource):
    name = "vault"
    label = "Vault"
    def fetch(self, cfg, home_path):
        return FetchResult(secrets={"HK_LEAK_API_KEY": "TOPSECRET-4711", "HK_LEAK_PLAIN": "TOPSECRET-0815"},
                           warnings=["fetched TOPSECRET-4711 fine"])

def register(ctx):
    ctx.register_secret_source(Vault())
"""


def test_no_secret_value_reaches_the_log_plugins_info_or_the_chat(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "leaky", LEAKY)
    (home / "config.yaml").write_text("secrets:\n  vault: {enabled: true}\n", encoding="utf-8")
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled), HERMES_PLUGINS_DEBUG="1")
    shown = ""
    for args in (
        ["plugins", "info", "leaky"],
        ["plugins", "info", "leaky", "--json"],
        ["plugins", "list", "--refresh", "--json"],
    ):
        proc = subprocess.run(
            [*CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, proc.stderr
        shown += proc.stdout + proc.stderr
    assert "vault (Vault, mapped): supplies HK_LEAK_API_KEY, HK_LEAK_PLAIN" in shown
    with Kernel(home=home) as k:
        k.load()
        assert k.environ["HK_LEAK_PLAIN"] == "TOPSECRET-0815"  # applied ...
        session = AgentSession(k)
        install_host_commands(k, session)
        for command in ("/config", "/plugins", "/help"):
            shown += k.commands.run(command) or ""
        shown += json.dumps(k.registrations.secret_report.to_dict()) + json.dumps(
            k.registrations.of_plugin("leaky")
        )
        shown += repr(k.registrations.all()) + repr(k.plugin("leaky"))
    shown += agent_log(home)
    assert "HK_LEAK_API_KEY" in agent_log(home)  # ... the names are logged
    assert "TOPSECRET" not in shown  # ... the values never are


@pytest.mark.parametrize(
    "section",
    [
        "secrets:\n  sources: [{a: 1}, [x], 3, good]\n  good: {enabled: true}\n",
        "secrets:\n  sources: good\n  good: {enabled: true, timeout_seconds: [1]}\n",
        "secrets:\n  good: yes-please\n",
        "secrets: [good]\n",
    ],
    ids=["odd-sources", "sources-not-a-list", "section-not-a-mapping", "secrets-a-list"],
)
def test_a_malformed_secrets_section_never_breaks_the_load(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path, section: str
) -> None:
    plugin(plugin_dir, "vault", "ctx.register_secret_source(source('good', {'HK_HOSTILE_CFG': 'c'}))")
    (home / "config.yaml").write_text(section, encoding="utf-8")
    k = loaded(make_kernel, plugin_dir)
    assert k.plugin("vault").enabled
    enabled = "enabled: true" in section
    assert ("HK_HOSTILE_CFG" in k.environ) is enabled


def test_a_slack_action_the_host_hands_over_that_is_not_a_mapping_matches_nothing(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin(plugin_dir, "slacky", "ctx.register_slack_action_handler('approve', print)")
    k = loaded(make_kernel, plugin_dir)
    for action in (None, "approve", ["approve"], {"action_id": 42}):
        assert asyncio.run(k.registrations.dispatch_slack_action(print, {}, action)) is False
