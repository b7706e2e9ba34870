"""``hermes-kernel doctor``: problems found, each with its fix."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import output
from .common import (
    DISABLED_BY_CONFIG,
    DISABLED_FOR_RUN,
    NOT_ENABLED,
    dump_json,
    left_off,
    manifest_at,
    told_left_off,
)

if TYPE_CHECKING:
    from .. import Kernel, PluginInfo


# Sources of the surface records (kernel/surfaces): config.yaml sections and <home>/hooks folders.
SURFACE_SOURCES = ("config", "hooks")


def add_commands(commands: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    doctor = commands.add_parser(
        "doctor",
        help="find problems and say how to fix them",
        description="Check the configuration, plugins, hooks, environment variables, tools and providers; "
        "print each problem with its fix. Exit code 0 when all is well, 1 when there are problems.",
    )
    doctor.add_argument("--json", action="store_true", help="print a JSON object")
    doctor.set_defaults(handler=doctor_command)


@dataclass
class Finding:
    """One thing ``doctor`` found: ``level`` is ``error``, ``warning`` or ``info``."""

    level: str
    area: str
    subject: str
    problem: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "level": self.level,
            "area": self.area,
            "subject": self.subject,
            "problem": self.problem,
            "fix": self.fix,
        }


def doctor_command(args: argparse.Namespace) -> int:
    from .. import Kernel

    environ = dict(os.environ)
    with Kernel() as kernel:
        kernel.load()
        findings = diagnose(kernel, environ)
        told_left_off(kernel, left_off(kernel)[1])
        plugins = kernel.plugins
        tools = len(kernel.tools)
        home = kernel.home
    errors = sum(1 for f in findings if f.level == "error")
    warnings = sum(1 for f in findings if f.level == "warning")
    if args.json:
        dump_json(
            {
                "ok": errors == 0,
                "home": str(home),
                "errors": errors,
                "warnings": warnings,
                "findings": [f.to_dict() for f in findings],
            }
        )
        return 1 if errors else 0
    output.line(f"hermes-kernel doctor: home {home}", "heading")
    for finding in findings:
        tag = {"error": "[error]", "warning": "[warn] ", "info": "[info] "}[finding.level]
        output.line(f"{tag} {finding.area} {finding.subject}: {finding.problem}", finding.level)
        if finding.fix:
            output.line(f"        fix: {finding.fix}", "dim")
    enabled = sum(1 for p in plugins if p.enabled)
    if errors:
        output.line(f"{errors} problem(s), {warnings} warning(s).", "error")
    elif warnings:
        # A warning may be a setting ignored or a plugin left off: never "all is well" over one.
        output.line(
            f"No errors, but {warnings} warning(s) above: {enabled} plugin(s) enabled, {tools} tool(s).",
            "warning",
        )
    else:
        output.line(f"All is well: {enabled} plugin(s) enabled, {tools} tool(s).", "ok")
    return 1 if errors else 0


def diagnose(kernel: Kernel, environ: dict[str, str]) -> list[Finding]:
    """Every problem of a loaded kernel, each with the way to fix it."""
    home = kernel.home
    env_file = home / ".env"
    config_file = home / "config.yaml"
    kernel.providers.list_providers()  # import the deferred model provider plugins
    findings: list[Finding] = []

    provider_problems = kernel.providers.problems()
    provider_texts = {text for _slot, text in provider_problems}
    for problem in dict.fromkeys(kernel.problems):
        if problem not in provider_texts:
            # A problem its schema found (kernel.base.config.ConfigNote) carries its level and its fix.
            level = getattr(problem, "level", "error")
            fix = getattr(problem, "fix", "") or f"edit {config_file}"
            text = str(problem).removeprefix("config.yaml: ") if hasattr(problem, "fix") else str(problem)
            findings.append(Finding(level, "config", str(config_file), text, fix))

    marker, _names = left_off(kernel)
    for info in kernel.plugins:
        manifest = manifest_at(info.path)
        subject = f"'{info.name}'"
        error = info.error or ""
        if info.source in SURFACE_SOURCES and error:
            if error in kernel.problems:
                continue  # already reported as a config error
            if error.startswith("disabled"):
                fix = f"set enabled: true in {config_file}"
                findings.append(Finding("info", "surface", subject, error, fix))
                continue
        if error.startswith(NOT_ENABLED):
            why = (
                "config.yaml has plugins.enabled, which does not list it"
                if marker is None
                else f"Hermes Agent has used this home ({marker}) and config.yaml has no plugins.enabled, "
                "so only bundled plugins run, as in Hermes"
            )
            findings.append(
                Finding(
                    "warning",
                    "plugin",
                    subject,
                    f"not enabled: {why}",
                    f"hermes-kernel plugins enable {info.name}",
                )
            )
            continue
        if error.startswith(DISABLED_FOR_RUN):
            findings.append(Finding("info", "plugin", subject, error, "run without --disable / --no-plugins"))
            continue
        if error.startswith(DISABLED_BY_CONFIG):
            findings.append(
                Finding(
                    "info",
                    "plugin",
                    subject,
                    "disabled via config (plugins.disabled)",
                    f"hermes-kernel plugins enable {info.name}",
                )
            )
            continue
        if "(missing: " in error:
            variables = manifest.requires_env if manifest else ()
            # The loaded kernel has exported <home>/.env into os.environ.
            missing = [v for v in variables if not os.environ.get(v.name)]
            if not missing:
                findings.append(
                    Finding("error", "plugin", subject, error, f"set the missing variables in {env_file}")
                )
            for var in missing:
                about = " ".join(x for x in (var.description, f"<{var.url}>" if var.url else "") if x)
                findings.append(
                    Finding(
                        "error",
                        "plugin",
                        subject,
                        f"disabled: requires {var.name}, which is not set" + (f" ({about})" if about else ""),
                        f"set {var.name} in {env_file} (a line {var.name}=...), or be asked for it by "
                        "installing the plugin again: hermes-kernel plugins install SOURCE --force",
                    )
                )
            continue
        if error:
            area = "surface" if info.source in SURFACE_SOURCES else "plugin"
            findings.append(Finding("error", area, subject, error, _plugin_fix(info, error)))
        for hook, hook_error in info.hook_errors.items():
            findings.append(
                Finding(
                    "error",
                    "hook",
                    f"{hook} of '{info.name}'",
                    f"callback disabled after it failed: {hook_error}",
                    f"fix the callback in {info.path or info.name}; it runs again on the next start",
                )
            )
        for warning in info.warnings:
            if warning not in kernel.problems:  # already reported as a config error
                findings.append(Finding("warning", "plugin", subject, warning, ""))

    for info in kernel.plugins:
        if info.source in SURFACE_SOURCES and not info.error:
            summary = info.description or info.kind
            findings.append(Finding("info", "surface", f"'{info.name}'", f"{info.kind}: {summary}"))

    for row in kernel.gateway.status():
        # The reason may say "not enabled: ..." itself (see kernel.gateway.runner.platform_config).
        reason = row.reason if row.reason.startswith("not enabled") else f"not enabled: {row.reason}"
        state = f"enabled ({row.source})" if row.enabled else reason
        findings.append(Finding("info", "platform", f"'{row.name}'", f"{row.label}: {state}"))

    for tool in kernel.tools.all():
        ok, reason = kernel.tools.available(tool)
        if ok:
            continue
        missing_vars = [v for v in tool.requires_env if not os.environ.get(v)]
        fix = (
            f"set {', '.join(missing_vars)} in {env_file}"
            if missing_vars
            else "see the plugin's documentation"
        )
        findings.append(
            Finding("warning", "tool", f"'{tool.name}' of '{tool.plugin}'", f"unavailable: {reason}", fix)
        )

    for slot, problem in provider_problems:
        findings.append(
            Finding(
                "error",
                "provider",
                slot,
                problem,
                f"choose an available provider in {config_file} (see: hermes-kernel providers list)",
            )
        )
    for provider in kernel.providers.status():
        if provider.active and not provider.available and provider.plugin is not None:
            findings.append(
                Finding(
                    "error",
                    "provider",
                    f"{provider.slot} '{provider.name}'",
                    f"selected but not available: {provider.reason}",
                    "make it available (see the reason) or select another provider in "
                    f"{config_file} (see: hermes-kernel providers list)",
                )
            )
    if not kernel.providers.model_config().get("provider"):
        findings.append(
            Finding(
                "info",
                "provider",
                "model",
                "no model provider configured (chat and run need one)",
                f"set model.provider in {config_file} (e.g. scripted, with model.script)",
            )
        )
    return findings


def _plugin_fix(info: PluginInfo, error: str) -> str:
    where = info.path or info.name
    if info.source == "hooks":
        return f"fix the hook folder {where} as the message says, or remove it"
    if info.source == "config":
        return "fix its section of config.yaml as the message says (see: hermes-kernel doctor --json)"
    if error.startswith("invalid manifest"):
        return "fix the manifest file named in the error"
    if "already used by" in error:
        return (
            "rename one of them (manifest 'name') or remove one: "
            f"hermes-kernel plugins remove {Path(where).name}"
        )
    if error.startswith("import failed"):
        return (
            f"fix the import error in {where} (HERMES_PLUGINS_DEBUG=1 writes the traceback to the log), "
            f"or disable it: hermes-kernel plugins disable {info.name}"
        )
    if error.startswith("register() failed"):
        return (
            f"fix register() in {where} (HERMES_PLUGINS_DEBUG=1 writes the traceback to the log), "
            f"or disable it: hermes-kernel plugins disable {info.name}"
        )
    return f"see the error; or disable it: hermes-kernel plugins disable {info.name}"
