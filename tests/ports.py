"""Ports for the servers the tests start on 127.0.0.1.

A helper that picks a port and has a server bind it later races every other process of the machine
(the suite runs on several workers).  The ports here come from below the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), where no ``bind(0)`` and no outgoing connection lands, at
random, and free when picked; a server that still finds its port taken picks another (see
``redis_server.RedisServer`` and ``test_irc.Ngircd``).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

HOST = "127.0.0.1"
#: Where the picked ports come from when the kernel's ephemeral range cannot be read.
FALLBACK_RANGE = (20_000, 32_000)


def _picked_range() -> tuple[int, int]:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_RANGE
    return (10_000, low) if low > 12_000 else FALLBACK_RANGE


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range."""
    low, high = _picked_range()
    for _ in range(200):
        port = random.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])
