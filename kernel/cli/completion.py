"""Shell completion of ``hermes-kernel`` (bash, zsh, fish) with argcomplete, plugins' commands included.

``hermes-kernel completion bash|zsh|fish`` prints the shell code that turns completion on; the shell
then runs ``hermes-kernel`` with argcomplete's variables (``_ARGCOMPLETE``, ``COMP_LINE``,
``COMP_POINT``) at each Tab, and :func:`autocomplete` answers from the parser.  argcomplete is
imported only then, never by an ordinary run.  Completing a command's name imports no plugin code
(the plugins' commands come from the last load, see :mod:`.offered`); completing the arguments of a
plugin's own command loads the plugins, whose code defines them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from . import output

PROGRAM = "hermes-kernel"
SHELLS = ("bash", "zsh", "fish")

ACTIVATION = {
    "bash": 'eval "$(hermes-kernel completion bash)"    # in ~/.bashrc',
    "zsh": 'eval "$(hermes-kernel completion zsh)"     # in ~/.zshrc, after compinit',
    "fish": "hermes-kernel completion fish | source    # in ~/.config/fish/config.fish",
}


def add_commands(commands: Any) -> None:
    """Add ``completion SHELL`` to the ``hermes-kernel`` parser."""
    sub = commands.add_parser(
        "completion",
        help="print the shell code that turns on Tab completion (bash, zsh, fish)",
        description="Print the code that makes SHELL complete hermes-kernel's commands, options and "
        "plugins' commands at Tab. Turn it on with: "
        + "; ".join(f"{shell}: {line}" for shell, line in ACTIVATION.items()),
    )
    sub.add_argument("shell", choices=SHELLS, help="the shell: bash, zsh or fish")
    sub.set_defaults(handler=completion_command)


def completion_command(args: argparse.Namespace) -> int:
    """Print argcomplete's activation code for ``args.shell``."""
    import argcomplete

    code = argcomplete.shellcode([PROGRAM], shell=args.shell)
    stream = output.raw(sys.stdout)  # shell code, printed as it is
    stream.write(code if code.endswith("\n") else code + "\n")
    return 0


def requested() -> bool:
    """Whether this run is the shell asking for completions (argcomplete's ``_ARGCOMPLETE``)."""
    return "_ARGCOMPLETE" in os.environ


def typed_command() -> str | None:
    """The command of the shell's line, typed in full (the word being completed is not yet one):
    ``plugins`` for ``hermes-kernel plugins <Tab>``, ``None`` for ``hermes-kernel plu<Tab>``."""
    line = os.environ.get("COMP_LINE", "")
    try:
        point = int(os.environ.get("COMP_POINT", len(line)))
    except ValueError:
        point = len(line)
    typed = line[:point]
    try:
        skip = max(int(os.environ.get("_ARGCOMPLETE", "1")), 1)
    except ValueError:
        skip = 1
    words = typed.split()[skip:]
    if words and not typed[-1:].isspace():
        words = words[:-1]  # the word being completed
    commands = [word for word in words if not word.startswith("-")]
    return commands[0] if commands else None


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request from ``parser`` and exit (argcomplete's convention)."""
    import argcomplete

    argcomplete.autocomplete(parser)
