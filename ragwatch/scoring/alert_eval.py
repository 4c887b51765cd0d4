"""``ragwatch eval-alerts``: would the SLA and the faithfulness line fire on bad traffic and stay quiet on good?

``eval-judge`` asks whether a judge ranks chunks and answers like the labels; this asks what an operator
needs before degraded mode touches users: scored as a worker scores them, and averaged into windows as the
SLA evaluator averages them, do retrievals of known quality land on the right side of ``sla_threshold``?
The judge is built from the settings exactly as ``eval-judge`` builds it (``--judge``, ``--config-file``,
``--judge-base-url``, ``--judge-model``); the labels only build the cases, the judge never sees them.

**Relevance files** (one question–passage pair a line, grouped by ``question_id``). Per question, one
retrieval for each case (built by :mod:`ragwatch.scoring.alert_cases`): a sample with the question, no
answer, and three chunks ``c1``..``c3`` in rank order, as :func:`~ragwatch.scoring.eval_data.row_to_sample`
builds them:

* ``gold``: the answer-bearing passages in file order, then same-topic non-answers (a seeded choice) to
  fill three — the healthy top 3; questions with an answer-bearing passage and at least three candidates;
* ``realistic``: the top 3 of a judge-independent ranking, BM25 (k1 1.2, b 0.75; IDF over every passage of
  the file; words, and CJK character bigrams), ties in :func:`~ragwatch.scoring.eval_data.neutral_order_key`
  order; the same questions (file order would hand RGB its answer-first listing);
* ``one_off_topic``: the gold list with one chunk, at a seeded position, replaced by an off-topic passage;
* ``off_topic``: three passages of three other questions (seeded; same language when there are enough,
  never the question's own document);
* ``same_topic``: three same-topic non-answers (seeded), for every question with at least three.

Per case: the distribution of CP@3 (``context_precision_3``) over the questions, the CP@3 a judge agreeing
with the labels would read (answer-bearing share of the top 3), and windows of ``--window`` samples drawn
with replacement from the case's per-question CP@3 (``--windows`` of them, seeded): the share whose mean is
under the SLA, and the **window AUC** of each healthy case (gold, realistic) against each other case, the
probability that a healthy window's mean exceeds the other's (ties one half; identical cases 0.5). Two
checks of the graded relevances behind CP@3: **invariance** (a sample of chunks scored alone: the share whose
relevance moves by at most 0.05 from the one it got in its list) and the mean in-list relevance of
answer-bearing, same-topic non-answer and off-topic passages per language (the graded order).

**Faithfulness files** (``label_hallucinated`` per answer). Each answer is judged once; windows of
``--window`` answers hold exactly ``round(rate × window)`` hallucinated ones, drawn with replacement from the
hallucinated and the faithful rows, at each of ``--rates``. Per rate: the window means of ``faithfulness``
and of ``hallucination_rate`` (the judge's score when it gives one, else 1 for an answer with at least one
UNSUPPORTED claim, 0 otherwise), the share of windows over the hallucination line and under the
faithfulness line, and for each ``--compare`` pair the window AUC of the two rates.
"""

from __future__ import annotations

import itertools
import math
import random
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragwatch.errors import RagwatchError
from ragwatch.sampling.sample import Sample
from ragwatch.scoring.alert_cases import (
    ANSWER,
    CASES,
    OFF_TOPIC,
    PASSAGE_CLASSES,
    SAME_TOPIC,
    Retrieval,
    bm25_order,
    bm25_tokens,
    build_retrievals,
    group_questions,
)
from ragwatch.scoring.eval_console import (
    Progress,
    make_judge,
    progress_bar,
)
from ragwatch.scoring.eval_data import EvalInputError, claims_of, load_checked, row_to_sample
from ragwatch.scoring.judge_metrics import roc_auc
from ragwatch.scoring.judges.base import (
    CONTEXT_RELEVANCE,
    FAITHFULNESS,
    HALLUCINATION_RATE,
    Verdict,
    context_precision,
)

__all__ = [
    "ANSWER",
    "CASES",
    "HALLUCINATION_RATE",
    "OFF_TOPIC",
    "SAME_TOPIC",
    "Options",
    "Retrieval",
    "bm25_order",
    "bm25_tokens",
    "build_retrievals",
    "distribution",
    "evaluate_faithfulness_alerts",
    "evaluate_relevance_alerts",
    "run",
    "window_auc",
    "window_means",
]

PROG = "ragwatch eval-alerts"
CP3 = context_precision(3)
HEALTHY = ("gold", "realistic")
INVARIANCE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Options:
    """What a run measures; the CLI takes ``sla``, ``window`` and the two lines from the settings unless given."""

    sla: float = 0.65
    window: int = 200
    windows: int = 1000
    seed: int = 0
    limit: int | None = None
    rates: tuple[float, ...] = (0.05, 0.1, 0.3, 0.5)
    compare: tuple[tuple[float, float], ...] = ((0.1, 0.3),)
    hallucination_line: float = 0.2
    faithfulness_line: float = 0.75
    invariance: int = 200


# ------------------------------------------------------------------------------------------ windows


def _rng(seed: int, *names: object) -> np.random.Generator:
    """A generator per (seed, names): adding a case or a rate never moves another's draws."""
    return np.random.default_rng([seed, *(zlib.crc32(str(n).encode()) for n in names)])


def window_means(
    values: Sequence[float] | np.ndarray, window: int, windows: int, rng: np.random.Generator
) -> np.ndarray:
    """Means of ``windows`` windows of ``window`` values drawn with replacement (empty without values)."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v) or window < 1 or windows < 1:
        return np.empty(0)
    return v[rng.integers(0, len(v), size=(windows, window))].mean(axis=1)


def window_auc(higher: Sequence[float] | np.ndarray, lower: Sequence[float] | np.ndarray) -> float | None:
    """P(a window of ``higher`` has the larger mean than one of ``lower``), ties one half; ``None`` if empty."""
    a, b = np.asarray(higher, dtype=np.float64), np.asarray(lower, dtype=np.float64)
    labels = np.concatenate([np.ones(len(a), dtype=bool), np.zeros(len(b), dtype=bool)])
    return roc_auc(labels, np.concatenate([a, b]))


def distribution(values: Sequence[float] | np.ndarray) -> dict[str, Any]:
    """n, mean, p5, p50 and p95 (linear interpolation), rounded to four decimals; ``None`` when empty."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return {"n": 0, "mean": None, "p5": None, "p50": None, "p95": None}
    p5, p50, p95 = np.quantile(v, [0.05, 0.5, 0.95])
    return {
        "n": len(v),
        **{k: round(float(x), 4) for k, x in zip(("mean", "p5", "p50", "p95"), (v.mean(), p5, p50, p95), strict=True)},
    }


def _share(flags: np.ndarray) -> float | None:
    return round(float(flags.mean()), 4) if len(flags) else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ------------------------------------------------------------------------------ relevance: scoring


def _judge(judge: Any, sample: Sample, failures: list[str]) -> Verdict | None:
    """The judge's verdict, or ``None`` when it declares a failure (an LLM endpoint down): a worker would
    record nothing for that sample either. Any other exception is a bug and propagates."""
    try:
        return judge.score(sample)
    except RagwatchError as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
        return None


def _chunk_relevances(verdict: Verdict, n: int) -> list[float] | None:
    """Per-chunk relevances of a verdict in rank order (also nested under a cascade's deciding judge)."""
    details = verdict.details
    chunks = details.get("chunks")
    if not isinstance(chunks, list):
        decided = details.get(str(details.get("decided_by")))
        chunks = decided.get("chunks") if isinstance(decided, dict) else None
    if not isinstance(chunks, list) or len(chunks) != n:
        return None
    try:
        return [float(c["relevance"]) for c in chunks]
    except (KeyError, TypeError, ValueError):
        return None


def _alone_relevance(verdict: Verdict) -> float | None:
    rels = _chunk_relevances(verdict, 1)
    if rels is not None:
        return rels[0]
    value = verdict.scores.get(CONTEXT_RELEVANCE)
    return None if value is None else float(value)


def _invariance(
    scored: list[Retrieval], judge: Any, n: int, seed: int, failures: list[str], advance: Progress
) -> dict[str, Any]:
    chunks = [(r, i) for r in scored if r.relevances is not None for i in range(len(r.texts))]
    if n <= 0 or not chunks:
        reason = "skipped (--invariance 0)" if n <= 0 else "the judge gives no per-chunk relevances"
        return {"n": 0, "tolerance": INVARIANCE_TOLERANCE, "within_share": None, "note": reason}
    diffs = []
    for r, i in random.Random(f"{seed}/invariance").sample(chunks, min(n, len(chunks))):
        alone = Retrieval(r.case, r.question_id, r.question, r.language, [r.texts[i]], [r.classes[i]])
        verdict = _judge(judge, alone.sample(), failures)
        advance(1)
        value = None if verdict is None else _alone_relevance(verdict)
        if value is not None and r.relevances is not None:
            diffs.append(abs(r.relevances[i] - value))
    d = np.asarray(diffs)
    return {
        "n": len(diffs),
        "tolerance": INVARIANCE_TOLERANCE,
        "within_share": _share(d <= INVARIANCE_TOLERANCE + 1e-9),
        "mean_abs_diff": _round(float(d.mean())) if len(d) else None,
        "max_abs_diff": _round(float(d.max())) if len(d) else None,
    }


def _graded_order(scored: list[Retrieval]) -> dict[str, Any]:
    """Mean in-list relevance of each passage class per language, and whether they fall in label order."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in scored:
        if r.relevances is None:
            continue
        for cls, rel in zip(r.classes, r.relevances, strict=True):
            sums[r.language][cls].append(rel)
    out: dict[str, Any] = {}
    for language in sorted(sums):
        entry: dict[str, Any] = {
            cls: {"n": len(v), "mean": _round(sum(v) / len(v)) if v else None}
            for cls in PASSAGE_CLASSES
            for v in [sums[language][cls]]
        }
        means = [entry[c]["mean"] for c in PASSAGE_CLASSES if entry[c]["mean"] is not None]
        entry["ordered"] = all(a > b for a, b in itertools.pairwise(means)) if len(means) > 1 else None
        out[language] = entry
    return out


def evaluate_relevance_alerts(
    rows: Sequence[dict[str, Any]], judge: Any, options: Options, advance: Progress | None = None
) -> dict[str, Any]:
    """Build the cases of a relevance file, judge them, and summarise CP@3 and its windows (module docs)."""
    built = build_retrievals(rows, options.seed, options.limit)
    cases: dict[str, list[Retrieval]] = built["retrievals"]
    step = advance or (lambda _: None)
    failures: list[str] = []
    scored: list[Retrieval] = []
    for case in CASES:
        for r in cases[case]:
            verdict = _judge(judge, r.sample(), failures)
            step(1)
            if verdict is None:
                continue
            value = verdict.scores.get(CP3)
            r.cp3 = None if value is None else float(value)
            r.relevances = _chunk_relevances(verdict, len(r.texts))
            scored.append(r)
    if scored and all(r.cp3 is None for r in scored):
        raise EvalInputError(0, f"judge {getattr(judge, 'name', '?')!r} gives no {CP3} score")
    means: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {}
    for case in CASES:
        values = [r.cp3 for r in cases[case] if r.cp3 is not None]
        means[case] = window_means(values, options.window, options.windows, _rng(options.seed, "relevance", case))
        summary[case] = {
            "questions": len(cases[case]),
            "missing": len(cases[case]) - len(values),
            "label_cp3": _round(float(np.mean([r.label_cp3 for r in cases[case]]))) if cases[case] else None,
            "cp3": distribution(values),
            "window_mean": {k: v for k, v in distribution(means[case]).items() if k != "n"},
            "windows_under_sla": _share(means[case] < options.sla),
        }
    auc = {
        healthy: {other: _round(window_auc(means[healthy], means[other])) for other in CASES if other != healthy}
        for healthy in HEALTHY
    }
    invariance = _invariance(scored, judge, options.invariance, options.seed, failures, step)
    result: dict[str, Any] = {
        "kind": "relevance",
        "questions": built["questions"],
        "metric": CP3,
        "realistic_order": "bm25",
        "cases": summary,
        "window_auc": auc,
        "invariance": invariance,
        "graded_order": _graded_order(scored),
        "judge_failures": len(failures),
    }
    if failures:
        result["first_failure"] = failures[0]
    return result


def relevance_calls(rows: Sequence[dict[str, Any]], options: Options) -> int:
    """About how many judge calls a relevance file takes (for the progress bar)."""
    n = len(group_questions(rows))
    if options.limit is not None:
        n = min(n, options.limit)
    return len(CASES) * n + max(0, options.invariance)


# --------------------------------------------------------------------------------- faithfulness


def _hallucinated(verdict: Verdict) -> float | None:
    """The judge's ``hallucination_rate`` when it gives one; else 1.0 with at least one UNSUPPORTED claim,
    0.0 without; ``None`` when the answer was not judged for faithfulness at all (no answer)."""
    if HALLUCINATION_RATE in verdict.scores:
        return float(verdict.scores[HALLUCINATION_RATE])
    if FAITHFULNESS not in verdict.scores:
        return None
    return 1.0 if any(c.get("verdict") == "UNSUPPORTED" for c in claims_of(verdict.details)) else 0.0


def _window_mix(
    bad: np.ndarray, good: np.ndarray, rate: float, options: Options, rng: np.random.Generator
) -> np.ndarray:
    """Window means of per-answer values (NaN: not scored, left out as a worker leaves it out), each window
    ``round(rate × window)`` draws from ``bad`` and the rest from ``good``."""
    k = round(rate * options.window)
    parts = []
    if k:
        parts.append(bad[rng.integers(0, len(bad), size=(options.windows, k))])
    if options.window - k:
        parts.append(good[rng.integers(0, len(good), size=(options.windows, options.window - k))])
    drawn = np.concatenate(parts, axis=1)
    scored = ~np.isnan(drawn)
    counts = scored.sum(axis=1)
    sums = np.where(scored, drawn, 0.0).sum(axis=1)
    out = np.full(options.windows, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def evaluate_faithfulness_alerts(
    rows: Sequence[dict[str, Any]], judge: Any, options: Options, advance: Progress | None = None
) -> dict[str, Any]:
    """Judge each answer once; windows at each hallucination rate (module docs)."""
    if options.limit is not None and options.limit < len(rows):
        keep = set(random.Random(f"{options.seed}/limit").sample(range(len(rows)), options.limit))
        rows = [r for i, r in enumerate(rows) if i in keep]
    step = advance or (lambda _: None)
    failures: list[str] = []
    faith: dict[bool, list[float]] = {True: [], False: []}
    hall: dict[bool, list[float]] = {True: [], False: []}
    source = "claims"
    for i, row in enumerate(rows):
        verdict = _judge(judge, row_to_sample(row, i), failures)
        step(1)
        label = bool(row["label_hallucinated"])
        if verdict is not None and HALLUCINATION_RATE in verdict.scores:
            source = "score"
        f = None if verdict is None else verdict.scores.get(FAITHFULNESS)
        h = None if verdict is None else _hallucinated(verdict)
        faith[label].append(math.nan if f is None else float(f))
        hall[label].append(math.nan if h is None else h)
    wanted = sorted({*options.rates, *(r for pair in options.compare for r in pair)})
    for cls, name in ((True, "hallucinated"), (False, "faithful")):
        needs = [r for r in wanted if (r > 0 if cls else r < 1)]
        if needs and not faith[cls]:
            raise EvalInputError(0, f"no {name} answers in the file, which rates {needs} need")
    arrays = {
        key: {c: np.asarray(v[c], dtype=np.float64) for c in (True, False)} for key, v in (("f", faith), ("h", hall))
    }
    means: dict[float, dict[str, np.ndarray]] = {}
    table = []
    for rate in wanted:
        rng_seed = _rng(options.seed, "faithfulness", f"{rate:g}")
        f_means = _window_mix(arrays["f"][True], arrays["f"][False], rate, options, rng_seed)
        rng_seed = _rng(options.seed, "faithfulness", f"{rate:g}")  # the same answers in both windows
        h_means = _window_mix(arrays["h"][True], arrays["h"][False], rate, options, rng_seed)
        means[rate] = {"f": f_means, "h": h_means}
        f_ok, h_ok = f_means[~np.isnan(f_means)], h_means[~np.isnan(h_means)]
        table.append(
            {
                "rate": rate,
                "hallucinated_per_window": round(rate * options.window),
                "faithfulness": {k: v for k, v in distribution(f_ok).items() if k != "n"},
                "hallucination_rate": {k: v for k, v in distribution(h_ok).items() if k != "n"},
                "windows_over_hallucination_line": _share(h_ok > options.hallucination_line),
                "windows_under_faithfulness_line": _share(f_ok < options.faithfulness_line),
            }
        )

    def per_answer(cls: bool) -> dict[str, Any]:
        f, h = arrays["f"][cls], arrays["h"][cls]
        return {
            "answers": len(f),
            "faithfulness_mean": _round(float(np.nanmean(f))) if np.isfinite(f).any() else None,
            "hallucination_rate_mean": _round(float(np.nanmean(h))) if np.isfinite(h).any() else None,
        }

    compare = []
    for low, high in options.compare:
        lo, hi = means[low], means[high]
        compare.append(
            {
                "low": low,
                "high": high,
                "auc_hallucination_rate": _round(window_auc(hi["h"][~np.isnan(hi["h"])], lo["h"][~np.isnan(lo["h"])])),
                "auc_faithfulness": _round(window_auc(lo["f"][~np.isnan(lo["f"])], hi["f"][~np.isnan(hi["f"])])),
            }
        )
    result: dict[str, Any] = {
        "kind": "faithfulness",
        "answers": len(rows),
        "hallucination_rate_from": source,
        "per_answer": {"hallucinated": per_answer(True), "faithful": per_answer(False)},
        "rates": table,
        "compare": compare,
        "judge_failures": len(failures),
    }
    if failures:
        result["first_failure"] = failures[0]
    return result


# ------------------------------------------------------------------------------------------- run


def _load(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """Rows of one file, every one checked (kind by schema, no mixing) before anything is judged."""
    with _about(path):
        return load_checked(path)


@contextmanager
def _about(path: Path) -> Iterator[None]:
    """An input error names its file (unless it already does: "cannot read FILE")."""
    try:
        yield
    except EvalInputError as exc:
        if str(path) in str(exc):
            raise
        raise EvalInputError(0, f"{path}: {exc}") from None


@contextmanager
def _reporter(name: str, total: int, enabled: bool) -> Iterator[Progress]:
    """A progress bar on a terminal; otherwise a line to stderr when a file starts and ends."""
    if not enabled:
        yield lambda _: None
        return
    if sys.stderr.isatty():
        with progress_bar(total, f"judging {name}", True) as advance:
            yield advance
        return
    started = time.perf_counter()
    print(f"{PROG}: {name}: about {total:,} judge calls…", file=sys.stderr, flush=True)
    yield lambda _: None
    print(f"{PROG}: {name}: done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def run(
    paths: Sequence[Path], judge_name: str, options: Options, settings: Any, show_progress: bool = True
) -> dict[str, Any]:
    """Load and check every file (an error stops the run before any judging), then judge each in turn with one
    judge built from ``settings``; ``{"judge", "judge_version", "sla", "window", …, "files": [...]}``."""
    loaded = [(path, *_load(path)) for path in paths]
    judge = make_judge(judge_name, settings)
    files = []
    try:
        for path, kind, rows in loaded:
            if kind == "relevance":
                evaluate, total = evaluate_relevance_alerts, relevance_calls(rows, options)
            else:
                evaluate = evaluate_faithfulness_alerts
                total = len(rows) if options.limit is None else min(len(rows), options.limit)
            started = time.perf_counter()
            with _about(path), _reporter(path.name, total, show_progress) as advance:
                result = evaluate(rows, judge, options, advance)
            files.append({"file": str(path), **result, "seconds": round(time.perf_counter() - started, 2)})
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
    return {
        "judge": judge_name,
        "judge_version": str(getattr(judge, "version", "")),
        "seed": options.seed,
        "window": options.window,
        "windows": options.windows,
        "sla": options.sla,
        "hallucination_line": options.hallucination_line,
        "faithfulness_line": options.faithfulness_line,
        "files": files,
    }
