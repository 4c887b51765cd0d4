"""Traffic for the demo: bilingual questions, sent in phases, with a progress display.

A phase is "at least ``n`` requests, then keep going until ``until()`` holds (or ``limit`` more requests
pass)": degraded mode is decided asynchronously by the scoring worker, so a fixed request count would make
the demo either slow or flaky. The display is a rich progress bar on a terminal (rich is optional) and one
plain line per phase otherwise, so logs and CI output stay readable.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragwatch.demo.kb import QUESTIONS, Question

__all__ = ["Display", "Phase", "QuestionStream", "send_phase"]


class QuestionStream:
    """Alternates English and Chinese questions (half each), shuffled reproducibly by ``seed``."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._pools = {lang: [q for q in QUESTIONS if q.lang == lang] for lang in ("en", "zh")}
        self._n = 0

    def next(self) -> Question:
        lang = "en" if self._n % 2 == 0 else "zh"
        self._n += 1
        return self._rng.choice(self._pools[lang])


@dataclass
class Phase:
    name: str
    requests: int
    limit: int  # extra requests allowed while waiting for ``until``
    until: Callable[[], bool] | None = None


class Display:
    """Progress on stderr with rich when it is a terminal; plain lines on stdout otherwise."""

    def __init__(self, enabled: bool | None = None) -> None:
        self._progress: Any = None
        self._task: Any = None
        use_rich = sys.stderr.isatty() if enabled is None else enabled
        if use_rich:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            except ImportError:
                use_rich = False
            else:
                self._progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=Console(stderr=True),
                    transient=False,
                )

    def start(self) -> None:
        if self._progress is not None:
            self._progress.start()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()

    def phase(self, name: str, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task(name, total=total)
        else:
            print(f"[demo] phase: {name} ({total}+ requests)", flush=True)

    def advance(self, total: int | None = None) -> None:
        if self._progress is not None and self._task is not None:
            if total is not None:
                self._progress.update(self._task, total=total)
            self._progress.advance(self._task)

    def event(self, message: str) -> None:
        """A line that must be seen as it happens (mode switches are printed from ragwatch's thread)."""
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            print(message, flush=True)


async def send_phase(
    client: Any, questions: QuestionStream, phase: Phase, display: Display, pause: float
) -> tuple[int, int]:
    """Send one phase's requests one by one; returns (requests sent, responses flagged degraded)."""
    display.phase(phase.name, phase.requests)
    sent = degraded = 0
    while True:
        done = sent >= phase.requests and (phase.until is None or phase.until())
        if done or sent >= phase.requests + phase.limit:
            break
        q = questions.next()
        response = await client.post("/ask", json={"question": q.text})
        response.raise_for_status()
        degraded += bool(response.json().get("degraded"))
        sent += 1
        display.advance(total=max(phase.requests, sent))
        await asyncio.sleep(pause)
    return sent, degraded
