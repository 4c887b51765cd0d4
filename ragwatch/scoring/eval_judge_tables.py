"""How ``ragwatch eval-judge`` prints its figures: the main table (overall, per task type, per language), for
faithfulness the evidence check (quotes that share no content word with their SUPPORTED claim) and,
when asked, the bootstrap intervals, the calibration (ECE, the reliability table, the suggested offsets)
and the claim-threshold table. Pure formatting of :func:`~ragwatch.scoring.evaluate.run`'s result.
"""

from __future__ import annotations

from typing import Any

from ragwatch.scoring.eval_console import Table, render_tables

__all__ = ["judge_tables", "render_plain"]


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table_rows(result: dict[str, Any], kind: str) -> tuple[list[str], list[list[str]]]:
    if kind == "faithfulness":
        columns = ["group", "n", "precision", "recall", "f1", "auc"]
        sections = [("overall", {"all": result["overall"]}), ("task", result["by_task_type"])]
        sections.append(("language", result["by_language"]))
    else:
        columns = ["group", "n_questions", "map", "mrr", "auc"]
        sections = [("overall", {"all": result["overall"]}), ("language", result["by_language"])]
    body = []
    for section, entries in sections:
        for name, stats in entries.items():
            label = "overall" if section == "overall" else f"{section}={name}"
            body.append([label] + [_fmt(stats[c]) for c in columns[1:]])
    return columns, body


def _calibration_rows(result: dict[str, Any]) -> Table:
    """The reliability table (overall) and one ECE line per group, as a title, columns and rows."""
    cal = result["calibration"]
    groups = [("overall", cal["overall"])] + [(f"language={k}", v) for k, v in cal["by_language"].items()]
    ece = ", ".join(f"{name} {_fmt(c['ece'])} (n {c['n']})" for name, c in groups)
    offset = cal.get("offset", {})
    if offset.get("suggested") is not None:
        ece += (
            f"; relevance_offset {offset['suggested']:g} (now {offset['current']:g}) would read ECE "
            f"{offset['ece_after']:.3f} and a mean score of {offset['mean_score_after']:.3f} against "
            f"{offset['positive_rate']:.3f} relevant"
        )
    scripts = {k: v for k, v in offset.get("by_script", {}).items() if v.get("suggested") is not None}
    if len(scripts) == 2:  # both scripts in the file: each has an intercept, so each its own offset
        other, cjk = scripts["other"], scripts["cjk"]
        ece += (
            f"; per script: relevance_offset {other['suggested']:g} (ECE {other['ece_after']:.3f}),"
            f" relevance_offset_cjk {cjk['suggested']:g} (ECE {cjk['ece_after']:.3f})"
        )
    columns = ["score bin", "n", "mean score", "relevant share", "gap"]
    body = []
    for b in cal["overall"]["bins"]:
        gap = None if not b["n"] else abs(b["mean_score"] - b["positive_rate"])
        body.append(
            [f"{b['low']:.1f}–{b['high']:.1f}", str(b["n"]), _fmt(b["mean_score"]), _fmt(b["positive_rate"]), _fmt(gap)]
        )
    return f"calibration: ECE (10 bins) {ece}", columns, body


def _threshold_rows(result: dict[str, Any]) -> Table:
    """The threshold table every 0.05, plus the judge's own threshold, the best one and, when asked, the one
    for a precision."""
    table = result["thresholds"]
    cur, best = table["current"], table["best"]
    title = (
        f"claim threshold {cur['threshold']:g}: F1 {cur['f1']:.3f}; best {best['f1']:.3f} at {best['threshold']:g}"
        f" ({table.get('setting', 'threshold')})"
    )
    wanted = table.get("for_precision")
    for_p = wanted["row"] if wanted else None
    if wanted:
        title += f"; precision ≥ {wanted['min_precision']:g}: " + (
            f"recall {for_p['recall']:.3f} at {for_p['threshold']:g}" if for_p else "no threshold reaches it"
        )
    columns = ["threshold", "precision", "recall", "f1", "flagged share"]
    shown = [r for r in table["rows"] if round(r["threshold"] * 100) % 5 == 0 or r is best or r is for_p]

    def marks(r: dict[str, Any]) -> str:
        return (" best" if r is best else "") + (f" P≥{wanted['min_precision']:g}" if r is for_p and wanted else "")

    body = [
        [f"{r['threshold']:.2f}" + marks(r)]
        + [_fmt(float(r[c])) for c in ("precision", "recall", "f1", "flagged_share")]
        for r in shown
    ]
    return title, columns, body


def _ci_rows(result: dict[str, Any]) -> Table:
    """The bootstrap intervals, one row per group."""
    ci = result["ci"]
    sections = [("overall", {"all": ci["overall"]})]
    sections += [
        (key.removeprefix("by_").removesuffix("_type"), ci[key]) for key in ("by_task_type", "by_language") if key in ci
    ]
    metrics = list(ci["overall"])
    body = []
    for section, entries in sections:
        for name, intervals in entries.items():
            label = "overall" if section == "overall" else f"{section}={name}"
            body.append(
                [label]
                + ["—" if intervals[m] is None else f"{intervals[m][0]:.3f}–{intervals[m][1]:.3f}" for m in metrics]
            )
    title = f"{ci['level']:.0%} bootstrap intervals ({ci['resamples']} resamples of {ci['unit']}s)"
    return title, ["group", *metrics], body


def _evidence_rows(result: dict[str, Any]) -> Table:
    """The quotes shown for SUPPORTED claims that share no content word with their claim, out of the
    SUPPORTED claims that have one (:mod:`~ragwatch.scoring.evidence_check`; the target is none)."""
    e = result["evidence"]
    with_words = e["supported_claims"] - e["no_content_word"]
    title = "evidence: SUPPORTED claims whose quote shares no content word with the claim (target 0)"
    if e["no_content_word"]:
        n = e["no_content_word"]
        title += f"; {n} claim{'' if n == 1 else 's'} without a content word set apart"
    columns = ["SUPPORTED claims with a content word", "quote shares no word", "share"]
    return title, columns, [[str(with_words), str(e["quote_shares_no_word"]), _fmt(e["share"])]]


def _extra_tables(result: dict[str, Any]) -> list[Table]:
    tables = []
    if "evidence" in result:
        tables.append(_evidence_rows(result))
    if "ci" in result:
        tables.append(_ci_rows(result))
    if "calibration" in result:
        tables.append(_calibration_rows(result))
    if "thresholds" in result:
        tables.append(_threshold_rows(result))
    return tables


def judge_tables(result: dict[str, Any], kind: str, title: str) -> list[Table]:
    """The main table, the evidence check (faithfulness), then the ones ``--ci``, ``--calibration`` and
    ``--thresholds`` added to the result."""
    return [(title, *_table_rows(result, kind)), *_extra_tables(result)]


def render_plain(result: dict[str, Any], kind: str, title: str) -> str:
    """The result as aligned plain-text tables (what a pipe, a CI log or a machine without rich gets)."""
    return render_tables(judge_tables(result, kind, title))
