"""The LLM judge against a real OpenAI-compatible HTTP server (tests/openai_stub.py): scoring maths,
defences against a hallucinating judge, retries, timeouts, caching, concurrency and secrecy of the key."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ragwatch.capture.pricing import Price
from ragwatch.capture.run import suppressed
from ragwatch.errors import ConfigError, RagwatchError
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.llm import JudgeError, LLMJudge
from ragwatch.scoring.judges.llm_output import _context_precision, _context_precision_ranked
from ragwatch.scoring.judges.llm_prompts import PROMPT_VERSION, SYSTEM_PROMPT
from tests.openai_stub import OpenAIStub, chat_reply, raw_reply, status_reply

KEY = "sk-test-SECRET-0123456789abcdef"
MODEL = "judge-model-2024-01-01"

CHUNKS = [
    ("c1", "The Eiffel Tower is 330 metres tall and was completed in 1889."),
    ("c2", "Gustave Eiffel's company designed and built the tower for the 1889 World's Fair."),
    ("c3", "Paris has a population of about 2.1 million."),
]
QUESTION = "How tall is the Eiffel Tower and when was it completed?"
ANSWER = "The Eiffel Tower is 330 metres tall. It was completed in 1889. I could not find its weight."


def make_sample(
    question: str | None = QUESTION,
    answer: str | None = ANSWER,
    chunks: list[tuple[str, str]] | None = None,
) -> Sample:
    return Sample(
        sample_id=uuid.uuid4().hex,
        service="svc",
        question=question,
        answer=answer,
        chunks=[
            SampleChunk(id=cid, rank=i, text=text) for i, (cid, text) in enumerate(CHUNKS if chunks is None else chunks)
        ],
        created_at=time.time(),
    )


def claim(text: str, verdict: str, chunk_id: str | None = None, quote: str | None = None) -> dict[str, Any]:
    return {"text": text, "verdict": verdict, "chunk_id": chunk_id, "quote": quote}


def output(
    claims: list[dict[str, Any]],
    relevances: dict[str, Any] | None = None,
    answer_relevance: Any = 0.9,
) -> dict[str, Any]:
    relevances = {"c1": 1.0, "c2": 0.6, "c3": 0.0} if relevances is None else relevances
    return {
        "claims": claims,
        "chunks": [{"id": cid, "relevance": r} for cid, r in relevances.items()],
        "answer_relevance": answer_relevance,
    }


TALL = claim("The Eiffel Tower is 330 metres tall.", "SUPPORTED", "c1", "is 330 metres tall")
DONE = claim("It was completed in 1889.", "SUPPORTED", "c1", "was completed in 1889")
WEIGHT = claim("I could not find its weight.", "UNVERIFIABLE")


@pytest.fixture
def make_judge(stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., LLMJudge]]:
    for name in ("RAGWATCH_JUDGE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    judges: list[LLMJudge] = []

    def make(**kwargs: Any) -> LLMJudge:
        kwargs.setdefault("api_key", KEY)
        kwargs.setdefault("backoff_base", 0.01)
        kwargs.setdefault("timeout", 5.0)
        judge = LLMJudge(kwargs.pop("base_url", stub.url), kwargs.pop("model", MODEL), **kwargs)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        judge.close()


# ----------------------------------------------------------------------------------------- scoring


def test_healthy_verdict_scores_and_request_shape(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(chat_reply(output([TALL, DONE, WEIGHT]), input_tokens=1200, output_tokens=150))
    judge = make_judge()
    verdict = judge.score(make_sample())

    assert verdict.scores == pytest.approx(
        {
            "faithfulness": 1.0,  # 2 supported / (3 claims - 1 unverifiable)
            "hallucination_rate": 0.0,  # no verifiable claim unsupported
            "context_relevance": 1.6 / 3,
            "context_precision_3": 1.6 / 3,
            "context_precision_ranked_3": 1.0,  # relevant chunks (1.0, 0.6) ranked first and second
            "answer_relevance": 0.9,
        }
    )
    details = verdict.details
    assert details["model"] == MODEL
    assert details["prompt_version"] == PROMPT_VERSION
    assert [c["verdict"] for c in details["claims"]] == ["SUPPORTED", "SUPPORTED", "UNVERIFIABLE"]
    assert details["claims"][0] == TALL
    assert details["chunks"] == [
        {"id": "c1", "relevance": 1.0},
        {"id": "c2", "relevance": 0.6},
        {"id": "c3", "relevance": 0.0},
    ]
    assert details["usage"] == {"input_tokens": 1200, "output_tokens": 150}
    assert details["cost_usd"] is None  # no price given
    assert details["cached"] is False
    assert "faithfulness_basis" not in details
    assert judge.name == "llm"
    assert PROMPT_VERSION in judge.version and MODEL in judge.version

    (request,) = stub.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.body
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == SYSTEM_PROMPT
    user = body["messages"][1]["content"]
    assert QUESTION in user and ANSWER in user
    for n, (cid, text) in enumerate(CHUNKS, start=1):
        assert f'<chunk n="{n}" id="{cid}">{text}</chunk>' in user


def test_unsupported_claim_lowers_faithfulness(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    wrong = claim("It was built by Le Corbusier.", "UNSUPPORTED")
    stub.script(chat_reply(output([TALL, DONE, wrong, WEIGHT])))
    verdict = make_judge().score(make_sample())
    assert verdict.scores["faithfulness"] == pytest.approx(2 / 3)
    assert verdict.scores["hallucination_rate"] == 1.0  # one invented claim among true ones flags the answer
    assert verdict.details["claim_counts"] == {"supported": 2, "unsupported": 1, "unverifiable": 1, "downgraded": 0}


def test_supported_claim_with_invented_quote_is_downgraded(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge]
) -> None:
    invented = claim("It is 300 metres tall.", "SUPPORTED", "c1", "is 300 metres tall")
    no_quote = claim("It was completed in 1889.", "SUPPORTED", "c1", None)
    stub.script(chat_reply(output([invented, no_quote, DONE])))
    verdict = make_judge().score(make_sample())
    first, second, third = verdict.details["claims"]
    assert first["verdict"] == "UNSUPPORTED"
    assert first["downgraded"] == "quote not found in context"
    assert second["verdict"] == "UNSUPPORTED"
    assert second["downgraded"] == "no quote given"
    assert third["verdict"] == "SUPPORTED" and "downgraded" not in third
    assert verdict.scores["faithfulness"] == pytest.approx(1 / 3)
    assert verdict.scores["hallucination_rate"] == 1.0  # the judge's own invented quote does not clear it
    assert verdict.details["claim_counts"]["downgraded"] == 2


def test_quote_in_another_chunk_fixes_the_chunk_id(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    # Named the wrong chunk, and copied with different case and whitespace: still grounded.
    fair = claim("It was built for the World's Fair.", "SUPPORTED", "c1", "FOR THE  1889\n world's fair")
    stub.script(chat_reply(output([fair])))
    verdict = make_judge().score(make_sample())
    (checked,) = verdict.details["claims"]
    assert checked["verdict"] == "SUPPORTED"
    assert checked["chunk_id"] == "c2"
    assert checked["chunk_id_given"] == "c1"
    assert verdict.scores["faithfulness"] == 1.0


def test_unknown_verdict_counts_as_unsupported(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    hedged = claim("It was completed in 1889.", "PARTIALLY_SUPPORTED", "c1", "completed in 1889")
    lower = claim("The Eiffel Tower is 330 metres tall.", "supported", "c1", "is 330 metres tall")
    stub.script(chat_reply(output([hedged, lower])))
    verdict = make_judge().score(make_sample())
    first, second = verdict.details["claims"]
    assert first["verdict"] == "UNSUPPORTED"
    assert "unknown verdict" in first["downgraded"]
    assert second["verdict"] == "SUPPORTED"  # case is not a new verdict
    assert verdict.scores["faithfulness"] == pytest.approx(0.5)
    assert verdict.scores["hallucination_rate"] == 1.0


@pytest.mark.parametrize("claims", [[], [WEIGHT]], ids=["no-claims", "only-unverifiable"])
def test_no_verifiable_claims_is_faithful(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], claims: list[dict[str, Any]]
) -> None:
    stub.script(chat_reply(output(claims, answer_relevance=0.0)))
    verdict = make_judge().score(make_sample(answer="根据现有信息无法回答。"))
    assert verdict.scores["faithfulness"] == 1.0
    assert verdict.scores["hallucination_rate"] == 0.0  # a refusal invents nothing
    assert verdict.details["faithfulness_basis"] == "no verifiable claims"
    assert verdict.scores["answer_relevance"] == 0.0


def test_relevance_is_clamped_and_missing_chunks_score_zero(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge]
) -> None:
    stub.script(chat_reply(output([TALL], {"c1": 1.7, "c2": "-0.3", "zzz": 0.8}, answer_relevance=2)))
    verdict = make_judge().score(make_sample())
    rows = verdict.details["chunks"]
    assert rows == [
        {"id": "c1", "relevance": 1.0, "clamped_from": 1.7},
        {"id": "c2", "relevance": 0.0, "clamped_from": -0.3},
        {"id": "c3", "relevance": 0.0, "missing": True},
    ]
    assert verdict.details["missing_chunk_ids"] == ["c3"]
    assert verdict.details["unknown_chunk_ids"] == ["zzz"]
    assert verdict.scores["context_relevance"] == pytest.approx(1 / 3)
    assert verdict.scores["answer_relevance"] == 1.0
    assert all(0.0 <= v <= 1.0 for v in verdict.scores.values())


def test_context_precision_forms(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    # Relevant chunks ranked 2nd and 3rd: the mean form ignores order, the ranked form does not.
    stub.script(chat_reply(output([TALL], {"c1": 0.2, "c2": 0.9, "c3": 0.7})))
    scores = make_judge().score(make_sample()).scores
    assert scores["context_precision_3"] == pytest.approx(1.8 / 3)
    assert scores["context_precision_ranked_3"] == pytest.approx((1 / 2 + 2 / 3) / 2)

    # Fewer chunks than k: the missing ones count 0 in the mean form.
    stub.script(chat_reply(output([TALL], {"c1": 0.8})))
    scores = make_judge(k=2).score(make_sample(chunks=CHUNKS[:1])).scores
    assert scores["context_precision_2"] == pytest.approx(0.4)
    assert scores["context_precision_ranked_2"] == 1.0


def test_context_precision_helpers() -> None:
    assert _context_precision([1.0, 0.5, 0.0, 1.0], 3) == pytest.approx(0.5)
    assert _context_precision([], 3) == 0.0
    assert _context_precision_ranked([0.0, 1.0, 0.0, 1.0], 4) == pytest.approx((1 / 2 + 2 / 4) / 2)
    assert _context_precision_ranked([0.4, 0.49], 2) == 0.0
    assert _context_precision_ranked([0.5], 1) == 1.0


def test_no_chunks_retrieved(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(chat_reply(output([claim("Paris is in France.", "UNSUPPORTED")], {})))
    verdict = make_judge().score(make_sample(chunks=[]))
    assert verdict.scores["context_relevance"] == 0.0
    assert verdict.scores["context_precision_3"] == 0.0
    assert verdict.scores["context_precision_ranked_3"] == 0.0
    assert verdict.scores["faithfulness"] == 0.0
    assert verdict.details["context_basis"] == "no chunks retrieved"


def test_sample_without_text_is_skipped_without_a_request(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge]
) -> None:
    verdict = make_judge().score(make_sample(question=None, answer=None))
    assert verdict.scores == {}
    assert "skipped" in verdict.details
    assert stub.requests == []


def test_chinese_sample(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    chunks = [
        ("kb-12", "该药物成人每日剂量为5毫克，不适用于12岁以下儿童。\n服用后可能出现头晕。"),
        ("kb-3", "本店营业时间为每天9点至21点。"),
    ]
    answer = "成人每日剂量为 5 毫克。12岁以下儿童也可以使用。"
    stub.script(
        chat_reply(
            output(
                [
                    # the model spaced the number and used a half-width comma: same text
                    claim("成人每日剂量为5毫克", "SUPPORTED", "kb-12", "成人每日剂量为 5 毫克,不适用于"),
                    claim("12岁以下儿童也可以使用", "UNSUPPORTED", "kb-12", "不适用于12岁以下儿童"),
                ],
                {"kb-12": 1, "kb-3": 0},
                answer_relevance=1,
            )
        )
    )
    verdict = make_judge().score(make_sample("这个药每天吃多少？儿童能用吗？", answer, chunks))
    assert [c["verdict"] for c in verdict.details["claims"]] == ["SUPPORTED", "UNSUPPORTED"]
    assert verdict.scores["faithfulness"] == pytest.approx(0.5)
    assert verdict.scores["context_relevance"] == pytest.approx(0.5)
    assert verdict.scores["context_precision_ranked_3"] == 1.0
    user = stub.requests[0].body["messages"][1]["content"]
    assert "不适用于12岁以下儿童" in user and answer in user


def test_code_fenced_json_is_accepted(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    import orjson

    stub.script(chat_reply("```json\n" + orjson.dumps(output([TALL])).decode() + "\n```"))
    assert make_judge().score(make_sample()).scores["faithfulness"] == 1.0
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    "fence",
    [
        "```JSON\r\n{}\u00a0\n```  ",  # another tag case, CRLF, a no-break space before the fence
        "```{}```",  # no tag, no newlines
        "\n  ```json {} ```\n",  # the whole reply fenced, blanks around
    ],
)
def test_fence_forms(stub: OpenAIStub, make_judge: Callable[..., LLMJudge], fence: str) -> None:
    import orjson

    stub.script(chat_reply(fence.replace("{}", orjson.dumps(output([TALL])).decode())))
    assert make_judge().score(make_sample()).scores["faithfulness"] == 1.0


def test_a_reply_of_looping_whitespace_is_malformed_not_a_stall(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge]
) -> None:
    # a model that loops on blanks until max_tokens: once a minute of regex backtracking per 5,000 spaces
    # after the opening fence; now read once, and retried as any malformed reply
    looping = "```json\n" + " " * 200_000
    stub.script(chat_reply(looping), chat_reply("```json\n{" + "\t" * 50_000))
    judge = make_judge()
    with pytest.raises(JudgeError, match="message content is not JSON"):
        judge.score(make_sample())
    assert len(stub.requests) == 2


# --------------------------------------------------------------------------------- HTTP failures


def test_rate_limit_then_success(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(status_reply(429, headers={"Retry-After": "0"}), chat_reply(output([TALL])))
    judge = make_judge()
    assert judge.score(make_sample()).scores["faithfulness"] == 1.0
    assert len(stub.requests) == 2
    assert judge.usage_totals["requests"] == 2


def test_retry_after_is_capped(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(status_reply(429, headers={"Retry-After": "120"}), chat_reply(output([TALL])))
    started = time.monotonic()
    make_judge(backoff_cap=0.05).score(make_sample())
    assert time.monotonic() - started < 2.0
    assert len(stub.requests) == 2


def test_server_errors_exhaust_retries(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(*[status_reply(500)] * 3)
    judge = make_judge(max_retries=2)
    with pytest.raises(JudgeError, match="HTTP 500") as info:
        judge.score(make_sample())
    assert "3 attempts" in str(info.value)
    assert isinstance(info.value, RagwatchError)
    assert len(stub.requests) == 3
    assert judge.usage_totals["failures"] == 1


def test_client_error_is_not_retried(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    # Some servers echo the credentials they rejected; the error must not carry them on.
    stub.script(status_reply(400, message=f"Incorrect API key provided: {KEY}"))
    with pytest.raises(JudgeError, match="HTTP 400") as info:
        make_judge().score(make_sample())
    assert len(stub.requests) == 1
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert "Incorrect API key provided: ***" in str(info.value)


def test_timeouts_are_retried_then_raise(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(*[chat_reply(output([TALL]), delay=3.0)] * 2)
    judge = make_judge(timeout=0.2, max_retries=1)
    started = time.monotonic()
    with pytest.raises(JudgeError, match="timed out"):
        judge.score(make_sample())
    assert time.monotonic() - started < 2.0
    assert len(stub.requests) == 2


def test_non_json_body_once_then_success(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(raw_reply(b"<html>502 Bad Gateway</html>"), chat_reply(output([TALL]), input_tokens=7, output_tokens=3))
    verdict = make_judge().score(make_sample())
    assert verdict.scores["faithfulness"] == 1.0
    assert verdict.details["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert len(stub.requests) == 2
    assert stub.requests[0].body == stub.requests[1].body  # the same request, resent


def test_content_not_json_twice_raises(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(chat_reply("Sure! Here is the evaluation:"), chat_reply("{not json"))
    judge = make_judge()
    with pytest.raises(JudgeError, match="message content is not JSON"):
        judge.score(make_sample())
    assert len(stub.requests) == 2
    assert judge.usage_totals["input_tokens"] == 200  # both malformed answers were still paid for


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"chunks": [], "answer_relevance": 1}, "'claims'"),
        ({"claims": [{"text": "x"}], "chunks": [], "answer_relevance": 1}, "claims[0]"),
        ({"claims": [], "answer_relevance": 1}, "'chunks'"),
        ({"claims": [], "chunks": [{"id": "c1", "relevance": "high"}], "answer_relevance": 1}, "chunks[0]"),
        ({"claims": [], "chunks": []}, "'answer_relevance'"),
        ([1, 2], "not an object"),
    ],
)
def test_missing_fields_twice_raise_naming_the_field(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], content: Any, problem: str
) -> None:
    stub.script(chat_reply(content), chat_reply(content))
    with pytest.raises(JudgeError) as info:
        make_judge().score(make_sample())
    assert problem in str(info.value)
    assert len(stub.requests) == 2


def test_response_without_choices_then_success(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(raw_reply(b'{"object": "error"}', content_type="application/json"), chat_reply(output([TALL])))
    assert make_judge().score(make_sample()).scores["faithfulness"] == 1.0
    assert len(stub.requests) == 2


# ------------------------------------------------------------------------------- cache, concurrency


def test_identical_sample_is_served_from_cache(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(chat_reply(output([TALL])), chat_reply(output([DONE])))
    judge = make_judge(price=(1.0, 2.0))
    first = judge.score(make_sample())
    second = judge.score(make_sample())  # a new sample id, same content
    assert len(stub.requests) == 1
    assert second.scores == first.scores
    assert second.details["cached"] is True
    assert second.details["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert second.details["cost_usd"] == 0.0
    assert second.details["claims"] == first.details["claims"]
    assert judge.usage_totals["cache_hits"] == 1

    judge.score(make_sample(answer="It was completed in 1889."))  # different input: asks again
    assert len(stub.requests) == 2


def test_cache_can_be_disabled(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(chat_reply(output([TALL])), chat_reply(output([TALL])))
    judge = make_judge(cache_size=0)
    judge.score(make_sample())
    assert judge.score(make_sample()).details["cached"] is False
    assert len(stub.requests) == 2


def test_cache_evicts_least_recently_used(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.default = chat_reply(output([TALL]))
    judge = make_judge(cache_size=2)
    a, b, c = (make_sample(answer=f"answer {n}") for n in "abc")
    judge.score(a)
    judge.score(b)
    judge.score(a)  # hit: a is now the most recent
    judge.score(c)  # evicts b
    assert len(stub.requests) == 3
    assert judge.score(a).details["cached"] is True
    assert judge.score(b).details["cached"] is False
    assert len(stub.requests) == 4


def test_concurrency_is_bounded(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.default = chat_reply(output([TALL]), delay=0.15)
    judge = make_judge(max_concurrency=2)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            judge.score(make_sample(answer=f"answer {n}"))
        except BaseException as exc:  # surfaced below; a thread must not swallow a failure silently
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert len(stub.requests) == 6
    assert stub.max_in_flight == 2


def test_requests_run_with_capture_suppressed(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.script(chat_reply(output([TALL])))
    judge = make_judge()
    seen: list[bool] = []
    real_post = judge._client.post

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(suppressed())
        return real_post(*args, **kwargs)

    monkeypatch.setattr(judge._client, "post", spy)
    judge.score(make_sample())
    assert seen == [True]
    assert not suppressed()


# --------------------------------------------------------------------------------- usage and cost


def test_usage_and_cost_accounting(stub: OpenAIStub, make_judge: Callable[..., LLMJudge]) -> None:
    stub.script(
        chat_reply("oops", input_tokens=10, output_tokens=5),  # malformed, but billed
        chat_reply(output([TALL]), input_tokens=1000, output_tokens=200),
        chat_reply(output([DONE]), input_tokens=500, output_tokens=100),
        chat_reply(output([DONE]), input_tokens=None),  # a server that reports no usage
    )
    judge = make_judge(price=Price(input=2.0, output=8.0))
    first = judge.score(make_sample())
    assert first.details["usage"] == {"input_tokens": 1010, "output_tokens": 205}
    assert first.details["cost_usd"] == pytest.approx((1010 * 2 + 205 * 8) / 1e6)
    second = judge.score(make_sample(answer="It was completed in 1889."))
    assert second.details["cost_usd"] == pytest.approx((500 * 2 + 100 * 8) / 1e6)
    third = judge.score(make_sample(answer="Completed in 1889."))
    assert third.details["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert third.details["usage_reported"] is False

    totals = judge.usage_totals
    assert totals["requests"] == 4
    assert totals["input_tokens"] == 1510
    assert totals["output_tokens"] == 305
    assert totals["cost_usd"] == pytest.approx((1510 * 2 + 305 * 8) / 1e6)
    totals["input_tokens"] = 0  # a snapshot, not the live counters
    assert judge.usage_totals["input_tokens"] == 1510


def test_price_forms(make_judge: Callable[..., LLMJudge]) -> None:
    assert make_judge(price={"input": 1, "output": 3}).price == Price(input=1, output=3)
    assert make_judge(price=[0.5, 1.5]).price == Price(input=0.5, output=1.5)


# ------------------------------------------------------------------------------------- the api key


def test_api_key_hidden_from_repr_errors_and_logs(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stub.script(
        status_reply(503, message=f"upstream rejected key {KEY}"),
        chat_reply("not json"),
        chat_reply(output([TALL])),
        status_reply(401, message=f"Incorrect API key provided: {KEY}"),
    )
    judge = make_judge()
    assert KEY not in repr(judge) and "api_key='***'" in repr(judge)
    judge.score(make_sample())
    with pytest.raises(JudgeError) as info:
        judge.score(make_sample(answer="Another answer."))
    assert KEY not in str(info.value)
    assert KEY not in caplog.text
    assert "retry" in caplog.text  # the retries were logged, just without the key


def test_api_key_from_environment(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.default = chat_reply(output([TALL]))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    make_judge(api_key=None).score(make_sample(answer="one"))
    monkeypatch.setenv("RAGWATCH_JUDGE_API_KEY", "sk-ragwatch")
    make_judge(api_key=None).score(make_sample(answer="two"))
    make_judge(api_key="").score(make_sample(answer="three"))  # explicitly none: nothing is sent
    auth = [r.headers.get("authorization") for r in stub.requests]
    assert auth == [None, "Bearer sk-ragwatch", None]  # an OpenAI key never goes to another host
    assert repr(make_judge(api_key="")).count("api_key=None") == 1


# --------------------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "127.0.0.1:8000/v1"},
        {"model": ""},
        {"model": None},
        {"api_key": 123},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_base": -0.1},
        {"max_concurrency": 0},
        {"max_concurrency": True},
        {"cache_size": -1},
        {"k": 0},
        {"price": (1.0,)},
        {"price": (-1.0, 1.0)},
        {"price": {"input": 1.0}},
        {"price": "cheap"},
    ],
)
def test_bad_arguments_raise_config_error(make_judge: Callable[..., LLMJudge], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        make_judge(**kwargs)


def test_close_and_context_manager(stub: OpenAIStub) -> None:
    with LLMJudge(stub.url, MODEL, api_key="") as judge:
        assert judge.base_url == stub.url
    assert judge._client.is_closed


@pytest.mark.parametrize(("answer", "basis"), [("", "empty answer"), (None, "no answer")])
def test_missing_or_empty_answer_has_no_faithfulness(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge], answer: str | None, basis: str
) -> None:
    stub.script(chat_reply(output([], answer_relevance=0.7)))
    verdict = make_judge().score(make_sample(answer=answer))
    assert "faithfulness" not in verdict.scores and "hallucination_rate" not in verdict.scores
    assert verdict.details["faithfulness_basis"].startswith(basis)
    assert verdict.scores["context_relevance"] == pytest.approx(1.6 / 3)  # retrieval is still judged
    if answer is None:
        assert "answer_relevance" not in verdict.scores
        assert "(not recorded)" in stub.requests[0].body["messages"][1]["content"]
    else:
        assert verdict.scores["answer_relevance"] == 0.0


def test_an_escalated_cascade_takes_both_faithfulness_scores_from_the_llm(
    stub: OpenAIStub, make_judge: Callable[..., LLMJudge]
) -> None:
    """The cascade merges the LLM's scores over the offline judge's: the LLM must give hallucination_rate
    with its faithfulness, or the window would mix one judge's faithfulness with the other's rate."""
    from ragwatch.scoring.judges.cascade import CascadeJudge
    from ragwatch.scoring.judges.offline import OfflineJudge

    invented = "The Eiffel Tower is 330 metres tall. It was completed in 1901. It weighs 7,300 tonnes."
    sample = make_sample(answer=invented)
    offline = OfflineJudge().score(sample).scores
    assert offline["hallucination_rate"] == 1.0 and 0.3 <= offline["faithfulness"] <= 0.8  # escalated
    stub.script(chat_reply(output([TALL, DONE])))  # the LLM finds every claim supported
    verdict = CascadeJudge(OfflineJudge(), make_judge()).score(sample)
    assert verdict.details["decided_by"] == "llm"
    assert verdict.scores["faithfulness"] == 1.0 and verdict.scores["hallucination_rate"] == 0.0
