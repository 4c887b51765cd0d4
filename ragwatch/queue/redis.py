"""The Redis Stream backend of :class:`~ragwatch.queue.contract.Queue`.

One stream per service (``XADD … MAXLEN ~`` keeps Redis memory bounded), one consumer group for all of
its workers, ``XAUTOCLAIM`` for entries a crashed worker left pending, a dead-letter stream, and a Lua
script that applies a score exactly once per sample id. Every redis-py error is translated into
:class:`~ragwatch.errors.QueueError` here (connecting, in :mod:`ragwatch.queue.redis_connect`) and nowhere
else; every call has a socket timeout.

Every multi-key write is a Lua script over keys sharing the ``{service}`` hash tag, never MULTI/EXEC:
that is atomic on one Redis, behind Sentinel and in Redis Cluster alike (the cluster pipelines of
redis-py < 6 refuse transactions). A cluster client is created on first use, because redis-py connects to
the cluster in its constructor and a host application must be able to start while Redis is down.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from redis.exceptions import AuthenticationError, OutOfMemoryError, ResponseError

from ragwatch.errors import QueueError, QueueFullError
from ragwatch.forks import call_in_child
from ragwatch.mode.degrade import ModeState
from ragwatch.queue.contract import Applied, Entry, ModeListener, Queue, QueueStats, Retention
from ragwatch.queue.keys import GROUP, Keys
from ragwatch.queue.redis_connect import _ERRORS, _cluster_url, _safe, _scheme, connect

__all__ = ["RedisQueue", "connect"]

FIELD = "s"  # the stream entry field holding the encoded sample

# KEYS: legacy per-sample marker, this hour's applied set, the previous hour's, scores stream, totals hash,
# then one window list per metric (in ARGV order).
# ARGV: sample id, expire-at of this hour's set, scores maxlen, record, time, window cap, point suffix
# (" <client id>" or ""), then metric, value pairs. A window point is "time value" or "time value client".
# The previous hour is checked too: a sample stamped "now" (its producer's clock ran ahead) and
# redelivered after the hour turned must still be found.
_APPLY = """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 or redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1
  or redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIREAT', KEYS[2], ARGV[2])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'r', ARGV[4])
local w = 6
for i = 8, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[5], ARGV[i] .. ':n', 1)
  redis.call('HINCRBYFLOAT', KEYS[5], ARGV[i] .. ':sum', ARGV[i + 1])
  redis.call('LPUSH', KEYS[w], ARGV[5] .. ' ' .. ARGV[i + 1] .. ARGV[7])
  redis.call('LTRIM', KEYS[w], 0, tonumber(ARGV[6]) - 1)
  w = w + 1
end
return 1
"""

# KEYS: mode hash. ARGV: channel, expected version, then field, value pairs (including the new version).
_WRITE_MODE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PUBLISH', ARGV[1], 'changed')
return 1
"""

# KEYS: mode hash. ARGV: channel, version of the state, then its field, value pairs. Written whole, only over
# an older version (or none): after an empty restart the newest state any process saw wins.
_RESTORE_MODE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current >= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PUBLISH', ARGV[1], 'changed')
return 1
"""

# KEYS: scores stream, then the hour sets of idempotency markers, oldest first.
# ARGV: scores byte budget (0: none), markers byte budget (0: none), pressure ("1": halve both), how many of
# the newest hour sets are never dropped, fewest score records kept.
# Only XLEN, MEMORY USAGE, XTRIM, SCARD and UNLINK: none is refused at maxmemory, so this runs when it matters.
_TRIM_RETENTION = """
local pressure = ARGV[3] == '1'
local floor = tonumber(ARGV[5])
local scores = 0
local length = redis.call('XLEN', KEYS[1])
if length > floor then
  local keep = length
  local budget = tonumber(ARGV[1])
  if budget > 0 then
    local size = redis.call('MEMORY', 'USAGE', KEYS[1]) or 0
    if size > budget then keep = math.floor(length * budget / size) end
  end
  if pressure then keep = math.min(keep, math.floor(length / 2)) end
  keep = math.max(keep, floor)
  if keep < length then scores = redis.call('XTRIM', KEYS[1], 'MAXLEN', keep) end
end
local sizes, total = {}, 0
for i = 2, #KEYS do
  sizes[i] = redis.call('MEMORY', 'USAGE', KEYS[i]) or 0
  total = total + sizes[i]
end
local goal = total
local budget = tonumber(ARGV[2])
if budget > 0 and total > budget then goal = budget end
if pressure then goal = math.min(goal, total / 2) end
local markers = 0
for i = 2, #KEYS - tonumber(ARGV[4]) do
  if total <= goal then break end
  if sizes[i] > 0 then
    markers = markers + redis.call('SCARD', KEYS[i])
    redis.call('UNLINK', KEYS[i])
    total = total - sizes[i]
  end
end
return {scores, markers}
"""

# KEYS: dead-letter stream, samples stream. ARGV: dead maxlen, group, entry id, then field, value pairs.
_DEAD_LETTER = """
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 4))
return redis.call('XACK', KEYS[2], ARGV[2], ARGV[3])
"""


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _xadd_head(stream: str, maxlen: int) -> bytes:
    """``XADD <stream> MAXLEN ~ <maxlen> * s`` in RESP, up to the payload: the same for every sample."""
    args = (b"XADD", stream.encode(), b"MAXLEN", b"~", str(maxlen).encode(), b"*", FIELD.encode())
    return b"*8\r\n" + b"".join(_bulk(a) for a in args)


def _send_xadds(pool: Any, head: bytes, payloads: Sequence[bytes]) -> list[Exception | None]:
    """Pipeline one ``XADD`` per payload on one connection, packed here rather than by redis-py; returns,
    per payload, None when Redis added it, else the error it replied with.

    Why by hand: redis-py builds, encodes and parses every pipelined command in Python, which costs more
    per sample than building the sample itself (benchmarks/sampling_queue.py), and a Lua loop instead
    costs Redis four times the CPU of plain XADDs. The packing is one bytes join; the replies (stream ids)
    are read and discarded. A refused command (``OOM`` as Redis reaches ``maxmemory``) leaves the connection
    in step, so every reply is read and the caller learns which samples went in; any other error leaves
    the connection disconnected, so no half-read reply survives.
    """
    parts: list[bytes] = []
    for payload in payloads:
        parts += (head, b"$%d\r\n" % len(payload), payload, b"\r\n")
    replies: list[Exception | None] = []
    connection = pool.get_connection()
    try:
        connection.send_packed_command([b"".join(parts)])
        for _ in payloads:
            try:
                connection.read_response()
            except ResponseError as exc:  # an error reply, read whole: the next reply follows
                replies.append(exc)
            else:
                replies.append(None)
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return replies


def _refused(replies: Sequence[Any]) -> None:
    """Raise for the refused commands of a batch of ``XADD``s. Refused for memory alone, the error carries
    which went in (``results``: True, else None), so the producer re-sends only the rest."""
    errors = [r for r in replies if isinstance(r, Exception)]
    if not errors:
        return
    if all(isinstance(e, OutOfMemoryError) for e in errors):
        results: list[bool | None] = [None if isinstance(r, Exception) else True for r in replies]
        raise QueueFullError(
            f"redis XADD refused {len(errors)} of {len(replies)} samples: queue full (Redis maxmemory, "
            f"noeviction): {errors[0]}",
            results,
        )
    raise errors[0]


#: What a log line says when Redis refuses our credentials (the exception text alone reads like a bug).
AUTH_FAILED = "authentication failed (check the password or ACL user in the Redis URL)"
#: The operator action ``ragwatch health`` names when Redis is full.
FULL_ACTION = (
    "Redis is at maxmemory with noeviction and refuses new samples; workers trim scored entries by "
    "themselves; if none runs, start one or raise maxmemory (CONFIG SET maxmemory …)"
)


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    try:
        yield
    except OutOfMemoryError as exc:
        raise QueueFullError(f"redis {what} refused: queue full (Redis maxmemory, noeviction): {exc}") from exc
    except AuthenticationError as exc:
        raise QueueError(f"redis {what} failed: {AUTH_FAILED}: {exc}") from exc
    except ResponseError as exc:
        if str(exc).startswith(("WRONGPASS", "NOAUTH", "NOPERM")):
            raise QueueError(f"redis {what} failed: {AUTH_FAILED}: {exc}") from exc
        raise QueueError(f"redis {what} failed: {type(exc).__name__}: {exc}") from exc
    except _ERRORS as exc:
        raise QueueError(f"redis {what} failed: {type(exc).__name__}: {exc}") from exc


class RedisQueue(Queue):
    def __init__(
        self,
        url: str,
        service: str,
        *,
        maxlen: int = 100_000,
        scores_maxlen: int = 100_000,
        dead_maxlen: int = 10_000,
        applied_ttl_seconds: int = 7 * 24 * 3600,
        window_cap: int = 1000,
        socket_timeout: float = 5.0,
        client: Any = None,
        scores_max_bytes: int = 0,
        idempotency_max_bytes: int = 0,
        min_headroom_ratio: float = 0.0,
        feedback_maxlen: int = 10_000,
    ) -> None:
        """``scores_max_bytes`` and ``idempotency_max_bytes`` are the byte budgets of score records and
        idempotency markers, ``min_headroom_ratio`` the share of ``maxmemory`` under which workers trim
        both under pressure (:meth:`trim_retention`); 0 turns each off."""
        self.url = _safe(url)
        self.service = service
        self.keys = Keys(service)
        self._maxlen = maxlen
        self._xadd_head = _xadd_head(self.keys.samples, maxlen)
        self._scores_maxlen = scores_maxlen
        self._dead_maxlen = dead_maxlen
        self._feedback_maxlen = feedback_maxlen
        self._applied_ttl = applied_ttl_seconds
        self._window_cap = window_cap
        self._scores_max_bytes = scores_max_bytes
        self._markers_max_bytes = idempotency_max_bytes
        self._min_headroom = min_headroom_ratio
        self._url = url
        self._socket_timeout = socket_timeout
        self._lock = threading.Lock()
        self._client: Any = None
        if client is not None:
            self._use(client)
            return
        call_in_child(self._after_fork)  # our own client: a forked child makes a fresh one (see _after_fork)
        if _scheme(url) == "redis+cluster":
            _cluster_url(url)  # a bad URL is a ConfigError now; the cluster is contacted on first use
        else:
            self._use(connect(url, socket_timeout=socket_timeout))

    def _after_fork(self) -> None:
        """Drop the parent's client in a forked child. redis-py resets a pool after fork by itself, but
        under a lock that another parent thread may have held at the moment of the fork — the child would
        wait forever. A new client, made on first use, holds no inherited lock."""
        self._lock = threading.Lock()
        self._client = None

    def _use(self, client: Any) -> None:
        self._scripts = {
            name: client.register_script(text)
            for name, text in (
                ("apply", _APPLY),
                ("write_mode", _WRITE_MODE),
                ("dead_letter", _DEAD_LETTER),
                ("restore_mode", _RESTORE_MODE),
                ("trim_retention", _TRIM_RETENTION),
            )
        }
        self._client = client

    def _run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        client = self.client  # connects (and registers the scripts) on first use
        return self._scripts[script](keys=keys, args=args, client=client)

    @property
    def client(self) -> Any:
        """The redis-py client; a cluster client is created on first use (QueueError while unreachable)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._use(connect(self._url, socket_timeout=self._socket_timeout))
        return self._client

    def __repr__(self) -> str:
        return f"RedisQueue({self.url!r}, service={self.service!r})"

    def add(self, payloads: Sequence[bytes]) -> None:
        if not payloads:
            return
        with _translated("XADD"):
            client = self.client
            pool = getattr(client, "connection_pool", None)
            if pool is None:  # Redis Cluster: its own pipeline routes the commands to the stream's node
                pipe = client.pipeline(transaction=False)
                for payload in payloads:
                    pipe.xadd(self.keys.samples, {FIELD: payload}, maxlen=self._maxlen, approximate=True)
                _refused(pipe.execute(raise_on_error=False))
                return
            _refused(_send_xadds(pool, self._xadd_head, payloads))

    def ensure_group(self) -> bool:
        try:
            self.client.xgroup_create(self.keys.samples, GROUP, id="0", mkstream=True)
        except OutOfMemoryError as exc:  # refused even when the group exists: a full Redis needs us most
            with contextlib.suppress(*_ERRORS):
                if any(_text(g.get("name")) == GROUP for g in self.client.xinfo_groups(self.keys.samples)):
                    return False
            raise QueueFullError(f"redis XGROUP CREATE refused: queue full (Redis maxmemory): {exc}") from exc
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise QueueError(f"redis XGROUP CREATE failed: {exc}") from exc
            return False
        except _ERRORS as exc:
            raise QueueError(f"redis XGROUP CREATE failed: {exc}") from exc
        return True

    def read(self, consumer: str, count: int, block_ms: int) -> list[Entry]:
        with _translated("XREADGROUP"):
            reply = self.client.xreadgroup(
                GROUP, consumer, {self.keys.samples: ">"}, count=count, block=max(1, block_ms)
            )
        entries: list[Entry] = []
        for _stream, items in reply or ():
            for entry_id, fields in items:
                entries.append(Entry(_text(entry_id), _payload(fields), 1))
        return entries

    def claim_stale(self, consumer: str, min_idle_ms: int, count: int) -> tuple[list[Entry], list[str]]:
        with _translated("XAUTOCLAIM"):
            reply = self.client.xautoclaim(self.keys.samples, GROUP, consumer, min_idle_ms, start_id="0-0", count=count)
            items = reply[1]
            gone = [_text(i) for i in (reply[2] if len(reply) > 2 else ())]
            if gone:
                self.client.xack(self.keys.samples, GROUP, *gone)
            if not items:
                return [], gone
            pipe = self.client.pipeline(transaction=False)
            for entry_id, _fields in items:
                pipe.xpending_range(self.keys.samples, GROUP, min=entry_id, max=entry_id, count=1)
            counts = pipe.execute()
        entries = []
        for (entry_id, fields), pending in zip(items, counts, strict=True):
            deliveries = int(pending[0]["times_delivered"]) if pending else 1
            entries.append(Entry(_text(entry_id), _payload(fields), deliveries))
        return entries, gone

    def ack(self, ids: Sequence[str]) -> None:
        if ids:
            with _translated("XACK"):
                self.client.xack(self.keys.samples, GROUP, *ids)

    def trim_scored(self) -> int:
        with _translated("XTRIM"):
            client = self.client
            try:
                groups = client.xinfo_groups(self.keys.samples)
            except ResponseError:  # no stream yet
                return 0
            group = next((g for g in groups if _text(g.get("name")) == GROUP), None)
            if group is None:
                return 0
            last = _text(group.get("last-delivered-id") or "0-0")
            summary = client.xpending(self.keys.samples, GROUP)
            oldest = summary.get("min") if summary and summary.get("pending") else None
            # entries up to the last delivered one are acknowledged unless pending: keep from the oldest
            # pending entry, or from just after the last delivered one
            keep = _text(oldest) if oldest is not None else _next_id(last)
            if keep == "0-1":
                return 0
            return int(client.xtrim(self.keys.samples, minid=keep, approximate=False))

    def discard(self, ids: Sequence[str]) -> None:
        if ids:
            with _translated("XACK/XDEL"):
                pipe = self.client.pipeline(transaction=False)
                pipe.xack(self.keys.samples, GROUP, *ids)
                pipe.xdel(self.keys.samples, *ids)
                pipe.execute()

    def full_reason(self) -> str | None:
        with _translated("INFO memory"):
            info = self.client.info("memory")
        limit = int(info.get("maxmemory") or 0)
        if limit and info.get("maxmemory_policy") == "noeviction" and int(info.get("used_memory", 0)) >= limit:
            return FULL_ACTION
        return None

    def headroom(self) -> float | None:
        """The share of ``maxmemory`` still free (from INFO memory, clipped to 0..1); None without a limit.

        In Redis Cluster this is the node the client asks first, not necessarily the one holding the
        service's slot."""
        with _translated("INFO memory"):
            info = self.client.info("memory")
        limit = int(info.get("maxmemory") or 0)
        if not limit:
            return None
        return min(1.0, max(0.0, 1.0 - int(info.get("used_memory", 0)) / limit))

    def trim_retention(self, pressure: bool = False) -> Retention:
        headroom = self.headroom()
        pressure = pressure or (headroom is not None and headroom < self._min_headroom)
        if not (pressure or self._scores_max_bytes or self._markers_max_bytes):
            return Retention(headroom)
        hour = int(time.time() // 3600)
        hours = -(-self._applied_ttl // 3600) + 1  # a marker set lives up to ttl after its hour ends
        keys = [self.keys.scores] + [self.keys.applied_hour(h) for h in range(hour - hours, hour + 2)]
        # never dropped: the sets of the next, this and the previous hour, which the apply script checks
        args = [self._scores_max_bytes, self._markers_max_bytes, int(pressure), 3, min(100, self._scores_maxlen)]
        with _translated("trim retention"):
            scores, markers = self._run("trim_retention", keys, args)
        return Retention(headroom, int(scores), int(markers), pressure)

    def dead_letter(self, entry: Entry, error: str) -> None:
        args: list[Any] = [self._dead_maxlen, GROUP, entry.id]
        args += ["id", entry.id, "error", error[:2000], "deliveries", entry.deliveries, "at", repr(time.time())]
        if entry.payload is not None:
            args += [FIELD, entry.payload]
        with _translated("dead-letter"):
            self._run("dead_letter", [self.keys.dead, self.keys.samples], args)

    def _apply_call(
        self,
        sample_id: str,
        record: bytes,
        values: Mapping[str, float],
        at: float | None = None,
        client: str | None = None,
    ) -> tuple[list[str], list[Any]]:
        stamp = time.time() if at is None else at
        hour = int(stamp // 3600)
        # the whole hour's set goes ttl after the hour of its last write ends (a sample stamped long ago
        # but applied now stays idempotent for ttl from now)
        expire_at = (int(time.time() // 3600) + 1) * 3600 + self._applied_ttl
        suffix = f" {client}" if client and client.isalnum() and len(client) <= 32 else ""
        args: list[Any] = [sample_id, expire_at, self._scores_maxlen, record, repr(stamp), self._window_cap, suffix]
        keys = [
            self.keys.applied(sample_id),
            self.keys.applied_hour(hour),
            self.keys.applied_hour(hour - 1),
            self.keys.scores,
            self.keys.totals,
        ]
        for metric, value in values.items():
            args += [metric, repr(float(value))]
            keys.append(self.keys.window(metric))
        return keys, args

    def apply(
        self,
        sample_id: str,
        record: bytes,
        values: Mapping[str, float],
        at: float | None = None,
        client: str | None = None,
    ) -> bool:
        keys, args = self._apply_call(sample_id, record, values, at, client)
        with _translated("apply"):
            return bool(self._run("apply", keys, args))

    def apply_many(self, items: Sequence[Applied]) -> list[bool]:
        if _scheme(self._url) == "redis+cluster" or len(items) < 2:
            return super().apply_many(items)  # one slot anyway; keep cluster pipelines out of it
        with _translated("apply"):
            client = self.client
            pipe = client.pipeline(transaction=False)
            for item in items:
                keys, args = self._apply_call(*item)
                self._scripts["apply"](keys=keys, args=args, client=pipe)
            replies = pipe.execute(raise_on_error=False)
        errors = [r for r in replies if isinstance(r, Exception)]
        if not errors:
            return [bool(r) for r in replies]
        if all(isinstance(e, OutOfMemoryError) for e in errors):  # some went in: say which
            results = [None if isinstance(r, Exception) else bool(r) for r in replies]
            raise QueueFullError(f"redis apply refused: queue full (Redis maxmemory): {errors[0]}", results)
        with _translated("apply"):
            raise errors[0]

    def window(self, metric: str, count: int) -> list[tuple[float, float]]:
        return [(stamp, value) for stamp, value, _ in self.window_clients(metric, count)]

    def window_clients(self, metric: str, count: int) -> list[tuple[float, float, str]]:
        with _translated("LRANGE"):
            items = self.client.lrange(self.keys.window(metric), 0, max(0, count - 1))
        points = []
        for item in items:
            stamp, _, rest = _text(item).partition(" ")
            value, _, client = rest.partition(" ")
            with contextlib.suppress(ValueError):
                points.append((float(stamp), float(value), client[:32]))
        return points

    def read_mode(self) -> ModeState:
        with _translated("HGETALL"):
            return ModeState.from_fields(self.client.hgetall(self.keys.mode))

    def write_mode(self, state: ModeState, expected_version: int) -> bool:
        args: list[Any] = [self.keys.mode_channel, expected_version]
        for field, value in state.to_fields().items():
            args += [field, value]
        with _translated("write mode"):
            return bool(self._run("write_mode", [self.keys.mode], args))

    def restore_mode(self, state: ModeState) -> bool:
        args: list[Any] = [self.keys.mode_channel, state.version]
        for field, value in state.to_fields().items():
            args += [field, value]
        with _translated("restore mode"):
            return bool(self._run("restore_mode", [self.keys.mode], args))

    def mode_listener(self) -> ModeListener:
        return _RedisModeListener(self)

    def stats(self) -> QueueStats:
        with _translated("stats"):
            pipe = self.client.pipeline(transaction=False)
            pipe.xlen(self.keys.samples)
            pipe.xlen(self.keys.dead)
            length, dead = pipe.execute()
            pending = lag = 0
            try:
                groups = self.client.xinfo_groups(self.keys.samples)
            except ResponseError:  # no stream yet
                groups = []
        for group in groups:
            if _text(group.get("name")) == GROUP:
                pending = int(group.get("pending") or 0)
                lag = int(group.get("lag") or 0)
        return QueueStats(int(length), pending, lag, int(dead))

    def totals(self) -> dict[str, tuple[int, float]]:
        with _translated("HGETALL"):
            raw = self.client.hgetall(self.keys.totals)
        out: dict[str, list[float]] = {}
        for key, value in raw.items():
            metric, _, kind = _text(key).rpartition(":")
            slot = out.setdefault(metric, [0, 0.0])
            slot[0 if kind == "n" else 1] = float(value)
        return {m: (int(n), s) for m, (n, s) in out.items()}

    def recent_scores(self, count: int) -> list[bytes]:
        with _translated("XREVRANGE"):
            items = self.client.xrevrange(self.keys.scores, count=count)
        return [fields[b"r"] for _id, fields in items]

    def dead_letters(self, count: int) -> list[dict[str, Any]]:
        with _translated("XREVRANGE"):
            items = self.client.xrevrange(self.keys.dead, count=count)
        return [
            {
                "id": _text(f.get(b"id")),
                "error": _text(f.get(b"error")),
                "deliveries": int(f.get(b"deliveries", 0)),
                "payload": f.get(FIELD.encode()),
            }
            for _id, f in items
        ]

    def add_feedback(self, sample_id: str, record: bytes) -> None:
        with _translated("XADD feedback"):
            self.client.xadd(
                self.keys.feedback, {"id": sample_id, "f": record}, maxlen=self._feedback_maxlen, approximate=True
            )

    def feedback(self, count: int) -> list[tuple[str, bytes]]:
        with _translated("XREVRANGE feedback"):
            items = self.client.xrevrange(self.keys.feedback, count=count)
        return [(_text(f.get(b"id", b"")), f.get(b"f", b"")) for _id, f in items]

    def heartbeat(self, worker: str) -> None:
        with _translated("heartbeat"):
            self.client.hset(self.keys.workers, worker, time.time())

    def forget_worker(self, worker: str) -> None:
        with _translated("HDEL"):
            self.client.hdel(self.keys.workers, worker)

    def live_workers(self, max_age_seconds: float) -> dict[str, float]:
        with _translated("HGETALL"):
            raw = self.client.hgetall(self.keys.workers)
        horizon = time.time() - max_age_seconds
        return {_text(k): float(v) for k, v in raw.items() if float(v) >= horizon}

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with contextlib.suppress(Exception):
            client.close()
        manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
        for sentinel in getattr(manager, "sentinels", ()):  # the clients that ask Sentinel for the master
            with contextlib.suppress(Exception):
                sentinel.close()


def _next_id(entry_id: str) -> str:
    """The smallest stream id after ``entry_id``."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _payload(fields: Any) -> bytes | None:
    if not isinstance(fields, dict):
        return None
    value = fields.get(FIELD.encode(), fields.get(FIELD))
    return value if isinstance(value, bytes) else None


class _RedisModeListener(ModeListener):
    """A pub/sub subscription on the mode channel; reconnects lazily after errors."""

    def __init__(self, queue: RedisQueue) -> None:
        self._queue = queue
        self._pubsub: Any = None

    def wait(self, timeout: float) -> bool:
        try:
            if self._pubsub is None:
                self._pubsub = self._queue.client.pubsub(ignore_subscribe_messages=True)
                self._pubsub.subscribe(self._queue.keys.mode_channel)
            return self._pubsub.get_message(timeout=timeout) is not None
        except (*_ERRORS, QueueError):
            self.close()
            time.sleep(min(timeout, 1.0))  # Redis away: the periodic re-read will catch up
            return False

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(Exception):
                pubsub.close()
