"""``hermes-kernel sqlite ...``: look into and tidy the sqlite memory (only while it is the active provider).

The kernel calls :func:`register_cli` with the ``sqlite`` subparser; every action sets
``func`` (via ``set_defaults``), which the kernel calls with the parsed arguments.
The database is the one of the kernel's home (``HERMES_HOME``, else ``~/.hermes``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .provider import SqliteMemoryProvider
from .store import MAX_LIMIT, keywords, words


def register_cli(subparser: argparse.ArgumentParser) -> None:
    subparser.description = "The sqlite memory provider: statistics, search and clean-up of <home>/memory."
    actions = subparser.add_subparsers(title="actions", metavar="ACTION")

    stats = actions.add_parser("stats", help="how many memories, of which kinds, and where the database is")
    stats.add_argument("--json", action="store_true", help="print the statistics as JSON")
    stats.set_defaults(func=_stats)

    search = actions.add_parser("search", help="search the memories (best matches first)")
    search.add_argument("query", nargs="+", help="the words to look for")
    search.add_argument("--limit", type=_limit, default=10, help=f"at most N results (1-{MAX_LIMIT})")
    search.add_argument("--json", action="store_true", help="print the results as JSON")
    search.set_defaults(func=_search)

    forget = actions.add_parser("forget", help="delete the memories of one session")
    forget.add_argument("--session", required=True, metavar="ID", help="the session id")
    forget.set_defaults(func=_forget)

    clear = actions.add_parser("clear", help="delete every memory")
    clear.add_argument("--yes", action="store_true", help="confirm: really delete everything")
    clear.set_defaults(func=_clear)

    subparser.set_defaults(func=_stats, json=False)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_LIMIT}")
    return value


def _provider() -> SqliteMemoryProvider:
    return SqliteMemoryProvider()


def _stats(args: argparse.Namespace) -> int:
    provider = _provider()
    try:
        stats = provider.store.stats()
    finally:
        provider.shutdown()
    if getattr(args, "json", False):
        print(json.dumps(stats, indent=2, ensure_ascii=False))
        return 0
    print(f"database: {stats['path']}")
    if not stats["exists"]:
        print("no memories yet (the database is created on first use)")
        return 0
    print(f"memories: {stats['memories']}")
    for kind, count in stats["by_kind"].items():
        print(f"  {kind}: {count}")
    print(f"sessions: {stats['sessions']}")
    if stats["oldest"]:
        print(f"oldest:   {stats['oldest']}")
        print(f"newest:   {stats['newest']}")
    print(f"size:     {_size(stats['bytes'])}")
    return 0


def _search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    provider = _provider()
    try:
        results = provider.store.search(keywords(query) or words(query), args.limit)
    finally:
        provider.shutdown()
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
        return 0
    if not results:
        print(f"no memories match {query!r}")
        return 0
    for memory in results:
        where = f"session {memory['session_id']}" if memory["session_id"] else "no session"
        print(f"#{memory['id']}  {memory['created_at']}  {memory['kind']}  ({where})")
        for line in memory["content"].splitlines() or [""]:
            print(f"    {line}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    provider = _provider()
    try:
        deleted = provider.store.forget_session(args.session)
    finally:
        provider.shutdown()
    print(f"deleted {deleted} memor{'y' if deleted == 1 else 'ies'} of session {args.session!r}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    if not args.yes:
        print("refusing to delete every memory without --yes", file=sys.stderr)
        return 2
    provider = _provider()
    try:
        deleted = provider.store.clear()
    finally:
        provider.shutdown()
    print(f"deleted {deleted} memor{'y' if deleted == 1 else 'ies'}")
    return 0


def _size(n: Any) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
