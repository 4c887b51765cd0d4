"""The offline judge's learned claim model: its new alignment features, its vetoes, the claim-count prior,
the weight file's provenance and the numpy trees (inference and the deterministic fit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ragwatch.scoring.judges.claim_features import FAITH_FEATURES, SUPPORTED, UNSUPPORTED, VETO_CAP
from ragwatch.scoring.judges.offline import WEIGHTS_PATH, OfflineJudge
from ragwatch.scoring.judges.trees import TreeEnsemble
from tests.conftest import judge_sample as make

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "scripts"))
import trainkit  # noqa: E402


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


def features(judge: OfflineJudge, answer: str, context: list[str], question: str | None = None) -> dict[str, float]:
    [a] = judge.analyse(make(question, answer, context))
    return dict(zip(FAITH_FEATURES, a.features, strict=True))


# --------------------------------------------------------------------------------------- features

BRIDGE = "The old stone bridge over the river is 120 meters long and was built in 1990."


def test_local_phrase_support(judge: OfflineJudge) -> None:
    """``phrase_sent``: the claim's word pairs in its best sentence, not scattered over the context."""
    local = features(judge, "The stone bridge over the river is 120 meters long.", [BRIDGE])
    context = ["The river is long. A bridge of stone stands there.", "Over 120 meters of it is old."]
    scattered = features(judge, "The stone bridge over the river is 120 meters long.", context)
    assert local["phrase_sent"] > 0.6 > scattered["phrase_sent"]


def test_share_of_the_sentence_used(judge: OfflineJudge) -> None:
    """``sent_prec``: how much of its best sentence the claim uses (a summary picks a little of each)."""
    whole = features(judge, BRIDGE, [BRIDGE])
    part = features(judge, "The bridge was built in 1990.", [BRIDGE])
    assert whole["sent_prec"] == pytest.approx(1.0)
    assert part["sent_prec"] < 0.6


def test_missing_weight_and_number_absent(judge: OfflineJudge) -> None:
    ok = features(judge, "The stone bridge is 120 meters long.", [BRIDGE])
    bad = features(judge, "The stone bridge is 150 meters long and painted bright purple.", [BRIDGE])
    assert ok["miss_weight"] == 0.0 < bad["miss_weight"]
    assert (ok["num_absent"], bad["num_absent"]) == (0.0, 1.0)


def test_negation_parity_with_the_aligned_sentence(judge: OfflineJudge) -> None:
    """``neg_parity``: a negation count whose parity differs from the best sentence's — softer than the
    negation-flip rule, which needs a near-twin sentence."""
    assert features(judge, "The stone bridge is not long.", [BRIDGE])["neg_parity"] == 1.0
    assert features(judge, "The stone bridge is long.", [BRIDGE])["neg_parity"] == 0.0


def test_numbers_and_names_in_the_aligned_sentence(judge: OfflineJudge) -> None:
    """``num_local`` / ``ent_local``: a number or name found elsewhere in the context is weaker support than
    one in the sentence the claim aligns with."""
    context = [
        "The old stone bridge over the river was designed by the city engineers.",
        "Unrelated: Lyon opened a museum in 1990.",
    ]
    moved = features(judge, "The old stone bridge over the river was designed in 1990 in Lyon.", context)
    assert moved["num_local"] == 0.0 and moved["ent_local"] == 0.0
    here = features(judge, "Lyon opened a museum in 1990.", context)
    assert here["num_local"] == 1.0 and here["ent_local"] == 1.0


def test_entity_swap_is_a_feature(judge: OfflineJudge) -> None:
    context = ["The Eiffel Tower is located in Rome, Italy, and opened in 1925."]
    assert features(judge, "The Eiffel Tower is located in Paris.", context)["entity_swap"] == 1.0
    assert features(judge, "The Eiffel Tower is located in Rome.", context)["entity_swap"] == 0.0


# ----------------------------------------------------------------------------------------- vetoes


def test_nothing_in_context_is_a_veto(judge: OfflineJudge) -> None:
    """A claim none of whose own words (beyond the question's) occur in the context cannot be supported by
    it, in any language; the old judge had no such rule and scored a bare wrong name by its priors."""
    context = ["第七届世界军人运动会于2019年10月18日在中国武汉开幕，赛期10天。"]
    [claim] = judge.score(make("2019年军运会在中国哪个城市举办", "成都", context)).details["claims"]
    assert (claim["verdict"], claim.get("rule")) == (UNSUPPORTED, "nothing_in_context")
    [claim] = judge.score(make("Which city hosted the games?", "Chengdu hosted them.", [BRIDGE])).details["claims"]
    assert claim.get("rule") == "nothing_in_context"


def test_vetoes_come_from_the_weight_file(tmp_path: Path) -> None:
    """Which rules decide a verdict is data, recorded with the weights; a rule that is no veto still reaches
    the model as a feature."""
    weights = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))
    weights["faithfulness"]["vetoes"] = []
    path = tmp_path / "w.json"
    path.write_text(json.dumps(weights), encoding="utf-8")
    sample = make("How long is the bridge?", "The stone bridge over the river is 150 meters long.", [BRIDGE])
    [vetoed] = OfflineJudge().score(sample).details["claims"]
    [free] = OfflineJudge(weights_path=path).score(sample).details["claims"]
    assert vetoed["rule"] == "number_not_in_context"
    assert "rule" not in free
    # the veto caps what the model says (here the model already reads the invented number as unlikely)
    assert vetoed["p_supported"] == min(free["p_supported"], VETO_CAP)


# ------------------------------------------------------------------------------- the model's output


def test_p_supported_is_in_the_claim_details(judge: OfflineJudge) -> None:
    """Other tiers (the semantic cascade) read each claim's P(supported); refusals have none."""
    answer = "The stone bridge over the river is 120 meters long. I don't know who built it."
    claims = judge.score(make("How long is the bridge?", answer, [BRIDGE])).details["claims"]
    assert 0.5 < claims[0]["p_supported"] <= 1.0 and claims[0]["verdict"] == SUPPORTED
    assert "p_supported" not in claims[1]


def test_claim_count_prior(judge: OfflineJudge) -> None:
    """In an answer of n claims each claim's odds of support are multiplied by n (``prior_spread``): an
    answer's chance of holding an invented claim is spread over its claims."""
    claim = "The bridge was painted in a soft grey colour by volunteers."
    context = [BRIDGE + " Volunteers later painted it."]
    [alone] = judge.analyse(make(None, claim, context))
    others = " The stone bridge is 120 meters long. It was built in 1990. The bridge is old."
    crowd = judge.analyse(make(None, claim + others, context))
    assert crowd[0].claim.text == claim
    odds = crowd[0].p_supported / (1 - crowd[0].p_supported) / (alone.p_supported / (1 - alone.p_supported))
    assert odds == pytest.approx(4.0**judge._model.prior_spread, rel=1e-6)
    assert judge._model.prior_spread == 1.0


# ------------------------------------------------------------------------------------ weight file


def test_weight_file_provenance() -> None:
    """Fitted on training files only (no non-commercial or unlicensed set), threshold set on dev files only."""
    note = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))["note"]
    fitted, threshold = note["fitted_on"], note["threshold_set_on"]
    assert fitted and all(f.startswith("train/faithfulness/") for f in fitted)
    banned = ("factscore", "ocnli", "anli", "qags", "cnli")
    assert not [f for f in fitted if Path(f).stem in banned]
    assert set(threshold) == {"faithfulness/ragtruth_dev.jsonl", "faithfulness/rgb_zh_en_dev.jsonl"}
    assert not set(fitted) & set(threshold)


def test_shipped_model_is_small_and_all_trees() -> None:
    assert WEIGHTS_PATH.stat().st_size < 5_000_000
    faith = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))["faithfulness"]
    assert faith["features"] == list(FAITH_FEATURES)
    assert len(faith["trees"]["leaf"]) >= 50


# ------------------------------------------------------------------------------------------- trees


def _reference_margin(model: TreeEnsemble, row: np.ndarray) -> float:
    total = model.base
    for t in range(model.feature.shape[0]):
        node = 0
        for _ in range(model.depth):
            node = 2 * node + 1 + int(row[model.feature[t, node]] > model.threshold[t, node])
        total += model.leaf[t, node - (2**model.depth - 1)]
    return total


def test_tree_inference_matches_a_plain_traversal() -> None:
    faith = json.loads(WEIGHTS_PATH.read_text(encoding="utf-8"))["faithfulness"]
    model = TreeEnsemble(faith["trees"], len(FAITH_FEATURES))
    rows = np.random.default_rng(3).random((9, len(FAITH_FEATURES)))
    assert model.margin(rows) == pytest.approx([_reference_margin(model, r) for r in rows])
    assert model.margin(np.zeros((0, len(FAITH_FEATURES)))).shape == (0,)


def test_gbt_fit_is_deterministic_monotone_and_matches_inference() -> None:
    rng = np.random.default_rng(7)
    x = rng.random((600, 4))
    y = ((x[:, 0] + 0.6 * x[:, 1] * x[:, 2] + 0.3 * rng.standard_normal(600)) > 0.8).astype(float)
    w = np.ones(600)
    spec = trainkit.fit_gbt(x, y, w, n_trees=30, depth=3, signs=[1, 0, 0, -1], min_hess=2.0)
    again = trainkit.fit_gbt(x, y, w, n_trees=30, depth=3, signs=[1, 0, 0, -1], min_hess=2.0)
    assert json.dumps(spec) == json.dumps(again)
    model = TreeEnsemble(spec, 4)
    p = model.predict(x)
    assert ((p > 0.5) == (y == 1)).mean() > 0.75  # it learned something
    grid = np.repeat(x[:40], 11, axis=0)
    grid[:, 0] = np.tile(np.linspace(0, 1, 11), 40)
    assert (np.diff(model.margin(grid).reshape(40, 11), axis=1) >= -1e-12).all()  # monotone up in x0
    grid[:, 0] = x[:40].repeat(11, axis=0)[:, 0]
    grid[:, 3] = np.tile(np.linspace(0, 1, 11), 40)
    assert (np.diff(model.margin(grid).reshape(40, 11), axis=1) <= 1e-12).all()  # monotone down in x3


@pytest.mark.skipif(not (DATA / "train" / "faithfulness" / "wice.jsonl").exists(), reason="shared data absent")
def test_export_rebuilds_byte_for_byte_on_a_corpus_slice(judge: OfflineJudge) -> None:
    """The weight file's recipe on a small deterministic slice of the corpus: features, fit, JSON — twice."""
    from ragwatch.scoring.evaluate import row_to_sample

    rows = trainkit.read_jsonl(DATA / "train" / "faithfulness" / "factcheck_gpt.jsonl")[:120]
    feats, labels = [], []
    for row in rows:
        for a in judge.analyse(row_to_sample(row)):
            if not a.unverifiable:
                feats.append(a.features)
                labels.append(0.0 if row["label_hallucinated"] else 1.0)
    x, y = np.array(feats), np.array(labels)
    texts = [
        json.dumps(trainkit.fit_gbt(x, y, np.ones(len(y)), n_trees=20, depth=3, min_hess=2.0), separators=(",", ":"))
        for _ in range(2)
    ]
    assert texts[0] == texts[1]
    model = TreeEnsemble(json.loads(texts[0]), len(FAITH_FEATURES))
    assert np.isfinite(model.margin(x)).all()
