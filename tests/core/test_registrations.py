"""``ctx.register_auxiliary_task`` and its four siblings, with Hermes' signatures, kept for the host.

Every test writes real plugin directories and loads them with a real kernel; the CLI test runs
``hermes-kernel plugins info`` as a subprocess.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CLI, REPO, cli_env, run_probe, write_plugin

from kernel import Kernel, PluginError
from kernel.registrations import (
    AUXILIARY_DEFAULTS,
    BrowserProvider,
    DashboardAuthProvider,
    FetchResult,
    SecretSource,
    SlackActionHandler,
)

pytestmark = pytest.mark.usefixtures("bundled")

# A plugin that calls the five members as a Hermes plugin does; its classes are the kernel's base classes.
EVERYTHING = """
import re
from kernel.registrations import BrowserProvider, DashboardAuthProvider, FetchResult, SecretSource

class Vault(SecretSource):
    name = "vault"
    label = "The Vault"
    def fetch(self, cfg, home_path):
        return FetchResult(secrets={"HK_REG_VAULT_TOKEN": "vault-value-1"})

class Cloud(BrowserProvider):
    @property
    def name(self):
        return "cloudy"
    def is_available(self):
        return True
    def create_session(self, task_id):
        return {"session_name": task_id, "bb_session_id": "s1", "cdp_url": "ws://x", "features": {}}
    def close_session(self, session_id):
        return True
    def emergency_cleanup(self, session_id):
        pass

class Gate(DashboardAuthProvider):
    name = "gate"
    display_name = "The Gate"
    def start_login(self, *, redirect_uri): return None
    def complete_login(self, *, code, state, code_verifier, redirect_uri): return None
    def verify_session(self, *, access_token): return None
    def refresh_session(self, *, refresh_token): return None
    def revoke_session(self, *, refresh_token): return None

async def approve(ack, body, action):
    await ack()

def register(ctx):
    ctx.register_auxiliary_task(
        "everything_filter",
        display_name="Retain filter",
        description="dedup before retain",
        defaults={"provider": "openrouter", "timeout": 30, "download_timeout": 5},
    )
    ctx.register_browser_provider(Cloud())
    ctx.register_secret_source(Vault())
    ctx.register_slack_action_handler("inbox_approve", approve)
    ctx.register_slack_action_handler(re.compile(r"^sweep_"), approve)
    ctx.register_dashboard_auth_provider(Gate())
"""

BROWSER = """
from kernel.registrations import BrowserProvider

def browser(provider_name, available):
    class Provider(BrowserProvider):
        name = property(lambda self: provider_name)
        def is_available(self):
            if available == "raise":
                raise RuntimeError("no")
            return available
        def create_session(self, task_id): return {{}}
        def close_session(self, session_id): return True
        def emergency_cleanup(self, session_id): pass
    return Provider()

def register(ctx):
    for name, available in {providers!r}:
        ctx.register_browser_provider(browser(name, available))
"""

SOURCE = """
import json, pathlib
from kernel.registrations import FetchResult, SecretSource

class Source(SecretSource):
    def __init__(self, name, shape, secrets, protected=()):
        self.name, self.shape, self._secrets, self._protected = name, shape, secrets, frozenset(protected)
    def protected_env_vars(self, cfg):
        return self._protected
    def fetch(self, cfg, home_path):
        log = pathlib.Path(home_path) / "fetched.log"
        log.write_text(log.read_text() + self.name + "\\n" if log.exists() else self.name + "\\n")
        return FetchResult(secrets=dict(self._secrets))

def register(ctx):
    for name, shape, secrets, protected in {sources!r}:
        ctx.register_secret_source(Source(name, shape, secrets, protected))
"""


def write_config(home: Path, text: str) -> None:
    (home / "config.yaml").write_text(text, encoding="utf-8")


def info(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``hermes-kernel plugins info ARGS`` as a subprocess, which must succeed."""
    proc = subprocess.run(
        [*CLI, "plugins", "info", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def fetched(home: Path) -> list[str]:
    log = home / "fetched.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


# --------------------------------------------------------------------------- the five members


def test_a_plugin_using_all_five_members_loads_and_the_host_sees_each(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("everything", EVERYTHING)
    write_config(home, "secrets:\n  vault:\n    enabled: true\n")
    k = make_kernel()
    info = k.plugin("everything")
    assert info.enabled and info.error is None and info.warnings == []
    reg = k.registrations

    [task] = reg.auxiliary_tasks()
    assert task.to_dict() == {
        "key": "everything_filter",
        "display_name": "Retain filter",
        "description": "dedup before retain",
        "defaults": {**AUXILIARY_DEFAULTS, "provider": "openrouter", "timeout": 30, "download_timeout": 5},
        "plugin": "everything",
    }
    assert [p.name for p in reg.browser_providers()] == ["cloudy"]
    assert reg.browser_provider("cloudy").create_session("t1")["bb_session_id"] == "s1"
    assert [s.name for s in reg.secret_sources()] == ["vault"]
    assert k.environ["HK_REG_VAULT_TOKEN"] == "vault-value-1"
    assert [
        (matcher if isinstance(matcher, str) else matcher.pattern, plugin)
        for matcher, _cb, plugin in reg.slack_action_handlers()
    ] == [
        ("inbox_approve", "everything"),
        ("^sweep_", "everything"),
    ]
    assert [p.display_name for p in reg.dashboard_auth_providers()] == ["The Gate"]
    assert reg.dashboard_auth_provider("gate") is reg.dashboard_auth_providers()[0]
    assert reg.of_plugin("everything") == {
        "auxiliary_tasks": [
            {
                "name": "everything_filter",
                "display_name": "Retain filter",
                "description": "dedup before retain",
            }
        ],
        "browser_providers": [{"name": "cloudy", "display_name": "cloudy", "active": True}],
        "secret_sources": [
            {
                "name": "vault",
                "label": "The Vault",
                "shape": "mapped",
                "scheme": None,
                "applied": ["HK_REG_VAULT_TOKEN"],
            }
        ],
        "slack_action_handlers": [{"name": "inbox_approve"}, {"name": "re:^sweep_"}],
        "dashboard_auth_providers": [
            {
                "name": "gate",
                "display_name": "The Gate",
                "supports_password": False,
                "supports_token": False,
                "supports_session": True,
            }
        ],
    }
    assert "registrations" in k.services


def test_objects_with_the_members_but_not_the_base_classes_are_accepted(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """As for providers: what Hermes' base class requires is what counts (a Hermes plugin's classes
    subclass Hermes' own base classes, not the kernel's)."""
    plugin_dir(
        "ducks",
        """
class Source:
    name = "ducks"
    shape = "bulk"
    def fetch(self, cfg, home_path):
        return {"HK_REG_DUCK": "quack"}

class Browser:
    name = "duckbrowser"
    def is_available(self): return False
    def create_session(self, task_id): return {}
    def close_session(self, session_id): return True
    def emergency_cleanup(self, session_id): pass

class Login:
    name = "duck"
    display_name = "Duck login"
    supports_token = True
    supports_session = False
    def start_login(self, **kw): pass
    def complete_login(self, **kw): pass
    def verify_session(self, **kw): pass
    def refresh_session(self, **kw): pass
    def revoke_session(self, **kw): pass

def register(ctx):
    ctx.register_secret_source(Source())
    ctx.register_browser_provider(Browser())
    ctx.register_dashboard_auth_provider(Login())
""",
    )
    write_config(home, "secrets:\n  ducks:\n    enabled: true\n")
    k = make_kernel()
    assert k.plugin("ducks").warnings == []
    assert k.environ["HK_REG_DUCK"] == "quack"  # a plain mapping is taken as the secrets
    assert k.registrations.browser_provider("duckbrowser") is not None
    assert [p.name for p in k.registrations.dashboard_auth_providers(token=True)] == ["duck"]
    assert k.registrations.dashboard_auth_providers(session=True) == []


def test_the_service_is_imported_only_when_a_plugin_or_the_host_uses_it(tmp_path: Path) -> None:
    probe = """
import json, sys
from pathlib import Path
home = Path(sys.argv[1])
plugin = home / "plugins" / "hooky"
plugin.mkdir(parents=True)
code = "def register(ctx):\\n    ctx.register_hook('on_session_start', print)\\n"
plugin.joinpath("__init__.py").write_text(code)
from kernel import Kernel
k = Kernel(home=home)
k.load()
before = ("kernel.registrations" in sys.modules, "registrations" in k.services)
count = len(k.registrations)
after = ("kernel.registrations" in sys.modules, "registrations" in k.services)
k.shutdown()
print("PROBE " + json.dumps({"before": before, "after": after, "count": count}))
"""
    bundled = tmp_path / "none"
    bundled.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_BUNDLED_PLUGINS=str(bundled), PYTHONPATH=str(REPO), HERMES_KERNEL_ENTRY_POINTS="none")
    report = run_probe(probe, str(tmp_path / "home"), cwd=tmp_path, env=env)
    assert report == {"before": [False, False], "after": [True, True], "count": 0}


def test_a_plugin_calling_a_member_attaches_the_service(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir(
        "tasky",
        "def register(ctx):\n"
        "    ctx.register_auxiliary_task('tasky_job', display_name='Job', description='a job')\n",
    )
    k = make_kernel()
    assert "registrations" in k.services
    assert k.registrations.auxiliary_task("tasky_job").plugin == "tasky"


# --------------------------------------------------------------------------- owned by the plugin


def test_unloading_the_plugin_removes_everything_it_registered(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("everything", EVERYTHING)
    write_config(home, "secrets:\n  vault:\n    enabled: true\n")
    k = make_kernel()
    assert len(k.registrations) == 6
    assert os.environ.get("HK_REG_VAULT_TOKEN") == "vault-value-1"
    k.unregister("everything")
    reg = k.registrations
    assert len(reg) == 0 and reg.of_plugin("everything") == {}
    assert reg.auxiliary_tasks() == [] and reg.slack_action_handlers() == [] and reg.secret_sources() == []
    assert "HK_REG_VAULT_TOKEN" not in k.environ and "HK_REG_VAULT_TOKEN" not in os.environ
    assert reg.secret_provenance() == {}


def test_a_register_that_fails_later_takes_its_registrations_back(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir(
        "halfway",
        "async def cb(ack, body, action):\n    await ack()\n"
        "def register(ctx):\n"
        "    ctx.register_auxiliary_task('halfway_job', display_name='Job', description='')\n"
        "    ctx.register_slack_action_handler('halfway', cb)\n"
        "    raise RuntimeError('broken after registering')\n",
    )
    k = make_kernel()
    assert "broken after registering" in (k.plugin("halfway").error or "")
    assert k.registrations.all() == [] and k.registrations.of_plugin("halfway") == {}


def test_a_context_refuses_once_its_plugin_is_gone(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], sink: types.ModuleType
) -> None:
    plugin_dir("keeper", "import hook_sink\ndef register(ctx):\n    hook_sink.calls.append(ctx)\n")
    k = make_kernel()
    [ctx] = sink.calls
    ctx.register_auxiliary_task("keeper_job", display_name="Job", description="")
    assert k.registrations.auxiliary_task("keeper_job").plugin == "keeper"
    k.unregister("keeper")
    assert k.registrations.auxiliary_task("keeper_job") is None
    with pytest.raises(PluginError, match="not registered with the kernel any more"):
        ctx.register_auxiliary_task("keeper_job", display_name="Job", description="")


# --------------------------------------------------------------------------- auxiliary tasks


def test_an_auxiliary_task_config_is_the_plugin_defaults_under_the_users_section(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir(
        "aux",
        "def register(ctx):\n"
        "    ctx.register_auxiliary_task('aux_rewrite', display_name='Rewrite', description='r',\n"
        "                                defaults={'timeout': 30, 'retries': 2})\n"
        "    ctx.register_auxiliary_task('aux_rewrite', display_name='Rewrite 2', description='again')\n",
    )
    write_config(home, "auxiliary:\n  aux_rewrite:\n    model: small-model\n    timeout: 9\n")
    k = make_kernel()
    [task] = k.registrations.auxiliary_tasks()
    assert (task.display_name, task.description) == ("Rewrite 2", "again")  # the plugin's own key: replaced
    expected = {**AUXILIARY_DEFAULTS, "model": "small-model", "timeout": 9}
    assert k.registrations.auxiliary_task_config("aux_rewrite") == expected
    assert k.registrations.auxiliary_task_config("not_registered") == {}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("vision", "one of Hermes' own tasks"),
        ("curator", "one of Hermes' own tasks"),
        ("has-dash", "only letters, digits and underscores"),
        ("", "is empty"),
    ],
)
def test_auxiliary_task_keys_follow_hermes_rules(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], key: str, message: str
) -> None:
    plugin_dir(
        "badkey",
        f"def register(ctx):\n    ctx.register_auxiliary_task({key!r}, display_name='x', description='')\n",
    )
    plugin_dir(
        "bystander",
        "def register(ctx):\n    ctx.register_auxiliary_task('ok_task', display_name='x', description='')\n",
    )
    k = make_kernel()
    assert message in (k.plugin("badkey").error or "")
    assert k.plugin("bystander").enabled
    assert [t.key for t in k.registrations.auxiliary_tasks()] == ["ok_task"]


# --------------------------------------------------------------------------- browser providers


@pytest.mark.parametrize(
    ("config", "chosen"),
    [
        ("", "browserbase"),  # browser-use is unavailable: the next of Hermes' order that is
        ("browser:\n  cloud_provider: firecrawl\n", "firecrawl"),  # named: chosen though unavailable
        ("browser:\n  cloud_provider: local\n", None),
        ("browser:\n  cloud_provider: nowhere\n", "browserbase"),
    ],
)
def test_the_browser_provider_is_chosen_as_hermes_chooses(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    home: Path,
    config: str,
    chosen: str | None,
) -> None:
    providers = [("firecrawl", False), ("browser-use", False), ("browserbase", True)]
    plugin_dir("browsers", BROWSER.format(providers=providers))
    write_config(home, config)
    k = make_kernel()
    provider = k.registrations.browser_provider()
    assert (provider.name if provider is not None else None) == chosen
    assert [p.name for p in k.registrations.browser_providers()] == [
        "browser-use",
        "browserbase",
        "firecrawl",
    ]


def test_a_browser_provider_whose_availability_check_raises_is_passed_over(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("browsers", BROWSER.format(providers=[("browser-use", "raise"), ("browserbase", True)]))
    k = make_kernel()
    assert k.registrations.browser_provider().name == "browserbase"
    assert "browser_provider_failed" in (home / "logs" / "agent.log").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- secret sources


def test_an_enabled_secret_source_fills_the_kernel_environment_until_shutdown(
    plugin_dir: Callable[..., Path], home: Path
) -> None:
    plugin_dir("vault", SOURCE.format(sources=[("vault", "mapped", {"HK_REG_A": "value-a"}, ())]))
    write_config(home, "secrets:\n  vault:\n    enabled: true\n")
    k = Kernel(home=home)
    k.load()
    assert k.environ["HK_REG_A"] == "value-a"
    assert os.environ["HK_REG_A"] == "value-a"  # plugins reading os.environ see it, as in Hermes
    assert k.environ.child()["HK_REG_A"] == "value-a"  # and so do the processes the kernel starts
    report = k.registrations.secret_report
    assert report.provenance == {"HK_REG_A": "vault"} and report.sources[0].applied == ["HK_REG_A"]
    k.shutdown()
    assert "HK_REG_A" not in os.environ


def test_a_source_is_fetched_only_when_its_section_enables_it(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir(
        "two",
        SOURCE.format(
            sources=[("alpha", "mapped", {"HK_REG_ON": "1"}, ()), ("beta", "mapped", {"HK_REG_OFF": "1"}, ())]
        ),
    )
    write_config(home, "secrets:\n  alpha:\n    enabled: true\n  beta:\n    enabled: false\n")
    k = make_kernel()
    assert fetched(home) == ["alpha"]
    assert "HK_REG_ON" in k.environ and "HK_REG_OFF" not in k.environ


def test_no_secrets_section_fetches_nothing(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("vault", SOURCE.format(sources=[("vault", "mapped", {"HK_REG_A": "value-a"}, ())]))
    k = make_kernel()
    assert fetched(home) == [] and "HK_REG_A" not in k.environ
    assert [s.name for s in k.registrations.secret_sources()] == ["vault"]


def test_secret_precedence_is_hermes(
    plugin_dir: Callable[..., Path],
    make_kernel: Callable[..., Kernel],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Mapped sources before bulk ones, then ``secrets.sources`` order; the first supplier wins; what the
    process or ``.env`` set is kept (``override_existing`` may replace a ``.env`` value only); a protected
    variable is never set by any source."""
    monkeypatch.setenv("HK_REG_SHELL", "from-shell")
    (home / ".env").write_text("HK_REG_DOTENV=from-dotenv\nHK_REG_DOTENV2=from-dotenv\n", encoding="utf-8")
    sources = [
        ("bulky", "bulk", {"HK_REG_X": "bulk", "HK_REG_BULK_ONLY": "b", "HK_REG_GUARD": "b"}, ()),
        ("second", "mapped", {"HK_REG_X": "second", "HK_REG_Y": "second"}, ()),
        (
            "first",
            "mapped",
            {"HK_REG_Y": "first", "HK_REG_SHELL": "s", "HK_REG_DOTENV": "s", "HK_REG_DOTENV2": "over"},
            ("HK_REG_GUARD",),
        ),
    ]
    plugin_dir("vaults", SOURCE.format(sources=sources))
    write_config(
        home,
        "secrets:\n  sources: [first, bulky, second]\n"
        "  bulky: {enabled: true}\n  second: {enabled: true}\n"
        "  first: {enabled: true, override_existing: true}\n",
    )
    k = make_kernel()
    assert fetched(home) == ["first", "second", "bulky"]
    env = k.environ
    assert env["HK_REG_Y"] == "first" and env["HK_REG_X"] == "second" and env["HK_REG_BULK_ONLY"] == "b"
    assert env["HK_REG_SHELL"] == "from-shell"  # the process's own: kept even with override_existing
    assert env["HK_REG_DOTENV2"] == "over" and os.environ["HK_REG_DOTENV2"] == "over"  # .env: overridden
    assert "HK_REG_GUARD" not in env
    report = {s.name: s for s in k.registrations.secret_report.sources}
    assert report["first"].skipped_existing == ["HK_REG_SHELL"]
    assert report["second"].skipped_claimed == ["HK_REG_Y"]
    assert report["bulky"].skipped_claimed == ["HK_REG_X"] and report["bulky"].skipped_protected == [
        "HK_REG_GUARD"
    ]
    assert len(k.registrations.secret_report.conflicts) == 2
    k.unregister("vaults")
    assert (
        k.environ["HK_REG_DOTENV2"] == "from-dotenv" == os.environ["HK_REG_DOTENV2"]
    )  # the .env value is back
    assert "HK_REG_Y" not in k.environ and "HK_REG_Y" not in os.environ


def test_a_dotenv_value_is_kept_without_override_existing(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    (home / ".env").write_text("HK_REG_D=from-dotenv\n", encoding="utf-8")
    plugin_dir("vault", SOURCE.format(sources=[("vault", "mapped", {"HK_REG_D": "from-vault"}, ())]))
    write_config(home, "secrets:\n  vault: {enabled: true}\n")
    k = make_kernel()
    assert k.environ["HK_REG_D"] == "from-dotenv"
    assert k.registrations.secret_report.sources[0].skipped_existing == ["HK_REG_D"]


def test_apply_secrets_fetches_again_and_takes_in_sources_added_since(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    plugin_dir("vault", SOURCE.format(sources=[("vault", "mapped", {"HK_REG_A": "a"}, ())]))
    write_config(home, "secrets:\n  vault: {enabled: true}\n  late: {enabled: true}\n")
    k = make_kernel()

    class Late(SecretSource):
        name = "late"

        def fetch(self, cfg: dict, home_path: Path) -> FetchResult:
            return FetchResult(secrets={"HK_REG_LATE": "l"})

    class LatePlugin:
        def register(self, ctx: object) -> None:
            ctx.register_secret_source(Late())  # type: ignore[attr-defined]

    k.register(LatePlugin(), "late")
    assert "HK_REG_LATE" not in k.environ  # not until the host fetches again, as in Hermes
    report = k.registrations.apply_secrets()
    assert report.provenance == {"HK_REG_A": "vault", "HK_REG_LATE": "late"}
    assert fetched(home) == ["vault", "vault"]
    assert k.environ["HK_REG_LATE"] == "l"


# --------------------------------------------------------------------------- Slack action handlers


SLACK = """
import re
CALLS = []

def make(tag):
    async def handler(ack, body, action):
        CALLS.append((tag, action.get("action_id")))
        await ack()
    return handler

def plain(ack, body, action):  # a plain function is awaited only if it returns an awaitable
    CALLS.append(("plain", action.get("action_id")))

def register(ctx):
    ctx.register_slack_action_handler("approve", make("literal"))
    ctx.register_slack_action_handler(re.compile(r"^sweep_"), make("pattern"))
    ctx.register_slack_action_handler({"action_id": "vote", "block_id": re.compile("^poll")}, make("dict"))
    ctx.register_slack_action_handler("approve", make("second"))
    ctx.register_slack_action_handler("sync", plain)
"""


def test_slack_handlers_are_listed_as_hermes_lists_them_and_dispatched_as_bolt_matches(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel]
) -> None:
    plugin_dir("slacky", SLACK)
    k = make_kernel()
    handlers = k.registrations.slack_action_handlers()
    assert all(isinstance(h, SlackActionHandler) for h in handlers)
    action_id, callback, plugin = handlers[0]  # Hermes' (action_id, callback, plugin_name)
    assert (action_id, plugin, callable(callback)) == ("approve", "slacky", True)
    acks: list[str] = []

    async def ack() -> None:
        acks.append("ack")

    async def run() -> list[bool]:
        dispatch = k.registrations.dispatch_slack_action
        return [
            await dispatch(ack, {}, {"action_id": "approve"}),
            await dispatch(ack, {}, {"action_id": "sweep_all"}),
            await dispatch(ack, {}, {"action_id": "vote", "block_id": "poll-1"}),
            await dispatch(ack, {}, {"action_id": "vote", "block_id": "other"}),
            await dispatch(ack, {}, {"action_id": "sync"}),
            await dispatch(ack, {}, {"action_id": "nobody"}),
        ]

    assert asyncio.run(run()) == [True, True, True, False, True, False]
    module = sys.modules[f"{k._namespace}.slacky"]
    assert module.CALLS == [
        ("literal", "approve"),
        ("pattern", "sweep_all"),
        ("dict", "vote"),
        ("plain", "sync"),
    ]
    assert acks == ["ack", "ack", "ack"]


# --------------------------------------------------------------------------- the command line


def test_plugins_info_shows_what_the_plugin_registered_and_no_secret(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "everything", EVERYTHING)
    write_config(home, "secrets:\n  vault:\n    enabled: true\n")
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    text = info(env, "everything").stdout
    for line in (
        "auxiliary tasks:",
        "everything_filter  Retain filter  dedup before retain",
        "browser providers:",
        "cloudy",
        "secret sources:",
        "vault (The Vault, mapped): supplies HK_REG_VAULT_TOKEN",
        "slack action handlers:",
        "re:^sweep_",
        "dashboard auth providers:",
        "gate (The Gate)",
    ):
        assert line in text, text
    proc = info(env, "everything", "--json")
    data = json.loads(proc.stdout)
    assert data["registrations"]["secret_sources"][0]["applied"] == ["HK_REG_VAULT_TOKEN"]
    assert [r["name"] for r in data["registrations"]["slack_action_handlers"]] == [
        "inbox_approve",
        "re:^sweep_",
    ]
    assert "vault-value-1" not in text + proc.stdout + proc.stderr


def test_plugins_info_of_a_plugin_without_registrations_has_none(home: Path, bundled: Path) -> None:
    write_plugin(home / "plugins", "plain", "def register(ctx):\n    pass\n")
    env = cli_env(home, HERMES_BUNDLED_PLUGINS=str(bundled))
    proc = info(env, "plain", "--json")
    assert json.loads(proc.stdout)["registrations"] == {}


# The base classes are importable for plugins written against the kernel directly.
def test_the_base_classes_keep_hermes_defaults() -> None:
    class Source(SecretSource):
        name = "s"

        def fetch(self, cfg: dict, home_path: Path) -> FetchResult:
            return FetchResult()

    source = Source()
    assert source.is_enabled({"enabled": True}) and not source.is_enabled({})
    assert source.fetch_timeout_seconds({"timeout_seconds": "x"}) == 120.0
    assert source.fetch_timeout_seconds({"timeout_seconds": 5}) == 5.0
    assert FetchResult().ok and not FetchResult(error="e").ok
    with pytest.raises(TypeError):
        BrowserProvider()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        DashboardAuthProvider()  # type: ignore[abstract]


HERMES_NAMES = EVERYTHING.replace(
    "from kernel.registrations import BrowserProvider, DashboardAuthProvider, FetchResult, SecretSource\n",
    "from agent.browser_provider import BrowserProvider\n"
    "from agent.secret_sources.base import FetchResult, SecretSource\n"
    "from hermes_cli.dashboard_auth import DashboardAuthProvider, LoginStart, Session,"
    " assert_protocol_compliance\n",
).replace(
    "    def start_login(self, *, redirect_uri): return None\n",
    "    def start_login(self, *, redirect_uri): return LoginStart(redirect_uri, {'state': 's'})\n",
)


def test_a_plugin_importing_hermes_module_names_loads_and_registers(
    plugin_dir: Callable[..., Path], make_kernel: Callable[..., Kernel], home: Path
) -> None:
    """The same plugin written against Hermes' modules (``agent.browser_provider``,
    ``agent.secret_sources.base``, ``hermes_cli.dashboard_auth``), served by the kernel's import shims."""
    assert "agent.browser_provider" in HERMES_NAMES and "from kernel" not in HERMES_NAMES
    plugin_dir("everything", HERMES_NAMES)
    write_config(home, "secrets:\n  vault:\n    enabled: true\n")
    k = make_kernel()
    info = k.plugin("everything")
    assert info.enabled, info.error
    reg = k.registrations
    assert k.environ["HK_REG_VAULT_TOKEN"] == "vault-value-1"
    gate = reg.dashboard_auth_provider("gate")
    start = gate.start_login(redirect_uri="http://127.0.0.1/cb")
    assert (start.redirect_url, start.cookie_payload) == ("http://127.0.0.1/cb", {"state": "s"})
    from hermes_cli.dashboard_auth import assert_protocol_compliance

    assert assert_protocol_compliance(type(gate)) is None
    with pytest.raises(TypeError, match="has no 'name'"):
        assert_protocol_compliance(type("Nameless", (), {}))
    assert [p.name for p in reg.browser_providers()] == ["cloudy"]
    from hermes_cli.plugins import get_plugin_auxiliary_tasks, get_plugin_manager

    assert [t["key"] for t in get_plugin_auxiliary_tasks()] == ["everything_filter"]
    handlers = get_plugin_manager().get_slack_action_handlers()
    assert [(getattr(m, "pattern", m), plugin) for m, _cb, plugin in handlers] == [
        ("inbox_approve", "everything"),
        ("^sweep_", "everything"),
    ]


def test_run_secret_cli_gives_the_helper_a_minimal_environment(
    make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real helper process: it sees PATH and the allowed names only (not the credentials already in
    the environment), NO_COLOR, no stdin; its coloured stderr is scrubbed; a slow one is cut off."""
    make_kernel()
    from agent.secret_sources import run_secret_cli

    monkeypatch.setenv("HK_ALREADY_LOADED_KEY", "do-not-leak")
    monkeypatch.setenv("HK_HELPER_SESSION", "allowed-session")
    script = (
        "import os, sys, json\n"
        "print(json.dumps({k: os.environ.get(k) for k in"
        " ('HK_ALREADY_LOADED_KEY', 'HK_HELPER_SESSION', 'NO_COLOR', 'HK_EXTRA')}))\n"
        "print('\\x1b[31mred warning\\x1b[0m', file=sys.stderr)\n"
        "print(repr(sys.stdin.read()))\n"
    )
    done = run_secret_cli(
        [sys.executable, "-c", script], allow_env=["HK_HELPER_SESSION"], extra_env={"HK_EXTRA": "x"}
    )
    seen = json.loads(done.stdout.splitlines()[0])
    assert seen == {
        "HK_ALREADY_LOADED_KEY": None,
        "HK_HELPER_SESSION": "allowed-session",
        "NO_COLOR": "1",
        "HK_EXTRA": "x",
    }
    assert done.stdout.splitlines()[1] == "''" and done.stderr.strip() == "red warning"
    with pytest.raises(RuntimeError, match=r"did not finish within 0\.5 s"):
        run_secret_cli([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    with pytest.raises(RuntimeError, match="could not be started"):
        run_secret_cli(["/nonexistent/helper-binary"])
