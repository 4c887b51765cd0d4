"""``ragwatch eval-alerts`` as a command: its options, the tables it prints and ``main``.

What the command measures is :mod:`ragwatch.scoring.alert_eval` (its docstring says how each case and window
is built); this module turns arguments and settings into :class:`~ragwatch.scoring.alert_eval.Options`, runs
it and prints the result as tables or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragwatch.errors import ConfigError
from ragwatch.scoring.alert_cases import CASES, PASSAGE_CLASSES
from ragwatch.scoring.alert_eval import CP3, HEALTHY, PROG, Options, run
from ragwatch.scoring.eval_console import Table, add_settings_options, print_tables, render_tables
from ragwatch.scoring.eval_data import EvalInputError
from ragwatch.scoring.judges.base import FAITHFULNESS, HALLUCINATION_RATE
from ragwatch.settings import HALLUCINATION_RATE_LINE

__all__ = ["main", "render_plain"]


# ---------------------------------------------------------------------------------------- output


def _f(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _relevance_tables(f: dict[str, Any], out: dict[str, Any]) -> list[Table]:
    q = f["questions"]
    title = (
        f"{Path(f['file']).name} — relevance, judge {out['judge']}, {q['selected']:,} of {q['in_file']:,} "
        f"questions; {CP3} windows of {out['window']} ({out['windows']:,} resamples), SLA {out['sla']:g}"
    )
    columns = ["case", "questions", "labels CP@3", "mean", "p5", "p50", "p95", "window p5–p95", "windows < SLA"]
    body = []
    for case, s in f["cases"].items():
        w = s["window_mean"]
        span = "—" if w["p5"] is None else f"{w['p5']:.3f}–{w['p95']:.3f}"
        body.append(
            [case, str(s["questions"] - s["missing"]), _f(s["label_cp3"])]
            + [_f(s["cp3"][k]) for k in ("mean", "p5", "p50", "p95")]
            + [span, _f(s["windows_under_sla"])]
        )
    tables: list[Table] = [(title, columns, body)]
    others = [c for c in CASES if c != HEALTHY[0]]
    auc_rows = [[h] + [_f(f["window_auc"][h].get(o)) if o != h else "" for o in others] for h in HEALTHY]
    tables.append(("window AUC: P(healthy window mean > the other case's)", ["healthy", *others], auc_rows))
    inv = f["invariance"]
    inv_title = (
        f"invariance: {_f(inv['within_share'])} of {inv['n']} chunks within ±{inv['tolerance']:g} scored alone"
        + (f" (mean |Δ| {_f(inv['mean_abs_diff'])}, max {_f(inv['max_abs_diff'])})" if inv.get("n") else "")
        + (f" — {inv['note']}" if inv.get("note") else "")
        + "; graded order (mean in-list relevance):"
    )
    order_rows = [
        [lang] + [f"{_f(g[c]['mean'])} (n {g[c]['n']})" for c in PASSAGE_CLASSES] + [_f(g["ordered"])]
        for lang, g in f["graded_order"].items()
    ]
    tables.append((inv_title, ["language", "answer", "same-topic non-answer", "off-topic", "ordered"], order_rows))
    return tables


def _faithfulness_tables(f: dict[str, Any], out: dict[str, Any]) -> list[Table]:
    pa = f["per_answer"]
    title = (
        f"{Path(f['file']).name} — faithfulness, judge {out['judge']}, {f['answers']} answers "
        f"({pa['hallucinated']['answers']} hallucinated); windows of {out['window']} ({out['windows']:,} "
        f"resamples); hallucination_rate from {f['hallucination_rate_from']}"
    )
    columns = [
        "rate",
        "per window",
        "faithfulness",
        "hallucination_rate",
        f"windows > {out['hallucination_line']:g}",
        f"windows faith < {out['faithfulness_line']:g}",
    ]
    body = [
        [
            f"{r['rate']:g}",
            str(r["hallucinated_per_window"]),
            _f(r["faithfulness"]["mean"]),
            _f(r["hallucination_rate"]["mean"]),
            _f(r["windows_over_hallucination_line"]),
            _f(r["windows_under_faithfulness_line"]),
        ]
        for r in f["rates"]
    ]
    cmp_rows = [
        [f"{c['low']:g} vs {c['high']:g}", _f(c["auc_hallucination_rate"]), _f(c["auc_faithfulness"])]
        for c in f["compare"]
    ]
    return [
        (title, columns, body),
        (
            "window AUC between rates",
            ["rates", "hallucination_rate (high > low)", "faithfulness (low > high)"],
            cmp_rows,
        ),
    ]


def _tables(out: dict[str, Any]) -> list[Table]:
    tables: list[Table] = []
    for f in out["files"]:
        tables += _relevance_tables(f, out) if f["kind"] == "relevance" else _faithfulness_tables(f, out)
        if f["judge_failures"]:
            tables.append((f"judge failures: {f['judge_failures']} (first: {f['first_failure']})", ["-"], []))
    return tables


def render_plain(out: dict[str, Any]) -> str:
    """The result as aligned plain-text tables (what a pipe, a CI log or a machine without rich gets)."""
    return render_tables(_tables(out))


# ------------------------------------------------------------------------------------------ CLI


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"expected rates within 0..1, got {text!r}")
    return values


def _pair(text: str) -> tuple[float, float]:
    values = _floats(text)
    if len(values) != 2:
        raise argparse.ArgumentTypeError(f"expected two rates LOW,HIGH, got {text!r}")
    return values[0], values[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Would the SLA (CP@3 windows) and the faithfulness lines fire on retrievals and answers of "
        "known quality? Relevance and faithfulness JSONL files, detected by their fields.",
        epilog="Relevance cases, per question: gold (answer-bearing passages, then same-topic non-answers), realistic "
        "(BM25 top 3), one_off_topic (gold with one chunk from another question), off_topic (three from other "
        "questions), same_topic (three same-topic non-answers). Faithfulness windows hold exactly rate x window "
        "hallucinated answers (by the label).",
    )
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="JSONL files of relevance or faithfulness rows"
    )
    parser.add_argument(
        "--judge", default="offline", help="judge to run: offline, llm, cascade, semantic, embedding (default: offline)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables (default: tables)")
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="judge at most N questions of a relevance file, N answers of a faithfulness file, a seeded choice "
        "(default: all)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of every choice and resample (default: 0)"
    )
    parser.add_argument(
        "--window", type=int, metavar="N", help="samples per window (default: the sla_window_samples setting, 200)"
    )
    parser.add_argument(
        "--windows", type=int, default=1000, metavar="N", help="windows resampled per case or rate (default: 1000)"
    )
    parser.add_argument(
        "--sla",
        type=float,
        metavar="X",
        help="CP@3 line a window must not fall under (default: the sla_threshold setting, 0.65)",
    )
    parser.add_argument(
        "--rates",
        type=_floats,
        default=(0.05, 0.1, 0.3, 0.5),
        metavar="R,R,...",
        help="hallucination rates of the faithfulness windows (default: 0.05,0.1,0.3,0.5)",
    )
    parser.add_argument(
        "--compare",
        type=_pair,
        action="append",
        metavar="LOW,HIGH",
        help="pair of rates whose windows' AUC is reported, repeatable (default: 0.1,0.3)",
    )
    parser.add_argument(
        "--hallucination-line",
        type=float,
        metavar="X",
        help="hallucination_rate a window must not exceed (default: health_thresholds' hallucination_rate, 0.22)",
    )
    parser.add_argument(
        "--faithfulness-line",
        type=float,
        metavar="X",
        help="faithfulness a window must not fall under (default: health_thresholds' faithfulness, 0.75)",
    )
    parser.add_argument(
        "--invariance",
        type=int,
        default=200,
        metavar="N",
        help="chunks per relevance file also scored alone, to compare with their in-list relevance (default: 200)",
    )
    add_settings_options(parser)
    return parser


def _options(args: argparse.Namespace, settings: Any) -> Options:
    """Options from the arguments, the settings filling what was not given; :class:`EvalInputError` if invalid."""
    health = dict(getattr(settings, "health_thresholds", {}) or {})
    options = Options(
        sla=float(settings.sla_threshold if args.sla is None else args.sla),
        window=int(settings.sla_window_samples if args.window is None else args.window),
        windows=args.windows,
        seed=args.seed,
        limit=args.limit,
        rates=tuple(args.rates),
        compare=tuple(args.compare or ((0.1, 0.3),)),
        hallucination_line=float(
            args.hallucination_line
            if args.hallucination_line is not None
            else health.get(HALLUCINATION_RATE, HALLUCINATION_RATE_LINE)
        ),
        faithfulness_line=float(
            args.faithfulness_line if args.faithfulness_line is not None else health.get(FAITHFULNESS, 0.75)
        ),
        invariance=args.invariance,
    )
    for name in ("window", "windows", "limit"):
        value = getattr(options, name)
        if value is not None and value < 1:
            raise EvalInputError(0, f"--{name} must be at least 1")
    if options.invariance < 0:
        raise EvalInputError(0, "--invariance must be 0 or more")
    for name in ("sla", "hallucination_line", "faithfulness_line"):
        if not 0.0 <= getattr(options, name) <= 1.0:
            raise EvalInputError(0, f"--{name.replace('_', '-')} must be within 0..1")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ragwatch eval-alerts``: 0 on success, 2 on unusable input, arguments or settings."""
    args = _parser().parse_args(argv)
    try:
        from ragwatch.settings import load_settings

        settings = load_settings(args.config_file, judge_base_url=args.judge_base_url, judge_model=args.judge_model)
        options = _options(args, settings)
        out = run(args.files, args.judge, options, settings)
    except (EvalInputError, ConfigError) as exc:  # ConfigError: an unknown --judge, settings that do not validate
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        print_tables(_tables(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
