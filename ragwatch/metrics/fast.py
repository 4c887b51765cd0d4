"""Counters and histograms for the request path, cheaper than prometheus_client's own.

prometheus_client guards every value with a lock and walks the bucket list in Python; one histogram
observation costs about a microsecond here, and a watched request makes seven of them. These families keep
one small list of numbers per (thread, label set) instead: the owning thread adds to it without a lock
(nobody else writes to it), and a scrape sums the lists of all threads. An observation is a thread-local
lookup, a ``bisect`` and two adds — about a third of the cost — and no update is ever lost, because no two
threads share a list.

Threads come and go (thread-per-request servers): when a thread has ended, its numbers are folded into a
"retired" list at the next scrape or the next new thread, so memory stays bounded by the live threads.

They are registered in a :class:`~prometheus_client.CollectorRegistry` like any collector and expose the
same samples a prometheus_client ``Counter`` / ``Histogram`` would (``_total``, ``_bucket``, ``_count``,
``_sum``, ``_created``). In prometheus_client multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``), where values
must live in shared files, :func:`counter` and :func:`histogram` return prometheus_client's own classes.

A histogram bucket can carry an OpenMetrics exemplar, the trace id of one request that fell in it
(:func:`exemplars`, called for sampled requests only), so a latency panel links to a trace. Exemplars are
kept apart from the counts, the newest per bucket, and appear only in the OpenMetrics exposition
(``Accept: application/openmetrics-text``); prometheus_client's multiprocess classes keep none.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, Exemplar, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ragwatch.labels import safe_label

__all__ = ["EXEMPLAR_LABEL", "adder", "counter", "exemplars", "histogram"]

_local = threading.local()
_lock = threading.Lock()
#: (thread, cells) for every thread that has recorded something; cells[slot] is one child's numbers.
_shards: list[tuple[threading.Thread, list[list[float] | None]]] = []
#: Numbers of threads that have ended, summed per slot.
_retired: list[list[float] | None] = []
_widths: list[int] = []  # slot -> cell length (buckets + sum, or 1 for a counter)
_families: weakref.WeakSet[_Family] = weakref.WeakSet()


def _after_fork() -> None:
    """A lock held by another thread at fork() stays held forever in the child: start with fresh ones."""
    global _lock
    _lock = threading.Lock()
    for family in list(_families):
        family._create = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def _new_slot(width: int) -> int:
    with _lock:
        _widths.append(width)
        return len(_widths) - 1


def _retire_dead() -> None:
    """Fold the numbers of ended threads into ``_retired``; call with ``_lock`` held.

    A thread's cell list is as long as the highest slot it touched, which grows with every family, child and
    model in the process; ``compress`` finds the few cells it filled in C (a cell is a non-empty list, None
    an untouched slot), so folding a thread costs what it recorded, not the process's slot count. LangChain
    starts new threads for every chain invocation, each folded by the next."""
    alive = []
    for thread, cells in _shards:
        if thread.is_alive():
            alive.append((thread, cells))
            continue
        if len(_retired) < len(cells):
            _retired.extend([None] * (len(cells) - len(_retired)))
        for slot in compress(range(len(cells)), cells):
            cell = cells[slot]
            if cell is None:  # never (compress kept the filled cells): for the type checker
                continue
            into = _retired[slot]
            if into is None:
                _retired[slot] = list(cell)
            else:
                for i, v in enumerate(cell):
                    into[i] += v
    _shards[:] = alive


def _cell(slot: int) -> list[float]:
    """This thread's numbers for ``slot``, created on first use (the slow path of every update)."""
    cells: list[list[float] | None] | None = getattr(_local, "cells", None)
    if cells is None:
        cells = _local.cells = []
        with _lock:
            _retire_dead()
            _shards.append((threading.current_thread(), cells))
    if len(cells) <= slot:
        cells.extend([None] * (slot + 1 - len(cells)))
    cell = cells[slot]
    if cell is None:
        cell = cells[slot] = [0.0] * _widths[slot]
    return cell


def _sources() -> list[list[list[float] | None]]:
    """Every thread's cells plus the retired ones, after folding ended threads: one scrape's snapshot."""
    with _lock:
        _retire_dead()
        sources = [cells for _, cells in _shards]
        sources.append(_retired)
    return sources


def _totals(slot: int, sources: list[list[list[float] | None]] | None = None) -> list[float]:
    """The sum over all threads, live and ended, of one child's numbers."""
    out = [0.0] * _widths[slot]
    for cells in _sources() if sources is None else sources:
        if len(cells) > slot:
            cell = cells[slot]
            if cell is not None:
                for i, v in enumerate(list(cell)):
                    out[i] += v
    return out


class _CounterChild:
    __slots__ = ("created", "parts", "slot")

    def __init__(self) -> None:
        self.slot = _new_slot(1)
        #: Where this counter's numbers live: its own slot, plus one place in each adder() group it joined.
        self.parts: list[tuple[int, int]] = [(self.slot, 0)]
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("counters can only increase")
        try:
            _local.cells[self.slot][0] += amount
        except (AttributeError, IndexError, TypeError):
            _cell(self.slot)[0] += amount

    def get(self, sources: list[list[list[float] | None]] | None = None) -> float:
        if sources is None:
            sources = _sources()
        return sum(_totals(slot, sources)[i] for slot, i in self.parts)


def adder(*children: Any) -> Callable[..., None]:
    """One function adding to several counter children at once: ``add(a, b, c)`` adds a to the first...

    An LLM call bumps input tokens, output tokens and cost together. The group gets one cell per thread
    holding a number for each counter, so the call is one thread-local lookup and a few adds; each counter
    reports its own numbers plus its share of the group's. Amounts must not be negative (they are token
    counts and prices).
    """
    if not all(isinstance(c, _CounterChild) for c in children):  # prometheus_client's (multiprocess mode)
        incs = [c.inc for c in children]

        def add_each(*amounts: float) -> None:
            for inc, amount in zip(incs, amounts, strict=True):
                if amount:
                    inc(amount)

        return add_each
    if not 1 <= len(children) <= 4:
        raise ValueError("adder() takes one to four counters")
    slot = _new_slot(4)  # unused places pad the group to four, so add() needs no loop
    for i, child in enumerate(children):
        child.parts.append((slot, i))

    def add(a: float, b: float = 0, c: float = 0, d: float = 0) -> None:
        try:
            cell = _local.cells[slot]
            cell[0] += a
        except (AttributeError, IndexError, TypeError):
            cell = _cell(slot)
            cell[0] += a
        cell[1] += b
        cell[2] += c
        cell[3] += d

    return add


#: The exemplar's label: the trace id, as Grafana's "exemplars" links expect it.
EXEMPLAR_LABEL = "trace_id"
#: Longest trace id put on an exemplar (OTel's are 32 hex digits): OpenMetrics caps an exemplar's labels at
#: 128 characters, and Prometheus rejects the whole scrape past that.
_MAX_TRACE_ID = 64


class _HistogramChild:
    __slots__ = ("bounds", "created", "marks", "slot")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds  # finite upper bounds; index len(bounds) is +Inf, the last cell the sum
        self.slot = _new_slot(len(bounds) + 2)
        self.created = time.time()
        #: per bucket, the newest (trace id, value, time) marked on it; None until the first exemplar
        self.marks: list[tuple[str, float, float] | None] | None = None

    def exemplar(self, amount: float, trace_id: str) -> None:
        """Mark the bucket ``amount`` falls in with ``trace_id`` (the newest mark per bucket is shown). Not
        an observation: :meth:`observe` counted it already. One list store, no lock: a scrape reads a copy."""
        marks = self.marks
        if marks is None:
            marks = self.marks = [None] * (len(self.bounds) + 1)
        marks[bisect_left(self.bounds, amount)] = (trace_id, amount, time.time())

    def observe(self, amount: float) -> None:
        i = bisect_left(self.bounds, amount)
        try:
            cell = _local.cells[self.slot]
            cell[i] += 1
        except (AttributeError, IndexError, TypeError):
            cell = _cell(self.slot)
            cell[i] += 1
        cell[-1] += amount


def exemplars(
    children: Mapping[tuple[str, str], Any], durations: Mapping[str, float], outcome: str, trace_id: str | None
) -> None:
    """Put a sampled request's trace id on its latency buckets: the ``request`` child of its ``outcome``, and
    when it succeeded the ``ok`` child of every stage it ran (a run does not keep a stage's own outcome, so
    a failed request marks the request only; a stage run twice is marked with its total).

    ``children`` are the resolved ``(stage, outcome)`` children of ``ragwatch_stage_duration_seconds``;
    prometheus_client's own (multiprocess mode, which keeps no exemplars) are skipped."""
    if not trace_id or len(trace_id) > _MAX_TRACE_ID or not children:
        return
    for stage, seconds in durations.items():
        if stage != "request" and outcome != "ok":
            continue
        child = children.get((stage, outcome))
        if isinstance(child, _HistogramChild):
            child.exemplar(seconds, trace_id)


class _Family(Collector):
    """One metric family: label children created on demand, collected by summing thread shards."""

    kind = "family"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Any] = {}
        self._create = threading.Lock()
        _families.add(self)

    def labels(self, *values: Any) -> Any:
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            # Creating a child is rare: bound the values here, so no caller can put an unbounded string
            # (a model id from an LLM response) on the /metrics page.
            key = tuple(safe_label(v) for v in key)
            child = self._children.get(key)
        if child is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {key}")
            with self._create:
                child = self._children.get(key)
                if child is None:
                    child = self._children[key] = self._child()
        return child

    def _child(self) -> Any:
        raise NotImplementedError

    def _items(self) -> list[tuple[tuple[str, ...], Any]]:
        with self._create:
            return list(self._children.items())

    def describe(self) -> Iterator[Any]:  # lets the registry detect name clashes without collecting
        yield from self._empty()

    def _empty(self) -> Iterator[Any]:
        raise NotImplementedError


def _created(child: Any) -> float | None:
    return None if os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "").lower() in ("true", "1") else child.created


class ShardedCounter(_Family):
    kind = "counter"

    def _child(self) -> _CounterChild:
        return _CounterChild()

    def _empty(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        sources = _sources()
        for key, child in self._items():
            family.add_metric(list(key), child.get(sources), created=_created(child))
        yield family


class ShardedHistogram(_Family):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        super().__init__(name, documentation, labelnames)
        bounds = sorted(float(b) for b in buckets)
        if bounds and math.isinf(bounds[-1]):
            bounds.pop()
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError(f"{name}: buckets must be distinct and include at least one finite bound")
        self.bounds = tuple(bounds)

    def _child(self) -> _HistogramChild:
        return _HistogramChild(self.bounds)

    def _empty(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        edges = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        sources = _sources()
        for key, child in self._items():
            totals = _totals(child.slot, sources)
            marks = list(child.marks) if child.marks is not None else None
            cumulative = 0.0
            buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
            for i, (edge, count) in enumerate(zip(edges, totals[:-1], strict=True)):
                cumulative += count
                mark = marks[i] if marks is not None else None
                if mark is None:
                    buckets.append((edge, cumulative))
                else:
                    buckets.append((edge, cumulative, Exemplar({EXEMPLAR_LABEL: mark[0]}, mark[1], mark[2])))
            family.add_metric(list(key), buckets, totals[-1])
            created = _created(child)
            if created is not None:
                family.add_sample(self.name + "_created", dict(zip(self.labelnames, key, strict=True)), created)
        yield family


def _multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def counter(name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry | None) -> Any:
    """A counter family with ``labels(...).inc(n)``; prometheus_client's in multiprocess mode."""
    if _multiprocess():
        return Counter(name, documentation, labelnames, registry=registry)
    family = ShardedCounter(name, documentation, labelnames)
    if registry is not None:
        registry.register(family)
    return family


def histogram(
    name: str,
    documentation: str,
    labelnames: Sequence[str],
    buckets: Sequence[float],
    registry: CollectorRegistry | None,
) -> Any:
    """A histogram family with ``labels(...).observe(v)``; prometheus_client's in multiprocess mode."""
    if _multiprocess():
        return Histogram(name, documentation, labelnames, buckets=buckets, registry=registry)
    family = ShardedHistogram(name, documentation, labelnames, buckets)
    if registry is not None:
        registry.register(family)
    return family
