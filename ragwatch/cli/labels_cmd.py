"""``ragwatch labels export``: people's corrections of the judge as ``eval-judge`` JSONL or a replay golden set.

The joining and the label rules are :mod:`ragwatch.scoring.feedback_export`; this reads the shared store,
writes the file and says on stderr what it wrote and what it skipped (and why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ragwatch.cli.common import EXIT_OK, EXIT_UNHEALTHY, add_settings_options, reached_queue, settings_of
from ragwatch.errors import ConfigError

__all__ = ["register"]

ACTIONS = {"export": "write the stored feedback joined with its score records"}
FORMATS = ("eval-judge", "golden")


def register(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    labels = commands.add_parser(
        "labels",
        help="export people's corrections of the judge (rw.feedback, the page's buttons)",
        description="Export the feedback stored by rw.feedback(...) and the live page's operator buttons, joined "
        "with the stored score records: as eval-judge JSONL (ragwatch eval-judge FILE --thresholds fits the "
        "claim threshold to your own traffic) or as a replay golden set (ragwatch replay --golden FILE). "
        "Exit 1 when nothing could be exported.",
        formatter_class=formatter,
    )
    add_settings_options(labels)
    add = labels.add_argument
    add("action", choices=list(ACTIONS), help="; ".join(f"{name}: {what}" for name, what in ACTIONS.items()))
    add(
        "--format",
        choices=FORMATS,
        default="eval-judge",
        help="eval-judge: faithfulness rows, one per sample with a verdict; golden: one question per sample "
        "added to the golden set",
    )
    add("--out", help="write to this file (default: stdout)")
    add(
        "--chunks",
        help='JSONL of your knowledge base\'s chunks ({"id": …, "text": …} a line): eval-judge contexts are '
        "their texts (default: none, the sentences the judge quoted from each chunk)",
    )
    add("--feedback", type=int, default=10_000, help="newest feedback records read")
    add("--records", type=int, default=50_000, help="newest score records searched for the labelled samples")
    labels.set_defaults(func=_labels)


def _chunk_texts(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    texts: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"--chunks {path}, line {number}: not JSON ({exc.msg})") from None
                if not isinstance(row, dict) or not isinstance(row.get("text"), str) or row.get("id") is None:
                    raise ConfigError(f"--chunks {path}, line {number}: expected an object with id and text")
                texts[str(row["id"])] = row["text"]
    except OSError as exc:
        raise ConfigError(f"--chunks {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--chunks {path}: not UTF-8 text") from None
    return texts


def _labels(args: argparse.Namespace) -> int:
    from collections import Counter

    from ragwatch.scoring.feedback_export import golden_rows, judge_rows, merge_feedback, records_for

    if args.feedback < 1 or args.records < 1:
        raise ConfigError("--feedback and --records must be at least 1")
    settings = settings_of(args)
    chunk_texts = _chunk_texts(args.chunks)
    queue = reached_queue(settings, "labels export")
    skipped: Counter[str] = Counter()
    try:
        labels = merge_feedback(queue.feedback(args.feedback), skipped)
        records = records_for(queue.recent_scores(args.records), labels) if labels else {}
    finally:
        queue.close()
    if args.format == "golden":
        rows = golden_rows(labels, records, skipped)
    else:
        rows = judge_rows(labels, records, skipped, chunk_texts)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--out {args.out}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    why = "; ".join(f"{n} {reason}" for reason, n in skipped.most_common())
    print(
        f"ragwatch labels: {len(rows)} {args.format} rows from feedback on {len(labels)} samples"
        + (f" (skipped: {why})" if why else ""),
        file=sys.stderr,
    )
    return EXIT_OK if rows else EXIT_UNHEALTHY
