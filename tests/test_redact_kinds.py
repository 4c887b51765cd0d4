"""The redaction kinds that still leaked in issue 29 (item 7), the model id, and the content-off switch.

One row per kind found reaching Redis, spans and pages: after the redactor the secret is gone and the
placeholder names its kind. Look-alikes that must stay (times, versions, code, ordinary prose) keep the
patterns honest. The content-off test reads the sample back from a real redis-server.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

import ragwatch
from ragwatch.queue.keys import Keys
from ragwatch.sampling.redact import Redactor
from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.content import without_text
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.worker import Scoring

#: (text, the secret in it, the placeholder it becomes)
LEAKS = [
    ("bot token xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx here", "xoxb-", "[api_key]"),
    ("user token xoxp-1234567890-1234567890-1234567890-abcdef0123456789abcdef here", "xoxp-", "[api_key]"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "github_pat_", "[api_key]"),
    ("stripe key sk_live_4eC39HqLyjWDarjtT1zdp7dc in the config", "sk_live_", "[api_key]"),
    ("key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY;", "AIza", "[api_key]"),
    ("gitlab glpat-Ab12Cd34Ef56Gh78Ij90 works", "glpat-", "[api_key]"),
    ("Authorization: Bearer abcDEF123456ghiJKL789.xyz", "abcDEF123456", "Bearer [api_key]"),
    ("护照号码：E12345678，请核对", "E12345678", "护照号码：[passport]"),
    ("My passport number is 123456789.", "123456789", "passport number is [passport]"),
    ("passport no. EA1234567 expires", "EA1234567", "[passport]"),
    ("HKID A123456(3) on file", "A123456", "[hk_id]"),
    ("身分證 A123456789 已驗證", "A123456789", "[tw_id]"),
    ("from 2001:db8:85a3::8a2e:370:7334 at noon", "2001:db8", "[ipv6]"),
    ("loopback ::1 and fe80::1.", "fe80", "[ipv6] and [ipv6]."),
    ("iban de89 3704 0044 0532 0130 00 ok", "3704 0044", "iban [iban] ok"),
    ("Call +44 (0)20 7946 0958 today", "7946", "Call [phone] today"),
    ("Ruf 0049 30 1234567 an", "1234567", "Ruf [phone] an"),
    ("Ring 020 7946 0958 or 07700 900123", "7946", "Ring [phone] or [phone]"),
    ("Appelez le 01 23 45 67 89", "45 67", "le [phone]"),
    ("NI number AB 12 34 56 C", "34 56", "[uk_nino]"),
    ("NIR 1 85 05 78 006 084 91 enregistré", "006 084", "[fr_nir]"),
    # fifteen digits in one run that are a first-generation PRC id and happen to pass the NIR key: cn_id's
    ("身份证 208575130816418 ", "208575130816418", "身份证 [cn_id] "),
    ("北京办公室电话010-62345678找我", "62345678", "电话[phone]找我"),
    ("请发邮件到zhang@例子.中国谢谢", "例子", "到[email]谢谢"),
    ("fyi my password is hunter2.", "hunter2", "my password is [password]."),
    ("我的密码是abc123。", "abc123", "密码是[password]"),
]

#: Look-alikes that are no personal data: unchanged.
KEPT = [
    "The meeting is at 12:30:45, see std::vector and version 2.4.1.",
    "Order 123456 shipped on 2024-03-18 for 1,250.00 EUR.",
    "The password is required and case-sensitive.",
    "A passport is needed for travel abroad.",
    "Bearer bonds were common in the 1920s.",
    "Ab12 cdef ghij klmn opqr stuv is a made-up code.",
    "Plan B123456 covers 2 adults.",
    "Chapter 10 2024 report, table 01 23.",
]


@pytest.mark.parametrize(("text", "secret", "placeholder"), LEAKS, ids=[row[2] for row in LEAKS])
def test_each_leaking_kind_is_masked(text: str, secret: str, placeholder: str) -> None:
    out = Redactor()(text)
    assert secret not in out
    assert placeholder in out


@pytest.mark.parametrize("text", KEPT)
def test_look_alikes_are_kept(text: str) -> None:
    assert Redactor()(text) == text


def test_new_kinds_are_counted_and_can_be_switched_off() -> None:
    redact = Redactor()
    redact("HKID A123456(3), passport E12345678, ::1")
    counts = redact.counts()
    assert (counts["hk_id"], counts["passport"], counts["ipv6"]) == (1, 1, 1)
    assert Redactor(("email",))("HKID A123456(3)") == "HKID A123456(3)"


# -- the model id ---------------------------------------------------------------------------------------------


def test_a_model_id_is_redacted_before_it_becomes_a_label_or_a_sample_field(registry: CollectorRegistry) -> None:
    rw = ragwatch.RagWatch("svc", registry=registry, tracing=False)
    runs: list[ragwatch.Run] = []
    rw.add_listener(runs.append)
    leaky = "ft:gpt-4o-mini:alice.smith@example.com::abc123"

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return [{"id": "d1", "text": "Hotels are capped at 600 CNY."}]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str) -> dict[str, Any]:
        return {
            "model": leaky,
            "choices": [{"message": {"content": "600 CNY."}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }

    @rw.pipeline
    def answer(question: str) -> str:
        retrieve(question)
        return generate(question)["choices"][0]["message"]["content"]

    answer("How much for hotels?")
    page = generate_latest(registry).decode()
    assert "alice.smith@example.com" not in page and 'model="ft:gpt-4o-mini:[email]::abc123"' in page
    assert runs[0].model == "ft:gpt-4o-mini:[email]::abc123"
    rw.close()


# -- content off ----------------------------------------------------------------------------------------------

QUESTION = "What is the hotel cap for Zhang Wei in Shenzhen?"
CHUNK = "Travel policy: hotels in Shenzhen are capped at 600 CNY per night."
ANSWER = "Zhang Wei may spend up to 600 CNY per night in Shenzhen."


def test_content_off_leaves_no_text_in_a_redis_sample(
    redis_url: str, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragwatch"):
        rw = ragwatch.RagWatch(
            "kb", registry=registry, redis_url=redis_url, tracing=False, content_off=True, sample_rate=1.0
        )
    # the service judges its samples before they leave (tests/test_content_off_fleet.py): nothing to warn of
    assert not any("content_off" in r.getMessage() for r in caplog.records)

    @rw.retriever
    def retrieve(question: str) -> list[dict[str, Any]]:
        return [{"id": "zhang.wei@corp.example/policy.md", "text": CHUNK, "metadata": {"owner": "Zhang Wei"}}]

    @rw.llm(model="gpt-4o-mini")
    def generate(question: str) -> dict[str, Any]:
        return {"choices": [{"message": {"content": ANSWER}}], "usage": {"prompt_tokens": 9, "completion_tokens": 9}}

    @rw.pipeline
    def answer(question: str) -> str:
        ragwatch.force_sample("Zhang Wei asked")  # a tag: text too
        retrieve(question)
        return generate(question)["choices"][0]["message"]["content"]

    answer(QUESTION)
    assert rw.flush(10)
    client = redis.Redis.from_url(redis_url)
    entries = client.xrange(Keys("kb").samples)
    assert len(entries) == 1
    raw = b"".join(v for _, fields in entries for v in fields.values()).decode()
    for text in ("Zhang", "Shenzhen", "hotel", "600 CNY", "corp.example", 'sha256": "'):
        assert text not in raw, text
    assert '"input_tokens":9' in raw and '"cost_usd":' in raw and '"retrieve":' in raw  # latency and cost stay
    rw.close()


def test_content_off_score_records_keep_the_scores_and_drop_every_quote() -> None:
    sample = Sample(
        sample_id="s",
        service="kb",
        question=QUESTION,
        answer=ANSWER,
        chunks=[SampleChunk(id="zhang.wei@corp.example/policy.md", rank=1, text=CHUNK)],
        created_at=0.0,
        tags={"asked_by": "Zhang Wei"},
    )
    record = Scoring.score(_scoring(), sample)
    bare = without_text(record)
    assert bare.scores == record.scores and bare.scores  # the scores stay
    flat = repr(bare)
    for text in ("Zhang", "Shenzhen", "600 CNY", "corp.example"):
        assert text in repr(record) and text not in flat, text
    assert bare.details["offline"]["claims"][0]["verdict"] in ("SUPPORTED", "UNSUPPORTED")


def _scoring() -> Scoring:
    from ragwatch.queue.factory import open_queue

    return Scoring(open_queue("memory://content-off", "kb"), [OfflineJudge()])
