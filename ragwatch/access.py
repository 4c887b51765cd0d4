"""Who may read the live quality page: address allow-lists, the dashboard token and forwarding headers.

The page (``/dashboard``, ``.json``, ``.jsonl``) shows redacted questions and answers of other users, so it
is answered only to a caller the operator vouched for. A peer address alone vouches for little: behind a
same-host proxy, an L4 load balancer or a mesh sidecar every caller is ``127.0.0.x``, and a server that
rewrites the peer from ``X-Forwarded-For`` (uvicorn with ``forwarded_allow_ips='*'``) lets the caller write
it. :class:`DashboardGate` therefore decides on, in order:

1. forwarding headers (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``): a request carrying one came
   through a proxy, so its peer address is not its viewer's. It is refused unless the peer is one of
   ``dashboard_trusted_proxies`` *and* a token is configured (an address gate cannot vouch for a viewer
   behind a proxy);
2. ``dashboard_sources``, when given: the peer must be in one of them;
3. ``dashboard_token``, when given: ``Authorization: Bearer <token>`` or ``?token=<token>``, compared in
   constant time.

Used by the service's middleware, the worker's HTTP server and the demo; it knows no web framework.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import parse_qs

from ragwatch.errors import ConfigError

__all__ = ["FORWARDING_HEADERS", "REFUSALS", "AddressAllowList", "DashboardGate"]

#: Headers a proxy adds to say whom it forwards for (lower case, as ASGI and http.server give them).
FORWARDING_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-real-ip")

#: Why the gate refused a request: the bounded ``outcome`` values of ``ragwatch_dashboard_requests_total``
#: besides ``served`` and ``busy``.
REFUSALS = ("forwarded", "address", "no_token", "bad_token")


class AddressAllowList:
    """Peer addresses or CIDR networks from a setting; a bad entry is a :class:`ConfigError` naming it."""

    __slots__ = ("_networks",)

    def __init__(self, sources: Iterable[str], setting: str) -> None:
        try:
            self._networks = tuple(ipaddress.ip_network(s, strict=False) for s in sources)
        except ValueError as exc:
            raise ConfigError(f"{setting}: {exc}") from None

    def __bool__(self) -> bool:
        return bool(self._networks)

    def allows(self, client: str | None) -> bool:
        """Whether ``client`` (a peer address as the ASGI scope gives it) is in one of the networks."""
        if not self._networks or not client:
            return False
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in net for net in self._networks)


def _digest(value: bytes) -> bytes:
    """Both sides of the token comparison hashed first: equal lengths, so not even the length leaks."""
    return hashlib.sha256(b"ragwatch-dashboard\0" + value).digest()


class DashboardGate:
    """Decides whether one request may read the page; :meth:`refusal` never raises on what a request carries.

    ``token``: the shared secret callers present (None: no token asked); ``sources``: peer addresses or
    networks allowed (None or empty: any peer); ``trusted_proxies``: peers whose forwarding headers are
    accepted (with a token).
    """

    __slots__ = ("_proxies", "_sources", "_token")

    def __init__(
        self, token: str | None, sources: Iterable[str] | None = None, trusted_proxies: Iterable[str] = ()
    ) -> None:
        self._token = _digest(token.encode("utf-8")) if token else None
        self._sources = AddressAllowList(sources or (), "dashboard_sources")
        self._proxies = AddressAllowList(trusted_proxies, "dashboard_trusted_proxies")

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def refusal(self, headers: Iterable[tuple[bytes, bytes]], query: str, client: str | None) -> str | None:
        """None when the request may read the page, else why not (one of :data:`REFUSALS`).

        ``headers``: lower-case names and raw values; ``query``: the raw query string; ``client``: the peer.
        """
        authorization: bytes | None = None
        forwarded = False
        for name, value in headers:
            if name in FORWARDING_HEADERS:
                forwarded = True
            elif name == b"authorization":
                authorization = value
        if forwarded and (self._token is None or not self._proxies.allows(client)):
            return "forwarded"
        if self._sources and not self._sources.allows(client):
            return "address"
        if self._token is None:
            return None
        given = _bearer(authorization)
        if given is None:
            values = parse_qs(query).get("token")
            given = values[0].encode("utf-8", "surrogatepass") if values else None
        if given is None:
            return "no_token"
        return None if hmac.compare_digest(_digest(given), self._token) else "bad_token"


def _bearer(value: bytes | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if value is None:
        return None
    scheme, _, token = value.strip().partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        return None
    return token.strip()
