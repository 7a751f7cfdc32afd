"""What ``agentdiag serve`` was asked for: its store, address, token and remote access."""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass, field
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


def new_token() -> str:
    """A fresh random token (32 random bytes, URL-safe base64): what a server uses when given none."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ServeSettings:
    """One server: its store, its address and its token. Every request must carry the ``token`` (a bearer
    header, or the cookie the server hands out for it), loopback clients included; without one given, a random
    token is made (:func:`new_token`): read it from ``settings.token``. ``insecure_no_token`` (loopback only)
    turns the check off: every local user can then read the store. ``allow_remote`` is required for a host that
    is not loopback; such a server serves only the strict projection and never captured content.
    Raises :class:`ValueError` for an empty token, or ``insecure_no_token`` on a host that is not loopback."""

    store_path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    token: str | None = field(default_factory=new_token, repr=False)
    insecure_no_token: bool = False

    def __post_init__(self) -> None:
        if self.insecure_no_token:
            if self.remote:
                raise ValueError("insecure_no_token is for a loopback host only: a remote server needs its token")
            object.__setattr__(self, "token", None)  # no token is in force: none is kept
        elif not self.token:
            raise ValueError("a token is required (leave it out for a random one), or insecure_no_token=True")

    @property
    def remote(self) -> bool:
        """Bound to an address other machines may reach."""
        return not is_loopback_host(self.host)
