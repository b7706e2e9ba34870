"""The chaos test's traffic with and without its faults (``make bench-gateway``): what the faults cost.

The same cluster as ``tests/gateways/test_gateway_chaos.py`` (one ingress and three workers, each a real
``gateway run --role ...`` process, the HTTP platform, a real redis-server with every write synced,
the same turn time, 50 chats x 10 messages posted by httpx, each chat's in order), run twice on
fresh homes and a fresh Redis: calm, then with the test's seeded faults (a worker SIGKILLed and
replaced, another SIGSTOPped past ``claim_after``, Redis restarted, the ingress SIGKILLed and started
again).  Throughput is the messages answered over the time from the first post to the last reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the chaos test, Redis

from redis_server import RedisServer, free_port
from test_gateway_chaos import (
    CHATS,
    CLAIM_AFTER,
    MESSAGES,
    TURN,
    WAIT,
    Cluster,
    chaos,
    drive_chat,
    listening,
)


async def _traffic(cluster: Cluster, faults: bool) -> dict[str, Any]:
    workers = [cluster.start(f"worker-{i}", "worker") for i in range(3)]
    ingress = [cluster.start("ingress", "ingress")]
    url = f"http://127.0.0.1:{cluster.http_port}"
    got: dict[str, list[str]] = {}
    posts: dict[str, int] = {}
    limits = httpx.Limits(max_connections=CHATS * 2, max_keepalive_connections=CHATS * 2)
    async with httpx.AsyncClient(timeout=WAIT + 10, limits=limits) as client:
        await listening(client, url)
        # Each worker connected and ready: the calm run does not measure start-up either.
        await asyncio.sleep(1.0)
        started = time.monotonic()
        chats = [f"c{i:02d}" for i in range(CHATS)]
        drivers = [asyncio.create_task(drive_chat(client, url, chat, got, posts)) for chat in chats]
        done = await chaos(cluster, workers, ingress, set(), lambda: len(got)) if faults else []
        await asyncio.wait_for(asyncio.gather(*drivers), 300)
        elapsed = time.monotonic() - started
    answered = sum(1 for replies in got.values() if replies)
    return {
        "faults": done,
        "answered": answered,
        "elapsed_s": elapsed,
        "throughput": answered / elapsed,
        "posted_again": sum(1 for n in posts.values() if n > 1),
    }


def run(faults: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hermes-bench-chaos-") as folder:
        root = Path(folder)
        redis = RedisServer(root / "redis").start()
        cluster = Cluster(root, redis, free_port())
        try:
            return asyncio.run(_traffic(cluster, faults))
        finally:
            cluster.stop_all()
            redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = parser.parse_args()
    calm, stormy = run(faults=False), run(faults=True)
    print("E. The chaos test's traffic, calm and with its faults")
    print(
        f"   {CHATS} chats x {MESSAGES} messages, {TURN * 1000:.0f} ms turns, 1 ingress + 3 workers "
        f"(concurrency 4), claim_after {CLAIM_AFTER:.0f} s"
    )
    for name, row in (("calm", calm), ("faults", stormy)):
        print(
            f"   {name:<7} {row['answered']} answered in {row['elapsed_s']:5.1f} s: "
            f"{row['throughput']:6.1f} messages/s, {row['posted_again']} posted again"
        )
    print(f"   with the faults: {stormy['throughput'] / calm['throughput']:.2f}x the calm throughput")
    for line in stormy["faults"]:
        print(f"     {line}")
    if args.json:
        Path(args.json).write_text(json.dumps({"calm": calm, "faults": stormy}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
