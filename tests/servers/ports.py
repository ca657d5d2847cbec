"""Ports for the private servers the tests start: free when they start, outside the ephemeral range.

An outgoing connection takes its local port from the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 here); a server that listens on a port
inside it can find the port held by some client's socket and fail to bind, as a Galera node's SST
daemon did once in CI.  Fixed ports therefore lie below the range, and are checked before a start.

Fixed ports (Galera's 23061-24263, PostgreSQL 18's 25418) lie below 26000; ``free_port`` draws
from 26000 up, so a drawn port never meets one of them while its server is down or, as Galera's
SST daemon, listens only now and then.
"""

from __future__ import annotations

import socket

from tests.servers.private import _ephemeral_range


def check_ports(ports: dict[str, int], who: str) -> None:
    """Exit with a message naming the port if any of ``ports`` is in the ephemeral range or in use."""
    low, high = _ephemeral_range()
    for name, port in ports.items():
        if low <= port <= high:
            raise SystemExit(
                f"{who}: {name} port {port} lies in the kernel's ephemeral range {low}-{high}, where an outgoing "
                "connection may hold it; choose a port below it"
            )
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                raise SystemExit(
                    f"{who}: {name} port {port} is in use ({exc}); stop what holds it or pick another"
                ) from None
