"""``ragwatch eval-judge``: measure a judge on labelled JSONL data, so accuracy claims come from a command.

Two kinds of file are recognised by their fields (see the data README of the project):

* **faithfulness** rows (``question, contexts, answer, label_hallucinated, task_type, language``): each row
  becomes a :class:`~ragwatch.sampling.sample.Sample` (chunks ``c1``..``cn`` from ``contexts``), the judge scores it,
  and the response is flagged *hallucinated* when any claim is UNSUPPORTED — with the judge's shipped
  defaults, never tuned per file. Reported: precision, recall and F1 of "contains a hallucination" and the
  ROC-AUC of the judge's hallucination score, overall, per ``task_type`` and per ``language``: ``1 −
  fully_supported`` for the judges that give it (offline, semantic, embedding: the claims' P(supported)
  multiplied), else ``1 − faithfulness``, whose few distinct values tie most answers.
* **relevance** rows (``question, passage, relevant, question_id, language``): passages are grouped by
  question, scored with the judge's graded relevance, ranked; reported: MAP and MRR (over questions with at
  least one relevant passage) and the ROC-AUC of the relevance scores, overall and per language; with
  ``--calibration`` also the expected calibration error (10 bins) and a reliability table, because a
  relevance is averaged into Context Precision@K and compared with an SLA, so it must read as a probability.

The judge is built from the settings (environment, ``--config-file``, ``--judge-base-url``/``--judge-model``)
exactly as a worker builds it, so an LLM judge or the cascade is measured on the same files.

Labels are read only to score the judge, never shown to it. A malformed line stops the run with its line
number (exit 2), not a traceback. The metric helpers are pure functions, tested on hand-computed cases.

This module holds the evaluation and the command; reading and checking the files is
:mod:`~ragwatch.scoring.eval_data`, printing the figures :mod:`~ragwatch.scoring.eval_judge_tables`, and what
``eval-alerts`` shares with it on the command line :mod:`~ragwatch.scoring.eval_console` (their names are
re-exported here, where scripts and tests have always found them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.errors import ConfigError
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.base_rate import relevance_offset, threshold_table
from ragwatch.scoring.eval_console import (
    Progress,
    add_settings_options,
    make_judge,
    noop,
    print_tables,
    progress_bar,
)
from ragwatch.scoring.eval_data import (
    EvalInputError,
    check_faithfulness_row,
    check_relevance_row,
    claims_of,
    detect_kind,
    load_checked,
    load_rows,
    neutral_order_key,
    row_to_sample,
)
from ragwatch.scoring.eval_judge_tables import judge_tables, render_plain
from ragwatch.scoring.evidence_check import EvidenceTally
from ragwatch.scoring.judge_metrics import (
    bootstrap_interval,
    expected_calibration_error,
    precision_recall_f1,
    reliability_table,
    roc_auc,
)
from ragwatch.scoring.judges.base import FAITHFULNESS, FULLY_SUPPORTED
from ragwatch.scoring.judges.relevance import is_cjk_question
from ragwatch.scoring.retrieval_metrics import average_precision_from_labels

__all__ = [
    "EvalInputError",
    "calibration_summary",
    "detect_kind",
    "evaluate_faithfulness",
    "evaluate_relevance",
    "expected_calibration_error",
    "hallucination_score",
    "load_rows",
    "main",
    "neutral_order_key",
    "precision_recall_f1",
    "reliability_table",
    "render_plain",
    "roc_auc",
    "row_to_sample",
]

# -------------------------------------------------------------------------------------- evaluation


def _summary(labels: list[bool], predictions: list[bool], scores: list[float]) -> dict[str, Any]:
    precision, recall, f1 = precision_recall_f1(labels, predictions)
    auc = roc_auc(labels, scores)
    return {
        "n": len(labels),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "auc": None if auc is None else round(auc, 4),
    }


def hallucination_score(scores: dict[str, float]) -> float:
    """What AUC ranks responses by: ``1 − fully_supported`` where the judge gives it, else ``1 − faithfulness``."""
    return 1.0 - float(scores.get(FULLY_SUPPORTED, scores.get(FAITHFULNESS, 1.0)))


#: The setting that holds each judge's claim threshold, for ``--thresholds``.
THRESHOLD_SETTINGS = {
    "offline": "offline_threshold",
    "semantic": "semantic_threshold",
    "embedding": "semantic_threshold",
}


def _claim_odds(judge: Any, sample: Sample) -> list[tuple[float, bool]]:
    """(P(supported), flagged whatever the threshold) of each verifiable claim, unrounded (a score record
    rounds P to four decimals, which could move a claim across a threshold of the table).

    The offline judge: a claim a hard rule vetoes is flagged at every threshold. The semantic tier's
    threshold decides only the claims its cross-encoder re-scored; the others keep their lexical verdict,
    so they read as always flagged (P 0) or never (P 1).
    """
    if not (sample.answer or "").strip():
        return []
    if hasattr(judge, "claim_scores"):  # the semantic tier and the embedding judge built on it
        return [
            (p, False) if p is not None else (0.0, True) if unsupported else (1.0, False)
            for p, unsupported in judge.claim_scores(sample)
        ]
    # A claim settling its quote made UNVERIFIABLE (only words about the passages, or pieced from several
    # chunks) was verifiable before: under a threshold it is flagged like any other. One whose words the
    # context never mentions is flagged at every threshold (supported, settling makes it UNSUPPORTED).
    return [
        (a.p_supported, a.settle == "nothing" or (a.rule is not None and a.settle != "pieced"))
        for a in judge.analyse(sample)
        if not a.unverifiable or a.settle in ("meta", "pieced")
    ]


def _faithfulness_ci(labels: list[bool], predictions: list[bool], scores: list[float], idx: list[int]) -> dict:
    """Bootstrap intervals of F1 and AUC over the answers ``idx``."""
    y, p, s = np.asarray(labels)[idx], np.asarray(predictions)[idx], np.asarray(scores)[idx]

    def f1(draw: np.ndarray) -> float:
        return precision_recall_f1(y[draw].tolist(), p[draw].tolist())[2]

    return {
        "f1": bootstrap_interval(len(idx), f1),
        "auc": bootstrap_interval(len(idx), lambda draw: roc_auc(y[draw], s[draw])),
    }


def evaluate_faithfulness(
    rows: Sequence[dict[str, Any]],
    judge: Any,
    progress: Progress = noop,
    thresholds: bool = False,
    ci: bool = False,
    min_precision: float | None = None,
) -> dict[str, Any]:
    """Score every row; summarise "contains a hallucination" overall, by task type and by language.

    ``thresholds`` (a judge with a claim threshold: offline, semantic, embedding) adds ``"thresholds"``, the
    same F1 at every other claim threshold (:func:`~ragwatch.scoring.base_rate.threshold_table`), with
    ``min_precision`` also the threshold of the most recall at that precision; ``ci``
    adds ``"ci"``, 95 % bootstrap intervals of F1 and AUC over the answers, for the same groups. ``"evidence"``
    counts the SUPPORTED claims whose quote shares no content word with the claim
    (:class:`~ragwatch.scoring.evidence_check.EvidenceTally`; the target is none)."""
    labels: list[bool] = []
    predictions: list[bool] = []
    scores: list[float] = []
    odds: list[list[tuple[float, bool]]] = []
    groups: dict[str, dict[str, list[int]]] = {"by_task_type": defaultdict(list), "by_language": defaultdict(list)}
    evidence = EvidenceTally()  # do SUPPORTED claims' quotes share a content word with the claim?
    for i, row in enumerate(rows):
        check_faithfulness_row(row)
        sample = row_to_sample(row, i)
        verdict = judge.score(sample)
        claims = claims_of(verdict.details)
        evidence.add(claims)
        flagged = any(c.get("verdict") == "UNSUPPORTED" for c in claims)
        if thresholds:
            odds.append(_claim_odds(judge, sample))
        labels.append(bool(row["label_hallucinated"]))
        predictions.append(flagged)
        scores.append(hallucination_score(verdict.scores))
        groups["by_task_type"][str(row["task_type"])].append(i)
        groups["by_language"][str(row["language"])].append(i)
        progress(1)
    result: dict[str, Any] = {"overall": _summary(labels, predictions, scores)}
    for key, by in groups.items():
        result[key] = {
            name: _summary([labels[i] for i in idx], [predictions[i] for i in idx], [scores[i] for i in idx])
            for name, idx in sorted(by.items())
        }
    if thresholds:
        result["thresholds"] = threshold_table(labels, odds, float(judge.threshold), min_precision)
        result["thresholds"]["setting"] = THRESHOLD_SETTINGS.get(str(judge.name), "threshold")
    if ci:
        everything = list(range(len(labels)))
        result["ci"] = {"level": 0.95, "resamples": 1000, "unit": "answer"}
        result["ci"]["overall"] = _faithfulness_ci(labels, predictions, scores, everything)
        for key, by in groups.items():
            result["ci"][key] = {
                name: _faithfulness_ci(labels, predictions, scores, idx) for name, idx in sorted(by.items())
            }
    result["evidence"] = evidence.summary()
    return result


def _ap_rr(labels: list[bool]) -> tuple[float, float] | None:
    """Average precision and reciprocal rank of one ranked list; ``None`` without a relevant passage (such a
    question counts in no MAP or MRR)."""
    if not any(labels):
        return None
    return average_precision_from_labels(labels), next(1.0 / i for i, hit in enumerate(labels, start=1) if hit)


def _ranking_summary(questions: list[tuple[list[bool], list[float]]]) -> dict[str, Any]:
    per_question = [m for m in (_ap_rr(labels) for labels, _ in questions) if m is not None]
    aps = [ap for ap, _ in per_question]
    rrs = [rr for _, rr in per_question]
    auc = roc_auc([y for labels, _ in questions for y in labels], [p for _, scores in questions for p in scores])
    return {
        "n_questions": len(aps),
        "map": round(sum(aps) / len(aps), 4) if aps else 0.0,
        "mrr": round(sum(rrs) / len(rrs), 4) if rrs else 0.0,
        "auc": None if auc is None else round(auc, 4),
    }


def _ranking_ci(questions: list[tuple[list[bool], list[float]]]) -> dict[str, Any]:
    """Bootstrap intervals of MAP, MRR and AUC over the questions (a question's list is one unit)."""
    per_question = [_ap_rr(labels) for labels, _ in questions]
    labels = [np.asarray(ys, dtype=bool) for ys, _ in questions]
    scores = [np.asarray(ps, dtype=np.float64) for _, ps in questions]

    def mean_of(k: int) -> Callable[[np.ndarray], float | None]:
        def stat(draw: np.ndarray) -> float | None:
            values = [m[k] for m in (per_question[i] for i in draw) if m is not None]
            return sum(values) / len(values) if values else None

        return stat

    def auc(draw: np.ndarray) -> float | None:
        return roc_auc(np.concatenate([labels[i] for i in draw]), np.concatenate([scores[i] for i in draw]))

    n = len(questions)
    return {
        "map": bootstrap_interval(n, mean_of(0)),
        "mrr": bootstrap_interval(n, mean_of(1)),
        "auc": bootstrap_interval(n, auc),
    }


def calibration_summary(labels: Sequence[bool], scores: Sequence[float], bins: int = 10) -> dict[str, Any]:
    """ECE and the reliability table of graded relevances against their labels."""
    ece = expected_calibration_error(labels, scores, bins)
    return {
        "n": len(labels),
        "ece": None if ece is None else round(ece, 4),
        "mean_score": round(sum(scores) / len(scores), 4) if scores else None,
        "positive_rate": round(sum(1 for y in labels if y) / len(labels), 4) if labels else None,
        "bins": reliability_table(labels, scores, bins),
    }


def evaluate_relevance(
    rows: Sequence[dict[str, Any]],
    judge: Any,
    progress: Progress = noop,
    calibration: bool = False,
    current_offset: float = 0.0,
    ci: bool = False,
    current_offset_cjk: float | None = None,
) -> dict[str, Any]:
    """Rank each question's passages by the judge's graded relevance; MAP, MRR and AUC (and, with
    ``calibration``, ECE and a reliability table under ``"calibration"``, overall and per language, and the
    ``relevance_offset`` that would calibrate this file, given the ``current_offset`` the judge ran with, also
    per script: ``"by_script"``, ``other`` and ``cjk``, for ``relevance_offset_cjk``); ``ci``
    adds ``"ci"``, 95 % bootstrap intervals of MAP, MRR and AUC over the questions)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        check_relevance_row(row)
        grouped[str(row["question_id"])].append(row)
    ranked: list[tuple[str, list[bool], list[float]]] = []
    cjk: list[bool] = []  # per question: the script that picks the calibration's intercept
    for group in grouped.values():
        question = group[0]["question"]
        cjk.append(is_cjk_question(str(question)))
        texts = [r["passage"] for r in group]
        rels = judge.relevance(question, texts)
        order = sorted(range(len(group)), key=lambda i: (-rels[i], neutral_order_key(texts[i])))
        ranked.append(
            (
                str(group[0]["language"]),
                [bool(group[i]["relevant"]) for i in order],
                [float(rels[i]) for i in order],
            )
        )
        progress(len(group))
    by_language: dict[str, list[tuple[list[bool], list[float]]]] = defaultdict(list)
    for language, labels, scores in ranked:
        by_language[language].append((labels, scores))
    result: dict[str, Any] = {
        "overall": _ranking_summary([(labels, scores) for _, labels, scores in ranked]),
        "by_language": {lang: _ranking_summary(qs) for lang, qs in sorted(by_language.items())},
    }
    if ci:
        result["ci"] = {"level": 0.95, "resamples": 1000, "unit": "question"}
        result["ci"]["overall"] = _ranking_ci([(labels, scores) for _, labels, scores in ranked])
        result["ci"]["by_language"] = {lang: _ranking_ci(qs) for lang, qs in sorted(by_language.items())}
    if calibration:

        def flat(qs: list[tuple[list[bool], list[float]]]) -> dict[str, Any]:
            return calibration_summary([y for ys, _ in qs for y in ys], [p for _, ps in qs for p in ps])

        result["calibration"] = {
            "overall": flat([(labels, scores) for _, labels, scores in ranked]),
            "by_language": {lang: flat(qs) for lang, qs in sorted(by_language.items())},
            "offset": relevance_offset(
                [y for _, ys, _ in ranked for y in ys], [p for _, _, ps in ranked for p in ps], current_offset
            ),
        }
        currents = {
            "other": current_offset,
            "cjk": current_offset if current_offset_cjk is None else current_offset_cjk,
        }
        by_script = {}
        for script, current in currents.items():
            lists = [(ys, ps) for (_, ys, ps), c in zip(ranked, cjk, strict=True) if c == (script == "cjk")]
            if lists:
                by_script[script] = relevance_offset(
                    [y for ys, _ in lists for y in ys], [p for _, ps in lists for p in ps], current
                )
        result["calibration"]["offset"]["by_script"] = by_script
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragwatch eval-judge",
        description="Measure a judge on labelled JSONL data (faithfulness or relevance files, auto-detected).",
    )
    parser.add_argument("file", type=Path, help="JSONL file of faithfulness or relevance rows")
    parser.add_argument("--judge", default="offline", help="judge to evaluate (default: offline)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N rows (default: all)")
    parser.add_argument(
        "--calibration",
        action="store_true",
        help="relevance files: also the expected calibration error (10 bins) and a reliability table",
    )
    parser.add_argument(
        "--thresholds",
        action="store_true",
        help="faithfulness files (offline, semantic, embedding judges): precision, recall and F1 at every claim "
        "threshold and the best one (for offline_threshold / semantic_threshold, on answers of your own service)",
    )
    parser.add_argument(
        "--min-precision",
        type=float,
        metavar="P",
        help="--thresholds plus the threshold that flags the most hallucinated answers while at least a share P "
        "of the flagged ones are hallucinated (for a team paging on faithfulness; default: none)",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="also 95%% bootstrap intervals of every figure (1,000 resamples of answers, or of questions)",
    )
    add_settings_options(parser)
    return parser


def run(
    path: Path,
    judge_name: str = "offline",
    limit: int | None = None,
    show_progress: bool = True,
    settings: Any = None,
    calibration: bool = False,
    thresholds: bool = False,
    ci: bool = False,
    min_precision: float | None = None,
) -> dict:
    """Load, detect the kind, evaluate; returns ``{"kind", "result", "rows", "seconds"}``.

    ``settings`` (a :class:`~ragwatch.settings.Settings`) configures the judge; ``None`` reads them from the
    environment. :class:`ConfigError` when the judge cannot be built from them. ``min_precision`` implies
    ``thresholds``.
    """
    if min_precision is not None:
        if not 0.0 < min_precision < 1.0:
            raise EvalInputError(0, "--min-precision must be between 0 and 1 (e.g. 0.8)")
        thresholds = True
    kind, rows = load_checked(path, limit)
    if calibration and kind != "relevance":
        raise EvalInputError(0, "--calibration needs a relevance file (graded relevances against labels)")
    if thresholds and (kind != "faithfulness" or judge_name not in THRESHOLD_SETTINGS):
        raise EvalInputError(
            0,
            "--thresholds needs a faithfulness file and a judge with a claim threshold "
            f"({', '.join(THRESHOLD_SETTINGS)})",
        )
    if settings is None:
        from ragwatch.settings import load_settings

        settings = load_settings()
    judge = make_judge(judge_name, settings)
    try:
        started = time.perf_counter()
        with progress_bar(len(rows), f"judging {path.name}", show_progress and len(rows) > 50) as advance:
            if kind == "faithfulness":
                result = evaluate_faithfulness(
                    rows, judge, advance, thresholds=thresholds, ci=ci, min_precision=min_precision
                )
            else:
                if not hasattr(judge, "relevance"):
                    raise EvalInputError(0, f"judge {judge_name!r} has no relevance function")
                offset = float(getattr(settings, "relevance_offset", 0.0))
                offset_cjk = getattr(settings, "relevance_offset_cjk", None)
                result = evaluate_relevance(
                    rows,
                    judge,
                    advance,
                    calibration=calibration,
                    current_offset=offset,
                    ci=ci,
                    current_offset_cjk=None if offset_cjk is None else float(offset_cjk),
                )
        seconds = time.perf_counter() - started
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
    return {"kind": kind, "result": result, "rows": len(rows), "seconds": seconds}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ragwatch eval-judge``: 0 on success, 2 on unusable input or arguments."""
    args = _parser().parse_args(argv)
    if args.limit is not None and args.limit < 1:
        print("ragwatch eval-judge: error: --limit must be at least 1", file=sys.stderr)
        return 2
    try:
        from ragwatch.settings import load_settings

        settings = load_settings(args.config_file, judge_base_url=args.judge_base_url, judge_model=args.judge_model)
        outcome = run(
            args.file,
            args.judge,
            args.limit,
            settings=settings,
            calibration=args.calibration,
            thresholds=args.thresholds,
            ci=args.ci,
            min_precision=args.min_precision,
        )
    except EvalInputError as exc:
        print(f"ragwatch eval-judge: error: {args.file}: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:  # an unknown --judge name, settings that do not validate
        print(f"ragwatch eval-judge: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(outcome["result"], ensure_ascii=False))
    else:
        rate = outcome["rows"] / outcome["seconds"] if outcome["seconds"] > 0 else float("inf")
        title = f"{args.file.name} — {outcome['kind']}, judge {args.judge}, {outcome['rows']} rows, {rate:.0f} rows/s"
        print_tables(judge_tables(outcome["result"], outcome["kind"], title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
