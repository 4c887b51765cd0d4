"""Connecting to Redis: one client for a plain, TLS, unix-socket, Sentinel or Cluster URL.

Kept apart from the queue's operations because it is the one place that reads a URL and the password
environment variable; every connection failure here is a :class:`~ragwatch.errors.ConfigError` (a bad URL)
or a :class:`~ragwatch.errors.QueueError` (an unreachable cluster), never a raw redis-py error.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.exceptions import RedisClusterException, RedisError

from ragwatch.errors import ConfigError, QueueError

__all__ = ["PASSWORD_ENV", "connect"]

# redis-py raises these for cluster trouble (no reachable node, slot not covered) outside RedisError.
_ERRORS = (RedisError, RedisClusterException)


#: The Redis password, when it is not in the URL: read from the environment only (like the judge's API
#: key), so a Kubernetes Secret can hold it alone and the URL can live in plain configuration.
PASSWORD_ENV = "RAGWATCH_REDIS_PASSWORD"


def connect(url: str, *, socket_timeout: float = 5.0, connect_timeout: float = 2.0) -> Any:
    """A redis-py client for any supported URL form (see :mod:`ragwatch.queue.contract`); a password in the URL
    wins over ``RAGWATCH_REDIS_PASSWORD``."""
    options: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        "health_check_interval": 30,
    }
    password = os.environ.get(PASSWORD_ENV)
    if password and not urlsplit(url).password:
        options["password"] = password
    scheme = _scheme(url)
    if scheme == "redis+cluster":
        return _cluster(url, options)
    try:
        if scheme == "redis+sentinel":
            return _sentinel(url, options)
        return redis.Redis.from_url(url, **options)
    except (ValueError, RedisError) as exc:
        raise ConfigError(f"invalid Redis URL {_safe(url)!r}: {exc}") from None


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower()


def _cluster_url(url: str) -> str:
    """The ``redis://`` URL of the seed node for redis-py's cluster client; ConfigError when it cannot work."""
    plain = "redis" + url[len("redis+cluster") :]
    problem = ""
    try:
        parts = urlsplit(plain)
        if not parts.hostname or "," in parts.netloc.rsplit("@", 1)[-1]:
            problem = "redis+cluster:// takes the host:port of one node"
        elif parts.path.strip("/") not in ("", "0"):
            problem = "Redis Cluster has only database 0"
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise ConfigError(f"invalid Redis URL {_safe(url)!r}: {problem}")
    return plain


def _cluster(url: str, options: dict[str, Any]) -> Any:
    from redis.cluster import RedisCluster

    plain = _cluster_url(url)
    try:
        return RedisCluster.from_url(plain, **options)  # asks the seed node for the slot map, now
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {_safe(url)!r}: {exc}") from None
    except _ERRORS as exc:
        raise QueueError(f"redis cluster connect failed: {type(exc).__name__}: {exc}") from exc


def _sentinel(url: str, options: dict[str, Any]) -> Any:
    from redis.sentinel import Sentinel

    parts = urlsplit(url)
    hosts = parts.netloc.rsplit("@", 1)[-1]
    nodes = []
    for host in hosts.split(","):
        name, _, port = host.partition(":")
        nodes.append((name, int(port or 26379)))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ConfigError("redis+sentinel:// URL needs the master name as its path: …/mymaster[/db]")
    auth = {}
    if parts.username:
        auth["username"] = unquote(parts.username)
    if parts.password:
        auth["password"] = unquote(parts.password)
    elif "password" in options:
        auth["password"] = options.pop("password")
    db = int(path[1]) if len(path) > 1 else 0
    sentinel = Sentinel(nodes, sentinel_kwargs=dict(options), **options, **auth)
    return sentinel.master_for(path[0], db=db)


def _safe(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url
