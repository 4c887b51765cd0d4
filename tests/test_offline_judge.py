"""The offline judge on hand-made samples: one per rule, the score contract, evidence and determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragwatch.sampling.sample import Sample, SampleChunk
from ragwatch.scoring.judges.base import context_precision, context_precision_ranked
from ragwatch.scoring.judges.claim_features import FAITH_FEATURES, SUPPORTED, UNSUPPORTED, UNVERIFIABLE
from ragwatch.scoring.judges.offline import WEIGHTS_PATH, OfflineJudge, claim_labels
from ragwatch.scoring.judges.unverifiable import is_unverifiable
from ragwatch.scoring.retrieval_metrics import context_precision_ranked as context_precision_rank_aware
from tests.conftest import BRIDGE_ANSWER as TRUE_ANSWER
from tests.conftest import BRIDGE_FACTS as FACTS
from tests.conftest import judge_sample as make


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def claims_of(judge: OfflineJudge, sample: Sample) -> list[dict]:
    return judge.score(sample).details["claims"]


# ------------------------------------------------------------------------------------------- rules

BRIDGE = "The old stone bridge over the river is 120 meters long and was built in 1990."


def test_verbatim_claim_is_supported_with_evidence(judge: OfflineJudge) -> None:
    verdict = judge.score(
        make("How long is the bridge?", "The stone bridge over the river is 120 meters long.", [BRIDGE])
    )
    [claim] = verdict.details["claims"]
    assert claim["verdict"] == SUPPORTED
    assert claim["chunk_id"] == "c1"
    assert claim["evidence"] in BRIDGE
    assert 0.5 < claim["confidence"] <= 1.0
    assert verdict.scores["faithfulness"] == 1.0


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        ("The stone bridge over the river is 150 meters long.", "number_not_in_context"),
        ("The stone bridge over the river is 120 feet long.", "unit_mismatch"),
        ("The stone bridge over the river is not 120 meters long.", "negation_flip"),
    ],
    ids=["number", "unit", "negation"],
)
def test_rules_make_a_claim_unsupported(judge: OfflineJudge, answer: str, rule: str) -> None:
    [claim] = claims_of(judge, make("How long is the bridge?", answer, [BRIDGE]))
    assert claim["verdict"] == UNSUPPORTED
    assert claim["rule"] == rule
    assert 0.0 <= claim["confidence"] <= 1.0


def test_chinese_number_and_negation(judge: OfflineJudge) -> None:
    context = ["该药物于2020年获得监管机构批准，此前完成了两项临床试验。"]
    [ok] = claims_of(judge, make("该药物何时获批？", "该药物于2020年获得监管机构批准。", context))
    assert ok["verdict"] == SUPPORTED
    [wrong_year] = claims_of(judge, make("该药物何时获批？", "该药物于2021年获得监管机构批准。", context))
    assert (wrong_year["verdict"], wrong_year["rule"]) == (UNSUPPORTED, "number_not_in_context")
    [negated] = claims_of(judge, make("该药物获批了吗？", "该药物于2020年没有获得监管机构批准。", context))
    assert (negated["verdict"], negated["rule"]) == (UNSUPPORTED, "negation_flip")


@pytest.mark.parametrize(
    ("context", "answer", "kept"),
    [
        ("该项目预计2025年完工，总投资30亿元。", "该项目2025年完工。", "该项目预计2025年完工。"),
        (
            "The new plant is expected to open in 2026, the company said.",
            "The new plant opens in 2026.",
            "The new plant is expected to open in 2026.",
        ),
        ("武汉人口约1200万，是湖北省的省会。", "武汉人口1200万。", "武汉人口约1200万。"),
        (
            "The survey reached about 3,000 households in the region.",
            "The survey reached 3,000 households in the region.",
            "The survey reached about 3,000 households in the region.",
        ),
    ],
    ids=["预计", "expected", "约", "about"],
)
def test_dropped_hedge_lowers_support(judge: OfflineJudge, context: str, answer: str, kept: str) -> None:
    """A dropped hedge is a feature, not a veto: on the training corpus it fires on supported claims almost
    as often as on unsupported ones (``scripts/train_offline.py`` prints the ratio), so the model weighs it."""
    [dropped] = judge.analyse(make(None, answer, [context]))
    [hedged] = judge.analyse(make(None, kept, [context]))
    hedge = FAITH_FEATURES.index("hedge_drop")
    assert (dropped.features[hedge], hedged.features[hedge]) == (1.0, 0.0)
    assert dropped.p_supported < hedged.p_supported


def test_kept_hedge_is_supported(judge: OfflineJudge) -> None:
    context = ["The new plant is expected to open in 2026, the company said."]
    [claim] = claims_of(judge, make(None, "The new plant is expected to open in 2026.", context))
    assert claim["verdict"] == SUPPORTED


def test_structured_context_value(judge: OfflineJudge) -> None:
    record = '{"name": "Cafe Lumen", "attributes": {"WiFi": "no", "OutdoorSeating": true, "Music": null}}'
    claims = claims_of(judge, make(None, "Cafe Lumen offers outdoor seating. Cafe Lumen offers free WiFi.", [record]))
    assert [c["verdict"] for c in claims] == [SUPPORTED, UNSUPPORTED]
    assert claims[1]["rule"] == "structured_value_conflict"


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        # The hedge rule: no hedge of the context was dropped.
        ('He decided to blog about "100 Days of Rejection" last year.', 'His blog was called "100 Days of Rejection".'),
        ("Bake the crumbs at 300 F until dry, about 6 to 8 minutes.", "Bake the crumbs at 300 F for 6 to 8 minutes."),
        (
            "Wear gloves if you plan to remove the tick with your fingers.",
            "Wear gloves to remove the tick with your fingers.",
        ),
        (
            "The Dragon will deliver more than 4,300 pounds of supplies to the station.",
            "The Dragon will deliver over 4,300 pounds of supplies to the station.",
        ),
        # The negation rule: no negation was flipped.
        (
            "Nonessential amino acids can be made by the body, while essential amino acids cannot be made by the body.",
            "Nonessential amino acids can be made by the body.",
        ),
        (
            "People on the no-fly list will then have the opportunity to dispute their status in writing.",
            "People on the list will then have the opportunity to dispute their status in writing.",
        ),
        (
            "Before the change, citizens got a letter that neither confirmed nor denied their inclusion on the list.",
            "Citizens received a letter that didn't confirm or deny their inclusion on the list.",
        ),
        (
            "The organs of the endocrine system are not physically connected as they are discrete in nature.",
            "The endocrine system consists of discrete organs.",
        ),
    ],
    ids=[
        "hedge:about-is-a-topic",
        "hedge:range",
        "hedge:if-you-plan-to",
        "hedge:over",
        "negation:said-both-ways",
        "negation:no-fly",
        "negation:neither-nor",
        "negation:as-ends-the-scope",
    ],
)
def test_hedge_and_negation_rules_spare_what_is_no_dropped_hedge_or_flip(
    judge: OfflineJudge, context: str, answer: str
) -> None:
    [claim] = claims_of(judge, make(None, answer, [context]))
    assert claim.get("rule") is None


def test_numbers_the_question_gives_or_that_assert_nothing(judge: OfflineJudge) -> None:
    context = ["Report the distributions from Form 1099-PATR on Schedule F."]
    question = "Where does 1099-PATR go on form 1040?"
    [claim] = claims_of(judge, make(question, "Form 1099-PATR goes on Schedule F of Form 1040.", context))
    assert claim.get("rule") is None
    record = '{"name": "Deli", "business_stars": 3.5, "hours": {"Monday": "7:0-17:0", "Sunday": "7:0-17:0"}}'
    [claim] = claims_of(judge, make(None, "The Deli has 3.5 out of 5 stars and is open seven days a week.", [record]))
    assert claim.get("rule") is None


def test_twelve_hour_times_match_a_24_hour_record(judge: OfflineJudge) -> None:
    record = '{"name": "Deli", "hours": {"Monday": "7:0-17:0", "Tuesday": "7:0-17:0"}}'
    [ok] = claims_of(judge, make(None, "The Deli is open from 7 am to 5 pm on Monday.", [record]))
    assert ok.get("rule") is None
    [wrong] = claims_of(judge, make(None, "The Deli is open from 7 am to 6 pm on Monday.", [record]))
    assert wrong["rule"] == "number_not_in_context"


def test_entities_spelled_differently_or_units(judge: OfflineJudge) -> None:
    """Neither "US" for "U.S." nor a unit name is an entity the context lacks (the entity-swap rule)."""
    context = [
        "The U.S. military has carried out airstrikes against ISIS near Ramadi.",
        "In Sausalito, September averages 58 degrees.",
    ]
    for answer in (
        "The US military has carried out airstrikes near Ramadi.",
        "September averages 58 degrees Fahrenheit.",
    ):
        [claim] = claims_of(judge, make(None, answer, context))
        assert claim.get("rule") is None, answer


def test_structured_context_reads_each_key_with_its_own_negation(judge: OfflineJudge) -> None:
    record = (
        '{"name": "Cafe Lumen", "attributes": {"WiFi": "no", "OutdoorSeating": true, "RestaurantsReservations": false,'
        ' "Ambience": {"romantic": null}}}'
    )
    answer = (
        "Cafe Lumen does not take reservations, offers outdoor seating and has no WiFi. "
        "WiFi is not available at Cafe Lumen. "
        "Cafe Lumen has indoor seating. "
        "Whether Cafe Lumen is romantic is unknown. "
        "Cafe Lumen takes reservations."
    )
    claims = claims_of(judge, make(None, answer, [record]))
    assert [c.get("rule") for c in claims] == [None, None, None, None, "structured_value_conflict"]


def test_faithful_to_a_wrong_context_is_faithful(judge: OfflineJudge) -> None:
    """Only the context counts, never world knowledge."""
    context = ["The Eiffel Tower is located in Rome, Italy, and opened in 1925."]
    verdict = judge.score(make("Where is the Eiffel Tower?", "The Eiffel Tower is located in Rome.", context))
    assert verdict.scores["faithfulness"] == 1.0
    verdict = judge.score(make("Where is the Eiffel Tower?", "The Eiffel Tower is located in Paris.", context))
    assert verdict.details["claims"][0]["verdict"] == UNSUPPORTED
    assert verdict.scores["faithfulness"] == 0.0


def test_short_answers_to_a_question(judge: OfflineJudge) -> None:
    context = ["第七届世界军人运动会于2019年10月18日在中国武汉开幕，赛期10天。"]
    question = "2019年军运会在中国哪个城市举办"
    assert claims_of(judge, make(question, "武汉", context))[0]["verdict"] == SUPPORTED
    assert claims_of(judge, make(question, "成都", context))[0]["verdict"] == UNSUPPORTED


# ---------------------------------------------------------------------------------- unverifiable


@pytest.mark.parametrize(
    "answer",
    [
        "根据现有信息无法回答。",
        "无法确定。",
        "The context does not say.",
        "I don't know.",
        "There is no information about it.",
    ],
)
def test_refusals_are_unverifiable(judge: OfflineJudge, answer: str) -> None:
    verdict = judge.score(make("谁赢了比赛？", answer, ["今天的天气很好，适合出门散步。"]))
    assert [c["verdict"] for c in verdict.details["claims"]] == [UNVERIFIABLE]
    assert verdict.scores["faithfulness"] == 1.0
    assert "no verifiable claim" in verdict.details["faithfulness_basis"]
    assert 0.0 < verdict.scores["answer_relevance"] < 0.5  # low-ish, not zero


def test_unverifiable_claims_leave_the_denominator(judge: OfflineJudge) -> None:
    answer = "Here is what the passages say:\nThe stone bridge over the river is 120 meters long. I hope this helps!"
    verdict = judge.score(make("How long is the bridge?", answer, [BRIDGE]))
    assert [c["verdict"] for c in verdict.details["claims"]] == [UNVERIFIABLE, SUPPORTED, UNVERIFIABLE]
    alone = judge.score(
        make("How long is the bridge?", "The stone bridge over the river is 120 meters long.", [BRIDGE])
    )
    assert verdict.scores["faithfulness"] == alone.scores["faithfulness"] == 1.0


def test_is_unverifiable_spares_real_claims() -> None:
    assert not is_unverifiable("The bridge is 120 meters long.")
    assert not is_unverifiable("武汉是湖北省的省会。")
    assert is_unverifiable("文档中没有提及具体日期。")
    # lines announcing what follows, and statements about the passages themselves
    assert is_unverifiable("To make a graph for your research, you can follow these general steps:")
    assert is_unverifiable("None of the passages provide detailed information on the fees.")
    assert is_unverifiable("Passage 3 provides the necessary information to answer the question.")
    assert is_unverifiable("Therefore, without more information, it is impossible to provide an answer.")
    assert not is_unverifiable("The app provides relevant information about trains.")
    assert not is_unverifiable("The service does not provide refunds.")
    assert not is_unverifiable("Passage 1 gives the steps for Windows 7 and the steps for Windows 10 in detail:")


# ---------------------------------------------------------------------------------- faithfulness


def test_faithfulness_is_the_share_of_supported_claims(judge: OfflineJudge) -> None:
    question = "How long is the bridge?"
    verbatim = judge.score(make(question, "The stone bridge over the river is 120 meters long.", [BRIDGE]))
    paraphrase = judge.score(make(question, "The old bridge crossing the river is 120 meters long.", [BRIDGE]))
    assert [c["verdict"] for c in paraphrase.details["claims"]] == [SUPPORTED]
    assert paraphrase.scores["faithfulness"] == verbatim.scores["faithfulness"] == 1.0
    mixed = judge.score(
        make(question, "The stone bridge over the river is 120 meters long. It is 900 meters wide.", [BRIDGE])
    )
    assert [c["verdict"] for c in mixed.details["claims"]] == [SUPPORTED, "UNSUPPORTED"]
    assert mixed.scores["faithfulness"] == 0.5
    # one claim of two unsupported: about a half, never below what an all-unsupported answer gets
    half = judge.score(
        make(question, "The bridge over the river is 120 meters long. It was painted in 2001.", [BRIDGE])
    )
    assert [c["verdict"] for c in half.details["claims"]] == [SUPPORTED, UNSUPPORTED]
    assert half.scores["faithfulness"] == 0.5


# ------------------------------------------------------------------------------------- evidence


def test_evidence_is_a_substring_of_the_named_chunk(judge: OfflineJudge) -> None:
    chunks = [
        "Paris is the capital of France. It has about 2.1 million residents.",
        "The Loire is the longest river in France. It flows for 1,006 kilometres. Its valley has castles.",
        "Lyon is known for its cuisine.",
    ]
    answer = "The Loire is the longest river in France and flows for 1,006 kilometres. Lyon is known for its cuisine."
    verdict = judge.score(make("What is the longest river in France?", answer, chunks))
    by_id = {f"c{i + 1}": text for i, text in enumerate(chunks)}
    for claim in verdict.details["claims"]:
        assert claim["verdict"] == SUPPORTED
        assert claim["evidence"] and claim["evidence"] in by_id[claim["chunk_id"]]
        assert answer[claim["start"] : claim["end"]] == claim["text"]
    assert [c["chunk_id"] for c in verdict.details["claims"]] == ["c2", "c3"]
    used = {c["id"]: c["used"] for c in verdict.details["chunks"]}
    assert used == {"c1": False, "c2": True, "c3": True}


# ------------------------------------------------------------------------------ context precision


def test_context_scores_follow_chunk_relevance(judge: OfflineJudge) -> None:
    relevant = "The Great Wall of China is about 21,196 kilometres long, according to a 2012 survey."
    off_topic = "Bananas are rich in potassium and are eaten all over the world."
    question = "How long is the Great Wall of China?"
    verdict = judge.score(make(question, None, [off_topic, relevant, off_topic]))
    rels = [c["relevance"] for c in verdict.details["chunks"]]
    # calibrated probabilities: an English question's best chunk reads ~0.47 (WikiQA's base rate, README)
    assert rels[1] > 0.3 and rels[1] > 100 * max(rels[0], rels[2])
    assert verdict.scores[context_precision(3)] == pytest.approx(sum(rels) / 3, abs=1e-3)
    assert verdict.scores["context_relevance"] == pytest.approx(sum(rels) / 3, abs=1e-3)
    # rank-aware form with a hit threshold under the best chunk: one hit at rank 2, then at rank 1
    threshold = rels[1] - 0.01
    assert context_precision_rank_aware(rels, 3, threshold) == pytest.approx(0.5)
    ranked_first = judge.score(make(question, None, [relevant, off_topic, off_topic]))
    first = [c["relevance"] for c in ranked_first.details["chunks"]]
    assert context_precision_rank_aware(first, 3, threshold) == pytest.approx(1.0)
    assert ranked_first.scores[context_precision_ranked(3)] == pytest.approx(context_precision_rank_aware(first, 3))


def test_chunks_are_read_in_rank_order(judge: OfflineJudge) -> None:
    sample = make("How long is the Great Wall?", None, [])
    sample.chunks = [
        SampleChunk(id="late", rank=1, text="Bananas are rich in potassium."),
        SampleChunk(id="first", rank=0, text="The Great Wall is about 21,196 kilometres long."),
    ]
    verdict = judge.score(sample)
    assert [c["id"] for c in verdict.details["chunks"]] == ["first", "late"]
    assert verdict.scores[context_precision_ranked(3)] == pytest.approx(1.0)


def test_k_is_configurable() -> None:
    verdict = OfflineJudge(k=5).score(make("q", None, ["a chunk of text"]))
    assert set(verdict.scores) == {"context_relevance", "context_precision_5", "context_precision_ranked_5"}
    with pytest.raises(ValueError):
        OfflineJudge(k=0)


# ------------------------------------------------------------------------------------- edge cases


def test_no_answer_has_no_faithfulness(judge: OfflineJudge) -> None:
    verdict = judge.score(make("How long is the bridge?", None, [BRIDGE]))
    assert "faithfulness" not in verdict.scores
    assert "answer_relevance" not in verdict.scores
    assert set(verdict.scores) == {"context_relevance", "context_precision_3", "context_precision_ranked_3"}
    assert "no answer" in verdict.details["faithfulness_basis"]


def test_no_chunks(judge: OfflineJudge) -> None:
    answer = "The bridge is 120 meters long. I don't know when it was built."
    verdict = judge.score(make("How long is the bridge?", answer, []))
    assert verdict.scores["context_relevance"] == 0.0
    assert verdict.scores["context_precision_3"] == 0.0
    assert verdict.scores["context_precision_ranked_3"] == 0.0
    assert [c["verdict"] for c in verdict.details["claims"]] == [UNSUPPORTED, UNVERIFIABLE]
    assert verdict.scores["faithfulness"] == 0.0
    assert verdict.details["chunks"] == []


def test_chunks_without_text_count_as_irrelevant(judge: OfflineJudge) -> None:
    sample = make("How long is the bridge?", "The bridge is 120 meters long.", [])
    sample.chunks = [SampleChunk(id="hashed", rank=0, text=None, text_sha256="ab" * 32)]
    verdict = judge.score(sample)
    assert verdict.details["chunks"] == [{"id": "hashed", "relevance": 0.0, "used": False}]
    assert verdict.scores["context_relevance"] == 0.0
    assert verdict.details["claims"][0]["verdict"] == UNSUPPORTED


def test_scores_are_in_range_and_deterministic(judge: OfflineJudge) -> None:
    sample = make(
        "How long is the bridge and when was it built?",
        "The stone bridge is 120 meters long. It was built in 1990; it carries trains.",
        [BRIDGE, "Trains cross the river further north."],
    )
    first = judge.score(sample)
    assert first == judge.score(sample) == OfflineJudge().score(sample)
    assert all(0.0 <= v <= 1.0 for v in first.scores.values())
    json.dumps(first.details)  # details are plain JSON


def test_version_tracks_the_weights(tmp_path: Path) -> None:
    assert OfflineJudge.name == "offline"
    base = OfflineJudge()
    weights = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
    weights["faithfulness"]["intercept"] += 1.0
    changed = tmp_path / "weights.json"
    changed.write_text(json.dumps(weights), encoding="utf-8")
    assert OfflineJudge(weights_path=changed).version != base.version
    assert OfflineJudge().version == base.version


def test_claim_labels_from_spans() -> None:
    from ragwatch.scoring.judges.claims import split_claims

    answer = "One fact here. A made-up fact there. Another fact."
    claims = split_claims(answer)
    start = answer.index("made-up")
    assert claim_labels(claims, [[start, start + 7]]) == [False, True, False]
    assert claim_labels(claims, []) == [False, False, False]


def test_verdicts_do_not_depend_on_the_hash_seed() -> None:
    """Token sets iterate in a hash-seeded order; the judge's sums must not, or workers would disagree."""
    code = (
        "import json\n"
        "from ragwatch.scoring.judges.offline import OfflineJudge\n"
        "from ragwatch.sampling.sample import Sample, SampleChunk\n"
        "chunks = ['The old stone bridge over the river is 120 meters long and was built in 1990.',"
        " 'Trains cross the river further north, about 3 km away.', '武汉人口约1200万，是湖北省的省会。']\n"
        "s = Sample(sample_id='x', service='t', question='How long is the bridge?', created_at=0.0,"
        " answer='The bridge is 120 meters long; trains cross 3 km north. 武汉人口1200万。',"
        " chunks=[SampleChunk(id=f'c{i}', rank=i, text=t) for i, t in enumerate(chunks)])\n"
        "v = OfflineJudge().score(s); print(json.dumps([v.scores, v.details], sort_keys=True))"
    )
    root = Path(__file__).resolve().parent.parent
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


# --------------------------------------------------------------------------- fully_supported


def test_fully_supported_ranks_answers_that_faithfulness_ties(judge: OfflineJudge) -> None:
    """Both answers are judged fully faithful (1.0), but one rests on a verbatim quote and the other on a
    loose paraphrase: only ``fully_supported`` (the claims' P(supported) multiplied) tells them apart."""
    context = [BRIDGE + " It carries two lanes of traffic and a footpath on its eastern side."]
    exact = judge.score(
        make("How long is the bridge?", "The old stone bridge over the river is 120 meters long.", context)
    )
    loose = judge.score(
        make(
            "How long is the bridge?",
            "The river crossing, built from stone, spans 120 meters and has a footpath.",
            context,
        )
    )
    assert exact.scores["faithfulness"] == loose.scores["faithfulness"] == 1.0
    assert 0.0 < loose.scores["fully_supported"] < exact.scores["fully_supported"] <= 1.0


def test_fully_supported_is_the_product_over_verifiable_claims(judge: OfflineJudge) -> None:
    verdict = judge.score(
        make(
            "How long is the bridge?",
            "The stone bridge is 120 meters long. It was built in 1990. I hope this helps!",
            [BRIDGE],
        )
    )
    claims = verdict.details["claims"]
    assert any(c["verdict"] == UNVERIFIABLE for c in claims)  # the courtesy line leaves the product
    product = 1.0
    for c in claims:
        if c["verdict"] != UNVERIFIABLE:
            product *= c["p_supported"]
    assert verdict.scores["fully_supported"] == pytest.approx(product, abs=1e-3)
    vetoed = judge.score(make("How long is the bridge?", "The stone bridge is 150 meters long.", [BRIDGE]))
    assert vetoed.scores["fully_supported"] <= 0.25  # a veto caps the claim's P, so the answer ranks low
    refusal = judge.score(make("How long is the bridge?", "I don't know.", [BRIDGE]))
    assert refusal.scores["fully_supported"] == 1.0  # nothing checkable was said


# -------------------------------------------------------------------------------- chunk-analysis cache


def test_chunk_cache_is_keyed_by_text_not_id_and_bounded() -> None:
    """A chunk id reused for new text (an index rebuilt, ids by position) must not be judged on the old text."""
    cached = OfflineJudge(chunk_cache_size=2)
    old = make("How long is the bridge?", "The bridge is 120 meters long.", [BRIDGE])
    new = make("How long is the bridge?", "The bridge is 120 meters long.", [BRIDGE.replace("120", "80")])
    assert cached.score(old).scores["faithfulness"] == 1.0
    again = cached.score(new)  # same id "c1", same answer: only the text differs
    assert again.scores == OfflineJudge(chunk_cache_size=0).score(new).scores
    assert again.details["claims"][0]["verdict"] == UNSUPPORTED
    for i in range(5):
        cached.score(make("q?", "a.", [f"Chunk number {i} says something else."]))
    assert len(cached._chunks) == 2


def test_chunk_cache_changes_no_verdict() -> None:
    """Warm (chunks read before, under other questions) and cold judges give the same record."""
    texts = [BRIDGE, "The river is 40 km long. The bridge was repaired in 2005.", "Tickets cost 5 euros."]
    samples = [
        make("How long is the bridge?", "The bridge is 120 meters long and was repaired in 2005.", texts),
        make("When was it built?", "It was built in 1990, probably.", texts[::-1]),
        make("What do tickets cost?", "Tickets cost 7 euros.", texts[1:]),
    ]
    warm, cold = OfflineJudge(), OfflineJudge(chunk_cache_size=0)
    for s in samples:
        warm.score(make("another question?", None, [c.text or "" for c in s.chunks]))
    hits = warm._chunks.hits
    assert [warm.score(s).details for s in samples] == [cold.score(s).details for s in samples]
    assert warm._chunks.hits - hits >= 8  # every chunk of the three samples came from the cache
    assert len(cold._chunks) == 0


def test_chunk_cache_size_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragwatch.scoring.judges import make_judges
    from ragwatch.settings import Settings

    monkeypatch.setenv("RAGWATCH_OFFLINE_CACHE_SIZE", "3")
    (made,) = make_judges(["offline"], Settings())
    assert made._chunks.maxsize == 3
    (off,) = make_judges(["offline"], Settings(offline_cache_size=0))
    off.score(make("How long is the bridge?", "The bridge is 120 meters long.", [BRIDGE]))
    assert len(off._chunks) == 0
    with pytest.raises(ValueError):
        Settings(offline_cache_size=-1)


# ------------------------------------------------------------------------------- hallucination rate


@pytest.mark.parametrize("invented", [None, ("1990", "1994"), ("18,000", "25,000"), ("120 meters", "150 meters")])
def test_one_invented_number_among_true_claims_flags_the_answer(
    judge: OfflineJudge, invented: tuple[str, str] | None
) -> None:
    """faithfulness barely moves (4 of 5 claims supported), hallucination_rate says "this answer invented
    something": 1.0 for the answer, so its window is the share of such answers."""
    answer = TRUE_ANSWER if invented is None else TRUE_ANSWER.replace(*invented)
    verdict = judge.score(make("Tell me about the bridge over the Ems.", answer, FACTS))
    verdicts = [c["verdict"] for c in verdict.details["claims"]]
    assert len(verdicts) == 5 and verdicts.count(UNSUPPORTED) == (0 if invented is None else 1)
    assert verdict.scores["faithfulness"] == (1.0 if invented is None else 0.8)
    assert verdict.scores["hallucination_rate"] == (0.0 if invented is None else 1.0)


def test_hallucination_rate_is_there_exactly_when_faithfulness_is(judge: OfflineJudge) -> None:
    refusal = judge.score(make("谁赢了比赛？", "根据现有信息无法回答。", ["今天的天气很好。"]))
    assert refusal.scores["faithfulness"] == 1.0 and refusal.scores["hallucination_rate"] == 0.0
    for answer in (None, "", "   "):
        verdict = judge.score(make("How long is the bridge?", answer, [BRIDGE]))
        assert "faithfulness" not in verdict.scores and "hallucination_rate" not in verdict.scores
    nothing_retrieved = judge.score(make("How long is the bridge?", "The bridge is 120 meters long.", []))
    assert nothing_retrieved.scores["hallucination_rate"] == 1.0


# ------------------------------------------------------------------------------- evidence that supports

_KB = {c.id: c.text for c in __import__("ragwatch.demo.kb", fromlist=["CHUNKS"]).CHUNKS}
SOFTWARE_Q = "How do I install software that is not in the software portal?"
SOFTWARE_CLAIM = "Software may only be installed from the company software portal."


def _demo_sample(question: str, answer: str, chunk_ids: list[str]) -> Sample:
    chunks = [SampleChunk(id=cid, rank=i, text=_KB[cid]) for i, cid in enumerate(chunk_ids)]
    return Sample("demo", "demo", question, answer, chunks, 0.0)


def test_software_portal_is_not_supported_by_the_hotel_sentence(judge: OfflineJudge) -> None:
    """Issue 27's card: under the demo's retrieval fault two travel chunks rank first and the right chunk
    third; the claim adds only "company" to the question, which the hotel sentence also holds."""
    assert "Hotels are booked through the company travel platform." in _KB["travel-en-01"]
    answer = (
        SOFTWARE_CLAIM + " Requests for other software go to the IT helpdesk and are answered within 2 working days."
    )
    claims = claims_of(judge, _demo_sample(SOFTWARE_Q, answer, ["travel-en-07", "travel-en-01", "it-en-08"]))
    software = claims[0]
    assert software["text"] == SOFTWARE_CLAIM and software["verdict"] == SUPPORTED
    assert software["chunk_id"] == "it-en-08"
    assert software["evidence"] == SOFTWARE_CLAIM
    assert "Hotels" not in software["evidence"]


def test_every_supported_quote_shares_the_claims_words_in_the_demo(judge: OfflineJudge) -> None:
    """Each demo question against healthy and faulty retrievals: a SUPPORTED claim's quote shares a content
    word with it, is a verbatim part of the chunk it names, and is the sentence the claim was copied from."""
    from ragwatch.demo.kb import QUESTIONS
    from ragwatch.demo.service import DemoService
    from ragwatch.scoring.evidence_check import quote_shares_content

    service = DemoService(rw=None, hallucination_rate=0.0, seed=3)  # type: ignore[arg-type]  # rw unused here
    checked = 0
    for fault in (False, True):
        service.fault = fault
        for q in QUESTIONS:
            chunks = service.retrieve(q.text)
            answer, _ = service.generate(q.text, chunks)
            sample = _demo_sample(q.text, answer, [c["id"] for c in chunks])
            for claim in claims_of(judge, sample):
                if claim["verdict"] == SUPPORTED:
                    checked += 1
                    assert quote_shares_content(claim["text"], claim["evidence"]), claim
                    assert claim["evidence"] in _KB[claim["chunk_id"]]
                    # the extractive "LLM" copies sentences: the quote is the sentence the claim came from
                    assert claim["text"] in claim["evidence"], claim
    assert checked >= len(QUESTIONS)


def test_a_claim_pieced_from_two_chunks_has_no_single_quote(judge: OfflineJudge) -> None:
    """No chunk alone supports it: UNVERIFIABLE with the reason, never a quote that shows half of it."""
    a = "The old stone bridge over the river was designed by Maria Keller, a Swiss engineer."
    b = "The harbour crane near the station was rebuilt in 2004 after a storm damaged its tower."
    answer = "The old stone bridge was designed by Maria Keller and rebuilt in 2004 after a storm."
    [claim] = claims_of(judge, make("Tell me about the bridge.", answer, [a, b]))
    # (the bridge's designer is in the first chunk, "rebuilt in 2004 after a storm" is the crane's, in the second)
    assert claim["verdict"] == UNVERIFIABLE
    assert claim["rule"] == "no_single_chunk" and claim["evidence"] is None and claim["chunk_id"] is None


def test_a_claim_with_nothing_to_quote_is_not_supported(judge: OfflineJudge) -> None:
    """A restated question the context never mentions is UNSUPPORTED; a bare citation is UNVERIFIABLE."""
    context = ["Saint Motel is an American indie pop band from Los Angeles formed in 2007."]
    [claim] = claims_of(
        judge, make("Who completed more books, Anne Frank or John Toole?", "Anne Frank completed more books.", context)
    )
    assert claim["verdict"] == UNSUPPORTED and claim["rule"] == "nothing_in_context"
    claims = claims_of(
        judge, make("Which band is from Los Angeles?", "Saint Motel is from Los Angeles. (Passage 1)", context)
    )
    assert [c["verdict"] for c in claims] == [SUPPORTED, UNVERIFIABLE]
