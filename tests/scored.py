"""Score records shaped like the worker's, for the report and dashboard tests: ten minutes of traffic on two
routes and two models, a retrieval fault in the middle (CP@3 falls, degraded mode should be replayed), some
hallucinated answers with their claims, and user text carrying XSS payloads."""

from __future__ import annotations

import random
from typing import Any

XSS_QUESTION = "<script>window.__xss='question'</script><img src=x onerror=\"window.__xss='img'\"> refund?"
XSS_ANSWER = "See [the policy](javascript:window.__xss='link') ![t](http://127.0.0.1:9/track.png) now."
XSS_CHUNK = "<svg onload=\"window.__xss='chunk'\">"
XSS_ROUTE = "/ask<script>window.__xss='route'</script>"


def scored_records(start: float = 1_800_000_000.0, n: int = 240, seed: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = start + i * 2.5  # 10 minutes
        fault = n // 3 <= i < 2 * n // 3
        cp3 = rng.uniform(0.0, 0.3) if fault else rng.uniform(0.7, 1.0)
        lie = i % 7 == 3
        answer = "Trips need approval 14 days ahead. Hotels are booked by the portal."
        claims = [
            {
                "text": "Trips need approval 14 days ahead.",
                "start": 0,
                "end": 34,
                "verdict": "UNSUPPORTED" if lie else "SUPPORTED",
                "chunk_id": "travel-07",
                "evidence": "Trips need approval 7 days ahead." if lie else "Trips need approval 14 days ahead.",
                **({"rule": "number_not_in_context"} if lie else {}),
            },
            {
                "text": "Hotels are booked by the portal.",
                "start": 35,
                "end": 67,
                "verdict": "UNVERIFIABLE" if i % 5 == 0 else "SUPPORTED",
                "chunk_id": "travel-08",
                "evidence": "Hotels are booked through the company portal.",
            },
        ]
        faith = 0.5 if lie else 1.0
        diagnosis = "noisy_retrieval" if cp3 < 0.65 else ("hallucination" if lie else "healthy")
        out.append(
            {
                "sample_id": f"s{i:04d}",
                "trace_id": f"{i:032x}",
                "service": "kb-qa",
                "judges": [{"name": "offline", "version": "1"}],
                "scores": {
                    "faithfulness": faith,
                    "hallucination_rate": 1.0 if lie else 0.0,
                    "answer_relevance": rng.uniform(0.8, 1.0),
                    "context_relevance": cp3 * 0.9,
                    "context_precision_3": cp3,
                },
                "details": {
                    "offline": {
                        "claims": claims,
                        "chunks": [
                            {"id": "travel-07", "relevance": cp3, "used": True},
                            {
                                "id": "hr-02" if fault else "travel-08",
                                "relevance": 0.2 if fault else 0.8,
                                "used": False,
                            },
                        ],
                    }
                },
                "timings": {"offline": 0.002},
                "scored_at": t + 0.5,
                "created_at": t,
                "question": "How early must a trip be approved?",
                "answer": answer,
                "chunk_ids": ["travel-07", "travel-08"],
                "model": "gpt-4o-mini" if i % 2 else "qwen-7b",
                "route": "/ask" if i % 3 else "/chat",
                "reason": "rate",
                "diagnosis": diagnosis,
                "tags": {"tenant": "acme" if i % 4 else "globex"},
            }
        )
    # the worst faithfulness sample carries every payload, in every field that reaches the page
    bad = out[n // 2 + 3]
    bad.update(question=XSS_QUESTION, answer=XSS_ANSWER + " " + answer, route=XSS_ROUTE)
    bad["scores"]["faithfulness"] = 0.0
    bad["scores"]["hallucination_rate"] = 1.0  # faithfulness 0: hallucinated; alone on its route, a rate of 1
    bad["details"]["offline"]["claims"][0].update(chunk_id=XSS_CHUNK, evidence=XSS_CHUNK, start=None, end=None)
    bad["details"]["offline"]["chunks"][0]["id"] = XSS_CHUNK
    bad["sample_id"] = "s-<b>bold</b>"
    return out
