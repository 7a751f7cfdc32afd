"""What ``agentdiag serve`` was asked for: the store, the address, and whether remote clients may connect."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 16687
"""Beside Jaeger's own query port (16686), so both can run on one machine."""


def is_loopback_host(host: str) -> bool:
    """True for a loopback address or ``localhost``; a name that would need DNS is not loopback."""
    text = host.strip().strip("[]").lower()
    if text == "localhost" or text.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeSettings:
    """One server: its store and address. ``allow_remote`` with a ``token`` is required for a host that is not
    loopback; such a server serves only the strict projection and never captured content."""

    store_path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    token: str | None = None

    @property
    def remote(self) -> bool:
        """Bound to an address other machines may reach."""
        return not is_loopback_host(self.host)
