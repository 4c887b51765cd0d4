"""Who may mark a request as a probe: the signature ``ragwatch replay`` puts on its requests.

A probe is kept out of the real-traffic sample, so whoever can mark a request as a probe decides what is
*not* scored: errors and bad answers included. The mark is therefore authenticated, never trusted as sent.
A request counts as a probe when its ``x-ragwatch-probe`` header carries

    t=<unix seconds>,n=<nonce>,sig=<hex HMAC-SHA256(secret, message)>

where the message binds everything that makes the request what it is: ``ragwatch-probe-v2``, the
timestamp, the nonce, the method, the path, the raw query string and the SHA-256 of the body, one per line.
It must be made with the shared ``probe_secret`` no longer ago than ``probe_max_age_seconds`` (clocks may
differ by as much), and its nonce must not have been seen by this process before: a captured mark cannot be
put on another request, and the same request cannot be sent twice. The nonces are remembered per process
(a bounded cache); replicas do not share them, so one mark can be replayed once against each replica
within the window.

A request from an address in ``probe_sources`` counts as a probe whatever its header says: the address is
trusted before the header is read. Anything else — a header from an outsider, a stale, malformed, reused or
mismatched signature, no secret configured — is ignored (the request is treated as real traffic) and
counted. The header never reaches the application either way.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from ragwatch.access import AddressAllowList

__all__ = ["AddressAllowList", "ProbeMark", "ProbeVerifier", "sign_probe"]

_VERSION = b"ragwatch-probe-v2"
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
#: Longest header value read; a genuine one is about 120 bytes.
_MAX_VALUE = 256


def _message(timestamp: str, nonce: str, method: str, path: str, query: bytes, body_sha256: bytes) -> bytes:
    return b"\n".join(
        (
            _VERSION,
            timestamp.encode("ascii"),
            nonce.encode("ascii"),
            method.upper().encode("utf-8", "surrogatepass"),
            path.encode("utf-8", "surrogatepass"),
            query,
            body_sha256.hex().encode("ascii"),
        )
    )


def sign_probe(
    secret: str | bytes,
    method: str,
    path: str,
    query: bytes = b"",
    body: bytes = b"",
    *,
    now: float | None = None,
    nonce: str | None = None,
) -> str:
    """The ``x-ragwatch-probe`` header value for one request.

    ``path`` is the decoded path (as the ASGI scope's ``path``), ``query`` the raw query string as sent
    (without ``?``), ``body`` the exact bytes sent. A fresh random nonce unless one is given.
    """
    key = secret.encode() if isinstance(secret, str) else secret
    timestamp = str(int(time.time() if now is None else now))
    nonce = nonce or uuid.uuid4().hex
    message = _message(timestamp, nonce, method, path, query, hashlib.sha256(body).digest())
    return f"t={timestamp},n={nonce},sig={hmac.new(key, message, hashlib.sha256).hexdigest()}"


@dataclass(frozen=True, slots=True)
class ProbeMark:
    """A header value that is well-formed and within the time window; its signature is not checked yet."""

    timestamp: str
    nonce: str
    signature: str


class _Nonces:
    """Nonces seen in the last window, oldest first; bounded, so a full cache refuses rather than forgets."""

    __slots__ = ("_lock", "_max", "_seen", "_ttl")

    def __init__(self, max_entries: int, ttl: float) -> None:
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self._ttl = ttl

    def add(self, nonce: str, now: float) -> str | None:
        """Remember ``nonce``; None when new, else why it is refused ("replayed", "nonce_cache_full")."""
        with self._lock:
            while self._seen:
                oldest, at = next(iter(self._seen.items()))
                if now - at <= self._ttl:
                    break
                del self._seen[oldest]
            if nonce in self._seen:
                return "replayed"
            if len(self._seen) >= self._max:  # forgetting one early would let it be replayed
                return "nonce_cache_full"
            self._seen[nonce] = now
            return None


class ProbeVerifier:
    """Checks probe marks on the service side; no method raises on what a request carries.

    Two steps, because the body must be read before the signature can be checked: :meth:`parse` (cheap, on
    the header alone) says whether the body is worth reading, :meth:`verify` checks the signature over the
    request and spends the nonce.
    """

    __slots__ = ("_key", "_max_age", "_networks", "_nonces")

    def __init__(
        self,
        secret: str | bytes | None,
        sources: Iterable[str] = (),
        max_age_seconds: float = 60.0,
        nonce_cache: int = 4096,
    ) -> None:
        self._key = (secret.encode() if isinstance(secret, str) else secret) or None
        self._networks = AddressAllowList(sources, "probe_sources")
        self._max_age = max_age_seconds
        # a mark is valid for max_age either side of its timestamp: remembered for as long as it could pass
        self._nonces = _Nonces(nonce_cache, 2 * max_age_seconds + 1)

    def trusted_source(self, client: str | None) -> bool:
        """Whether the peer is in ``probe_sources`` (a probe whatever its header says)."""
        return self._networks.allows(client)

    def parse(self, value: bytes, now: float | None = None) -> ProbeMark | None:
        """The mark, when the header is well-formed, fresh and a secret is configured; else None."""
        if self._key is None or len(value) > _MAX_VALUE:
            return None
        fields = dict(part.partition("=")[::2] for part in value.decode("latin-1").split(","))
        timestamp, nonce, signature = fields.get("t", ""), fields.get("n", ""), fields.get("sig", "")
        # ASCII digits only: str.isdigit() also accepts '²' (b'\xb2' in Latin-1), which int() refuses
        if not timestamp or len(timestamp) > 12 or not _DIGITS.issuperset(timestamp):
            return None
        if not 16 <= len(nonce) <= 64 or not _HEX.issuperset(nonce):
            return None
        if len(signature) != 64 or not _HEX.issuperset(signature):
            return None
        if abs((time.time() if now is None else now) - int(timestamp)) > self._max_age:
            return None
        return ProbeMark(timestamp, nonce.lower(), signature.lower())

    def verify(
        self,
        mark: ProbeMark,
        method: str,
        path: str,
        query: bytes,
        body_sha256: bytes,
    ) -> str:
        """``accepted``, or why not: ``ignored`` (no valid signature over this request) or ``replayed``
        (the nonce was seen before, or the cache of seen nonces is full)."""
        if self._key is None:
            return "ignored"
        message = _message(mark.timestamp, mark.nonce, method, path, query, body_sha256)
        expected = hmac.new(self._key, message, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, mark.signature):
            return "ignored"
        refused = self._nonces.add(mark.nonce, time.monotonic())
        return "accepted" if refused is None else "replayed"
