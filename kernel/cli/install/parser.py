"""The ``plugins install``, ``plugins update`` and ``plugins remove`` commands' arguments and help."""

from __future__ import annotations

import argparse
from typing import Any

INSTALL_DESCRIPTION = """\
Install a plugin. SOURCE is told apart by the first rule that applies:

  pip:REQUIREMENT
      python -m pip install REQUIREMENT into the running Python environment (a
      name, a version spec, a wheel, a local project path...). The package
      must declare an entry point in the hermes_agent.plugins group. Extra pip
      options go through --pip-arg=OPTION (repeatable), for example
      --pip-arg=--target=DIR --pip-arg=--no-index.
  git+URL, or a URL (https://, http://, ssh://, git://, file://, user@host:path)
      git clone --depth 1 into a temporary directory, then installed like a
      local directory (--ref for a branch or a tag).
  a local directory holding plugin.yaml (or --subdir pointing at one)
      validated, then copied into <home>/plugins/<name>/ (.git and __pycache__
      are left out).
  a local bare git repository, or a directory whose name ends in .git
      cloned as above.
  a local directory with pyproject.toml, setup.py or setup.cfg and no
  plugin.yaml, or a .whl or sdist file
      installed with pip as above.

Anything else is refused; a bare name is never sent to a package index without
the pip: prefix. An installed plugin of the same name is replaced only with
--force; to get the newest version of an installed plugin's source, use
'hermes-kernel plugins update NAME'.

Where each plugin came from is recorded in <home>/plugins/.installs.json: that
is what 'plugins update' fetches from again, and how 'plugins remove' knows that
a pip package was installed by this command (only such a package is
uninstalled)."""


UPDATE_DESCRIPTION = """\
Fetch the newest version of installed plugins from where 'plugins install'
got them:

  from a git URL: cloned again at the branch or tag it was installed from (the
      remote's default branch when none was given); the new commit's manifest is
      validated before anything is replaced, and a broken one leaves the
      installed copy as it was.
  from a local directory: copied again from that directory.
  from pip: python -m pip install --upgrade with the same requirement and pip
      options (a --target directory stays the target).

A plugin whose directory was changed since it was installed is not replaced
unless --force. Bundled plugins change with hermes-kernel itself; a plugin
directory made by hand, a project plugin and a package that 'plugins install'
did not install have no recorded source: the command says so and changes
nothing."""


REMOVE_DESCRIPTION = """\
Remove an installed plugin: delete a user plugin's directory under
<home>/plugins, or uninstall the pip package of an entry-point plugin, but only
a package that 'plugins install' installed (recorded in
<home>/plugins/.installs.json). A package that was already installed before (by
you, or as another package's dependency), one that another installed package
requires, and hermes-kernel itself are never uninstalled; neither are the
dependencies pip installed with the plugin. Bundled and project plugins are not
removed (disable them instead). Asks for confirmation unless --yes; without a
terminal, --yes is required."""


def add_commands(plugin_actions: Any) -> None:
    """Add this group's subcommands to the ``hermes-kernel`` parser."""
    install = plugin_actions.add_parser(
        "install",
        help="install a plugin from a directory, a git URL or a pip requirement",
        description=INSTALL_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    install.add_argument("source", help="a plugin directory, a git URL or path, or pip:REQUIREMENT")
    install.add_argument("--force", action="store_true", help="replace an installed plugin of the same name")
    install.add_argument(
        "--no-input", action="store_true", help="do not ask for missing environment variables"
    )
    install.add_argument(
        "--name", help="the directory name under <home>/plugins (default: the manifest name)"
    )
    install.add_argument("--subdir", help="the plugin's directory inside the source (e.g. a repository)")
    install.add_argument("--ref", help="the git branch or tag to clone")
    install.add_argument(
        "--enable",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="where only enabled plugins run (a home Hermes Agent has used, or a plugins.enabled list), "
        "enable it (--enable) or leave it off (--no-enable) without asking",
    )
    _add_pip_arg(install, "an extra pip option, repeatable (--pip-arg=--no-index)")
    install.set_defaults(handler=_run_install)

    update = plugin_actions.add_parser(
        "update",
        aliases=["upgrade"],
        help="fetch the newest version of installed plugins from their source",
        description=UPDATE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    update.add_argument(
        "names", nargs="*", metavar="NAME", help="a plugin's name as in 'plugins list', or its directory"
    )
    update.add_argument("--all", action="store_true", help="update every plugin 'plugins install' installed")
    update.add_argument(
        "--force", action="store_true", help="replace a plugin directory even if it was changed by hand"
    )
    update.add_argument(
        "--no-input", action="store_true", help="do not ask for environment variables a new version needs"
    )
    _add_pip_arg(update, "a pip option added to those of the install (repeatable)")
    update.set_defaults(handler=_run_update)

    remove = plugin_actions.add_parser(
        "remove",
        aliases=["rm", "uninstall"],
        help="delete a user plugin, or uninstall a pip plugin that install put there",
        description=REMOVE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    remove.add_argument(
        "name", help="the plugin's name as in 'plugins list', its manifest name, directory or package"
    )
    remove.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    remove.set_defaults(handler=_run_remove)


def _add_pip_arg(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument(
        "--pip-arg", dest="pip_args", action="append", default=[], metavar="OPTION", help=text
    )


# The commands' modules are imported only when one of them runs: every other command starts faster.
def _run_install(args: argparse.Namespace) -> int:
    from .install_command import plugins_install

    return plugins_install(args)


def _run_update(args: argparse.Namespace) -> int:
    from .update_command import plugins_update

    return plugins_update(args)


def _run_remove(args: argparse.Namespace) -> int:
    from .remove_command import plugins_remove

    return plugins_remove(args)
