"""Who may mark a request as a probe: the signature ``ragwatch replay`` puts on its requests.

A probe is kept out of the real-traffic sample, so whoever can mark a request as a probe decides what is
*not* scored: errors and bad answers included. The mark is therefore authenticated, never trusted as sent.
A request counts as a probe when its ``x-ragwatch-probe`` header carries

    t=<unix seconds>,sig=<hex HMAC-SHA256(secret, "<t>\\n<METHOD>\\n<path>")>

made with the shared ``probe_secret`` no longer ago than ``probe_max_age_seconds`` (clocks may differ by as
much), or when the request comes from an address in ``probe_sources``. Anything else — a header from an
outsider, a stale or malformed signature, no secret configured — is ignored (the request is treated as
real traffic) and counted. The header never reaches the application either way.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from collections.abc import Iterable

from ragwatch.errors import ConfigError

__all__ = ["AddressAllowList", "ProbeVerifier", "sign_probe"]


def _message(timestamp: str, method: str, path: str) -> bytes:
    return f"{timestamp}\n{method.upper()}\n{path}".encode("utf-8", "surrogatepass")


def sign_probe(secret: str | bytes, method: str, path: str, now: float | None = None) -> str:
    """The ``x-ragwatch-probe`` header value for one request (``path`` without the query string)."""
    key = secret.encode() if isinstance(secret, str) else secret
    timestamp = str(int(time.time() if now is None else now))
    mac = hmac.new(key, _message(timestamp, method, path), hashlib.sha256).hexdigest()
    return f"t={timestamp},sig={mac}"


class AddressAllowList:
    """Peer addresses or CIDR networks from a setting; a bad entry is a :class:`ConfigError` naming it."""

    __slots__ = ("_networks",)

    def __init__(self, sources: Iterable[str], setting: str) -> None:
        try:
            self._networks = tuple(ipaddress.ip_network(s, strict=False) for s in sources)
        except ValueError as exc:
            raise ConfigError(f"{setting}: {exc}") from None

    def allows(self, client: str | None) -> bool:
        """Whether ``client`` (a peer address as the ASGI scope gives it) is in one of the networks."""
        if not self._networks or not client:
            return False
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in net for net in self._networks)


class ProbeVerifier:
    """Checks probe marks on the service side; ``check`` never raises on what a request carries."""

    __slots__ = ("_key", "_max_age", "_networks")

    def __init__(self, secret: str | bytes | None, sources: Iterable[str] = (), max_age_seconds: float = 300.0) -> None:
        self._key = (secret.encode() if isinstance(secret, str) else secret) or None
        self._networks = AddressAllowList(sources, "probe_sources")
        self._max_age = max_age_seconds

    def check(self, value: bytes, method: str, path: str, client: str | None, now: float | None = None) -> bool:
        """Whether a request with this probe header value is a genuine probe."""
        if self._networks.allows(client):
            return True
        if self._key is None or len(value) > 200:
            return False
        fields = dict(part.partition("=")[::2] for part in value.decode("latin-1").split(","))
        timestamp, given = fields.get("t", ""), fields.get("sig", "")
        if not timestamp.isdigit() or len(given) != 64:
            return False
        if abs((time.time() if now is None else now) - int(timestamp)) > self._max_age:
            return False
        expected = hmac.new(self._key, _message(timestamp, method, path), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, given.lower())
