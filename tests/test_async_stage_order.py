"""A stream opened inside a run holds the run back from the listeners until it ends.

asyncio does not close an abandoned async generator at once: its finaliser hook schedules ``aclose()`` a
few loop steps later. An async generator stage nested in an async pipeline and left early (the consumer
``break``s or raises in ``async for``, or the pipeline, itself an async generator, is closed early) used to
end *after* its pipeline had handed the run to the listeners (the sampler, the exporters): they saw a run
without its ``generate`` stage. Now a run ends (its ``request`` stage is counted at once) but waits for the
streams opened inside it before it reaches the listeners; the last of them to end hands it over. A stream
that outlives its pipeline on purpose (the first chunk read, then a ``StreamingResponse`` streams the rest)
therefore still lands its tokens and cost in the run the listeners receive. A stream the host drops without
closing ends as ``cancelled`` when it is collected, which hands the run over too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

import ragwatch
from tests.conftest import no_internal_errors, stage_outcomes

MODEL = "gpt-4o-mini"
QUESTION = "How much for hotels?"
DELTAS = ("600 ", "CNY", ".")


@pytest.fixture(params=["tracing", "metrics only"])
def watched(request: pytest.FixtureRequest, registry: CollectorRegistry, provider: Any) -> ragwatch.RagWatch:
    """Both drivers of the bookkeeping: call objects (tracing on) and stages (tracing off)."""
    return ragwatch.RagWatch("svc", registry=registry, tracer_provider=provider, tracing=request.param == "tracing")


@pytest.fixture
def seen(watched: ragwatch.RagWatch) -> list[dict[str, Any]]:
    """What each run carried at the moment it reached the listeners (not as filled in later)."""
    found: list[dict[str, Any]] = []
    watched.add_listener(
        lambda run: found.append(
            {
                "durations": dict(run.durations),
                "answer": run.answer,
                "usage": run.usage,
                "cost": run.cost_usd,
                "outcome": run.outcome,
            }
        )
    )
    return found


# -- an async generator stage abandoned inside an async pipeline ------------------------------------------


@pytest.mark.parametrize("how", ["break", "raise"])
def test_an_async_generator_stage_left_early_is_recorded_in_its_run(
    how: str, watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    rw = watched

    @rw.llm(model=MODEL)
    async def generate(question: str) -> AsyncIterator[str]:
        for delta in DELTAS:
            yield delta

    @rw.pipeline
    async def answer(question: str) -> str:
        async for delta in generate(question):
            if how == "raise":
                raise ValueError(delta)
            break
        return "600"

    async def main() -> None:
        with contextlib.suppress(ValueError):
            await answer(QUESTION)
        assert stage_outcomes(registry, "request")["cancelled"] == 0  # the request itself was counted at its end
        await asyncio.sleep(0.05)  # asyncio's aclose() of the abandoned generator has run by now

    asyncio.run(main())
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    (run,) = seen  # before the fix: handed over without its generate stage, which landed later
    assert "generate" in run["durations"] and run["answer"] == "600 "
    assert run["outcome"] == ("error" if how == "raise" else "ok")
    assert no_internal_errors(registry)


def test_an_async_generator_pipeline_closed_early_waits_for_its_stage(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    rw = watched

    @rw.llm(model=MODEL)
    async def generate(question: str) -> AsyncIterator[str]:
        for delta in DELTAS:
            yield delta

    @rw.pipeline
    async def answer(question: str) -> AsyncIterator[str]:
        async for delta in generate(question):
            yield delta

    async def main() -> None:
        stream = answer(QUESTION)
        assert await stream.__anext__() == "600 "
        await stream.aclose()
        assert stage_outcomes(registry, "request") == {"ok": 0, "error": 0, "cancelled": 1}
        await asyncio.sleep(0.05)

    asyncio.run(main())
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    (run,) = seen  # before the fix: handed over at aclose(), its generate stage still open
    assert run["outcome"] == "cancelled" and "generate" in run["durations"] and run["answer"] == "600 "
    assert no_internal_errors(registry)


def test_a_sync_generator_stage_left_early_is_recorded_as_before(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    """Not a bug before (a sync generator closes as the loop drops it): the hold must not change it."""
    rw = watched

    @rw.llm(model=MODEL)
    def generate(question: str) -> Iterator[str]:
        yield from DELTAS

    @rw.pipeline
    def answer(question: str) -> str:
        for _ in generate(question):
            break
        return "600"

    assert answer(QUESTION) == "600"
    (run,) = seen
    assert "generate" in run["durations"]
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}


# -- a stream that outlives its pipeline on purpose ---------------------------------------------------------


def test_a_stream_returned_in_a_streaming_response_lands_its_tokens_in_the_run(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    """The first chunk read in the pipeline (to fail before the response starts), the rest streamed by
    Starlette after the pipeline returned: the run reaches the listeners once the answer is complete, with
    its tokens and cost — not at the pipeline's return, without them."""
    rw = watched

    @rw.llm(model=MODEL)
    async def generate(question: str) -> AsyncIterator[str]:
        for delta in DELTAS:
            await asyncio.sleep(0)
            yield delta

    @rw.pipeline
    async def answer(question: str) -> StreamingResponse:
        stream = generate(question)
        first = await stream.__anext__()

        async def body() -> AsyncIterator[str]:
            yield first
            async for delta in stream:
                yield delta

        return StreamingResponse(body(), media_type="text/plain")

    app = FastAPI()

    @app.get("/ask")
    async def ask(q: str) -> StreamingResponse:
        return await answer(q)

    with TestClient(app) as client:
        response = client.get("/ask", params={"q": QUESTION})
    assert response.text == "600 CNY."
    assert stage_outcomes(registry, "request")["ok"] == 1 and stage_outcomes(registry, "generate")["ok"] == 1
    (run,) = seen  # before the fix: handed over when answer() returned, with no generate stage and no tokens
    assert run["outcome"] == "ok" and run["answer"] == "600 CNY." and "generate" in run["durations"]
    assert run["usage"] is not None and run["usage"].output_tokens > 0
    assert run["cost"] is not None and run["cost"] > 0
    assert no_internal_errors(registry)


def waiting(registry: CollectorRegistry) -> float | None:
    """``ragwatch_runs_waiting_for_streams`` of the service: ended runs held for a stream."""
    return registry.get_sample_value("ragwatch_runs_waiting_for_streams", {"service": "svc"})


def pipeline_keeping_its_stream(rw: ragwatch.RagWatch, kept: list[Any]) -> Any:
    """A pipeline that reads the first item of its LLM stream, keeps the stream in ``kept`` and returns."""

    @rw.llm(model=MODEL)
    def generate(question: str) -> Iterator[str]:
        yield from DELTAS

    @rw.pipeline
    def answer(question: str) -> str:
        stream = generate(question)
        first = next(stream)
        kept.append(stream)
        return first

    return answer


def test_a_stream_held_past_its_pipeline_hands_the_run_over_when_dropped(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    """The bound of the hold: a stream the host keeps unfinished holds its run only while it is alive;
    collected, it ends as ``cancelled`` (with what it delivered) and the run goes to the listeners."""
    rw = watched
    kept: list[Any] = []
    answer = pipeline_keeping_its_stream(rw, kept)

    assert answer(QUESTION) == "600 "
    assert stage_outcomes(registry, "request")["ok"] == 1
    assert seen == []  # still held: its stream may yet deliver the rest of the answer
    assert waiting(registry) == 1  # and visible as held
    kept.clear()
    gc.collect()
    (run,) = seen
    assert waiting(registry) == 0
    assert "generate" in run["durations"] and run["answer"] == "600 "
    assert stage_outcomes(registry, "generate") == {"ok": 0, "error": 0, "cancelled": 1}
    assert no_internal_errors(registry)


def test_close_hands_over_a_run_still_waiting_for_its_stream(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    """At shutdown a run must not be lost because a stream opened in it is still open: ``close()`` hands it
    to the listeners as it is, and the stream ending afterwards does not hand it over a second time."""
    rw = watched
    kept: list[Any] = []
    answer = pipeline_keeping_its_stream(rw, kept)

    assert answer(QUESTION) == "600 "
    assert seen == [] and waiting(registry) == 1
    rw.close(timeout=1)
    (run,) = seen  # handed over by close(), with what it had: the request, not yet the stream's stage
    assert waiting(registry) == 0
    assert run["outcome"] == "ok" and "generate" not in run["durations"]
    assert list(kept[0]) == ["CNY", "."]  # the host reads the rest after all
    assert len(seen) == 1
    assert stage_outcomes(registry, "generate") == {"ok": 1, "error": 0, "cancelled": 0}
    assert no_internal_errors(registry)


def test_interpreter_exit_hands_over_a_run_still_waiting_for_its_stream(tmp_path: Any) -> None:
    """Without ``close()``: at interpreter exit the waiting run still reaches the listeners (before the
    producer's own exit flush would send it), once."""
    script = tmp_path / "host.py"
    script.write_text(
        textwrap.dedent(
            """
            import ragwatch
            from prometheus_client import CollectorRegistry

            rw = ragwatch.RagWatch("svc", registry=CollectorRegistry(), tracing=False)
            rw.add_listener(lambda run: print("handed", run.outcome, run.answer, flush=True))
            kept = []

            @rw.llm(model="gpt-4o-mini")
            def generate(question):
                yield from ("600 ", "CNY", ".")

            @rw.pipeline
            def answer(question):
                stream = generate(question)
                first = next(stream)
                kept.append(stream)  # still open when the interpreter exits
                return first

            print("answered", answer("How much for hotels?"), flush=True)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["answered 600 ", "handed ok 600 "]


def test_a_run_is_handed_over_once_when_several_streams_end_after_it(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    rw = watched
    kept: list[Any] = []

    @rw.llm(model=MODEL)
    def generate(question: str) -> Iterator[str]:
        yield from DELTAS

    @rw.pipeline
    def answer(question: str) -> str:
        for _ in range(3):
            stream = generate(question)
            next(stream)
            kept.append(stream)
        return "600"

    answer(QUESTION)
    for stream in kept[:2]:
        assert list(stream) == ["CNY", "."]
    assert seen == [] and waiting(registry) == 1  # one run, however many streams hold it
    assert list(kept[2]) == ["CNY", "."]
    (run,) = seen
    assert waiting(registry) == 0
    assert stage_outcomes(registry, "generate") == {"ok": 3, "error": 0, "cancelled": 0}
    assert run["usage"] is not None
    for stream in kept:
        assert list(stream) == []  # exhausted streams ending again hand nothing over
    kept.clear()
    gc.collect()
    assert len(seen) == 1


def test_streams_ending_in_other_threads_as_their_runs_end_hand_each_run_over_once(
    watched: ragwatch.RagWatch, registry: CollectorRegistry, seen: list[dict[str, Any]]
) -> None:
    """A stream drained in another thread (Starlette reads sync generators in a thread pool) races its
    pipeline's return: whichever ends last hands the run over, exactly once, with the stream's stage."""
    rw = watched
    threads: list[threading.Thread] = []

    @rw.llm(model=MODEL)
    def generate(question: str, pause: float) -> Iterator[str]:
        for delta in DELTAS:
            time.sleep(pause)
            yield delta

    @rw.pipeline
    def answer(question: str, pause: float) -> str:
        stream = generate(question, pause)
        next(stream)
        thread = threading.Thread(target=list, args=(stream,))
        thread.start()
        threads.append(thread)
        time.sleep(pause)  # shorter than the rest of the stream; with no pause at all, either may end first
        return "600"

    for i in range(50):
        answer(QUESTION, (0.0, 0.0002, 0.002)[i % 3])
    for thread in threads:
        thread.join()
    assert len(seen) == 50
    assert waiting(registry) == 0  # every run held was handed over, and counted back
    assert all("generate" in run["durations"] and run["answer"] == "600 CNY." for run in seen)
    assert stage_outcomes(registry, "generate") == {"ok": 50, "error": 0, "cancelled": 0}
    assert no_internal_errors(registry)
