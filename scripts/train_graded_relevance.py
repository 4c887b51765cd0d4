"""Fit the graded (absolute) chunk-relevance model and build its background statistics.

Usage (from the project root, with the shared data next to it)::

    python scripts/train_graded_relevance.py [--data ../shared/data] [--folds 5] [--dry-run | --check]
        [--windows] [--news]

Writes ``ragwatch/scoring/judges/relevance_background.json`` and ``relevance_graded_weights.json``;
``--check`` rebuilds both in memory and exits 1 unless each equals the shipped file byte for byte.

**Fitted on** the training corpus only (``train/``, see its README); the dev files are read to *report*
figures, never to set anything (not even an intercept).

1. **Background** (``relevance_background.json``): the passages of ``train/relevance/`` and the contexts of
   ``train/faithfulness/``, cut into paragraphs of 300–1,500 characters (about a retrieved chunk), each
   counted once; per word root, how many paragraphs contain it (roots seen in fewer than ``MIN_DF`` are
   left out: the model reads them as rare), and per CJK character, how many of the CJK paragraphs do.
2. **Graded rows**: for each question of ``train/relevance/``, its own passages (answer-bearing: grade 2;
   the rest of its list: grade 1, same topic) and, as off-topic (grade 0), ``OFF_TOPIC`` passages of other
   questions of the same file from another ``group`` (source document) and ``FOREIGN`` contexts of
   ``train/faithfulness/`` in the question's script (Chinese questions: the Chinese contexts, which is where
   the thin Chinese side of the corpus gets its negatives). Seeded.
3. **Topic**: a sign-constrained L2 logistic regression of "grade ≥ 1" on the topic features, each file and
   class weighing the same.
4. **Answer**: a sign-constrained conditional logit ranking each question's own passages (grade 2 over 1)
   on all features, then a logistic regression of "grade 2" on that score over the on-topic rows (its
   slope and intercept; classes balanced, so 0.5 means "as likely answer-bearing as not").
5. **Band and sharpness**: ``relevance = topic × (band + (1 − band) × answer)``, with both parts sharpened
   (logits × a factor); the grid point that maximises, over the English training files, the mean of the
   smaller graded gap (answer-bearing − same topic, same topic − off topic). DuReader's lists carry no
   answer signal the features see (its gap is ~0 at every point), so it does not vote.

``--windows`` (an experiment, not the shipped recipe) adds :data:`WINDOWED` lists: SelQA's sentences joined
into windows of four in document order, so the answer part also learns multi-sentence chunks where the answer
is one sentence among on-topic ones (folds keep a window with its sentences). Measured 2026-12-02: CV on the
three files within noise (MAP DuReader 0.605 -> 0.599, Factcheck-GPT 0.830 -> 0.829, SelQA 0.844 -> 0.846);
``ragwatch eval-judge`` MAP WikiQA 0.680 -> 0.686, RGB 0.733 -> 0.743; but the RGB English answer-over-same-topic
gap 0.086 -> 0.084 and a "who wrote" answer of ``tests/test_relevance_graded.py`` falls under its pinned margin,
so it is not shipped.

``--news`` (an experiment, not shipped) adds the synthetic lists of ``scripts/news_lists.py`` (news passages on
one event, only some holding the asked value) as the virtual file :data:`NEWS`. Measured 2026-12-02: CV MAP
DuReader 0.605 -> 0.611, Factcheck-GPT 0.830 -> 0.830, SelQA 0.844 -> 0.837; dev MAP WikiQA 0.682 -> 0.685,
RGB en 0.642 -> 0.633, zh 0.758 -> 0.770; the RGB English answer-over-same-topic gap 0.110 -> 0.105 (this
script's dev summary), so it is not shipped (figures with a sentence-level feature: ``docs/accuracy.md``).

Printed: grouped k-fold cross-validation on the training files (folds by ``group``; steps 3–4 refitted,
band and sharpness kept) — the graded means, the gaps, MAP within lists; then the same on the dev files.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import trainkit as kit
from news_lists import SOURCES as NEWS_SOURCES
from news_lists import news_lists
from train_relevance import fit_listwise

from ragwatch.scoring.judges.relevance_cues import _CJK_RE, QuestionCues, _root, is_cjk_question
from ragwatch.scoring.judges.relevance_graded import (
    BACKGROUND_PATH,
    GRADED_FEATURES,
    GRADED_SIGNS,
    GRADED_WEIGHTS_PATH,
    TOPIC_FEATURES,
    Background,
    answer_capped,
    graded_features,
)
from ragwatch.scoring.judges.text import analyse_text, content_tokens
from ragwatch.scoring.retrieval_metrics import average_precision_from_labels

TRAIN_FILES = ("train/relevance/factcheck_gpt.jsonl", "train/relevance/selqa.jsonl", "train/relevance/dureader.jsonl")
DEV_FILES = ("relevance/wikiqa_dev.jsonl", "relevance/rgb_relevance_dev.jsonl")
#: Files whose lists the answer part can see an answer in (the band and sharpness are chosen on these).
GRID_FILES = ("train/relevance/factcheck_gpt.jsonl", "train/relevance/selqa.jsonl")
#: Training lists built from another training file's sentences (a virtual file name → the file it reads):
#: SelQA's sentences of one article section, in document order, joined into overlapping windows.
WINDOWED = {"train/relevance/selqa_windows.jsonl": "train/relevance/selqa.jsonl"}
#: Synthetic lists of news passages on one event (``scripts/news_lists.py``), a virtual training file.
NEWS = "train/relevance/news_synthetic.jsonl"
WINDOW_SENTENCES = 4
WINDOW_STRIDE = 2
MIN_DF = 5
OFF_TOPIC = 3
FOREIGN = 2
SEED = 0
BANDS = (0.3, 0.35, 0.4, 0.45)
SHARPNESS = (1.5, 2.0, 3.0, 4.0)
N_TOPIC = len(TOPIC_FEATURES)


# ------------------------------------------------------------------------------------------- background


def paragraphs(text: str, low: int = 300, high: int = 1500) -> list[str]:
    """``text`` cut at line breaks into pieces of at least ``low`` characters (the last may be shorter),
    each cut to ``high``."""
    out, buf = [], ""
    for line in text.split("\n"):
        line = line.strip()
        if line:
            buf = f"{buf}\n{line}" if buf else line
            if len(buf) >= low:
                out.append(buf[:high])
                buf = ""
    if buf:
        out.append(buf[:high])
    return out


def background_texts(data: Path) -> list[str]:
    """Every distinct passage and context of the training corpus, in file order, as paragraphs."""
    texts: list[str] = []
    for fname in sorted(p.relative_to(data).as_posix() for p in (data / "train" / "relevance").glob("*.jsonl")):
        seen: set[str] = set()
        for row in kit.read_jsonl(data / fname):
            if row["passage"] not in seen:
                seen.add(row["passage"])
                texts.extend(paragraphs(row["passage"]))
    for fname in sorted(p.relative_to(data).as_posix() for p in (data / "train" / "faithfulness").glob("*.jsonl")):
        seen = set()
        for row in kit.read_jsonl(data / fname):
            for ctx in row["contexts"]:
                if ctx not in seen:
                    seen.add(ctx)
                    texts.extend(paragraphs(ctx))
    return texts


def build_background(data: Path) -> dict[str, Any]:
    df: Counter[str] = Counter()
    char_df: Counter[str] = Counter()
    docs = cjk_docs = 0
    for text in background_texts(data):
        docs += 1
        df.update({_root(t) for t in content_tokens(text)})
        chars = set(_CJK_RE.findall(text))
        if chars:
            cjk_docs += 1
            char_df.update(chars)
    files = sorted(p.relative_to(data).as_posix() for p in (data / "train").glob("*/*.jsonl"))
    return {
        "note": {
            "built_by": "python scripts/train_graded_relevance.py",
            "built_from": {f: kit.file_sha(data / f) for f in files},
            "what": "paragraphs (300-1,500 characters) of the training passages and contexts containing each"
            f" word root (roots in fewer than {MIN_DF} left out) and each CJK character (of the CJK paragraphs)",
        },
        "docs": docs,
        "cjk_docs": cjk_docs,
        "min_df": MIN_DF,
        "df": {t: n for t, n in sorted(df.items()) if n >= MIN_DF},
        "char_df": dict(sorted(char_df.items())),
    }


# ------------------------------------------------------------------------------------------------ rows


def foreign_pool(data: Path) -> tuple[list[str], list[str]]:
    """Contexts of ``train/faithfulness/`` (80–3,000 characters), English and Chinese, each once."""
    english, chinese = [], []
    for fname in sorted(p.relative_to(data).as_posix() for p in (data / "train" / "faithfulness").glob("*.jsonl")):
        seen: set[str] = set()
        for row in kit.read_jsonl(data / fname):
            for ctx in row["contexts"]:
                if ctx not in seen and 80 <= len(ctx) <= 3000:
                    seen.add(ctx)
                    (chinese if row["language"] == "zh" else english).append(ctx)
    return english, chinese


def sentence_windows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question's candidate sentences (one article section) in document order, joined into windows of
    :data:`WINDOW_SENTENCES` every :data:`WINDOW_STRIDE`: a window is answer-bearing when it holds an answer
    sentence. Retrieved chunks are several sentences long, where the answer sits in one of them beside
    on-topic text; single sentences (SelQA as it is) never show the answer part that case."""
    by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_q[str(row["question_id"])].append(row)
    out = []
    for qid, sents in by_q.items():
        sents = sorted(sents, key=lambda r: r["rank_in_document"])
        for start in range(0, max(1, len(sents) - WINDOW_SENTENCES + WINDOW_STRIDE), WINDOW_STRIDE):
            part = sents[start : start + WINDOW_SENTENCES]
            out.append(
                {
                    **part[0],
                    "question_id": f"w{qid}",  # its own list, apart from the sentences' list
                    "passage": " ".join(r["passage"] for r in part),
                    "relevant": any(r["relevant"] for r in part),
                }
            )
    return out


def read_rows(data: Path, fname: str) -> list[dict[str, Any]]:
    """The rows of a relevance file, or of a virtual one of :data:`WINDOWED`."""
    if fname in WINDOWED:
        return sentence_windows(kit.read_jsonl(data / WINDOWED[fname]))
    if fname == NEWS:
        return news_lists(data)
    return kit.read_jsonl(data / fname)


def graded_rows(data: Path, files: tuple[str, ...], background: Background, pool: tuple[list[str], list[str]]):
    """Feature rows with their grade (2 answer-bearing, 1 same list, 0 off topic), file, question and group."""
    rng = random.Random(SEED)
    cache: dict[str, Any] = {}

    def feats(cues: QuestionCues, text: str) -> list[float]:
        an = cache.get(text)
        if an is None:
            an = cache[text] = analyse_text(text)
        return graded_features(cues, text, an, background)

    x, grade, file_of, qid_of, group_of, cjk_of, texts, capped = [], [], [], [], [], [], [], []
    for fname in files:
        questions: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in read_rows(data, fname):
            questions[str(row["question_id"])].append(row)
        keys = list(questions)
        for qid, rows in questions.items():
            question = rows[0]["question"]
            group = str(rows[0].get("group", qid))
            cjk = is_cjk_question(question)
            chosen = [(r["passage"], 2 if r["relevant"] else 1) for r in rows]
            while len(chosen) < len(rows) + OFF_TOPIC:
                other = questions[keys[rng.randrange(len(keys))]]
                if str(other[0].get("group", other[0]["question_id"])) != group:
                    chosen.append((other[rng.randrange(len(other))]["passage"], 0))
            foreign = pool[1] if cjk else pool[0]
            chosen += [(foreign[rng.randrange(len(foreign))], 0) for _ in range(FOREIGN)]
            cues = QuestionCues.of(question)
            for text, g in chosen:
                x.append(feats(cues, text))
                capped.append(answer_capped(cues, x[-1]))
                grade.append(g)
                file_of.append(fname)
                qid_of.append(qid)
                group_of.append(group)
                cjk_of.append(cjk)
                texts.append(text)
    return {
        "x": np.array(x, dtype=float),
        "grade": np.array(grade),
        "file": np.array(file_of),
        "qid": np.array(qid_of),
        "group": np.array(group_of),
        "cjk": np.array(cjk_of, dtype=bool),
        "texts": texts,
        "capped": np.array(capped, dtype=bool),
    }


def training_rows(
    data: Path, background: Background, pool: tuple[list[str], list[str]], extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The rows of :data:`TRAIN_FILES`, then those of the virtual files ``extra`` (their own seeded draw of
    off-topic passages, so adding them leaves the other rows as they were)."""
    real = graded_rows(data, TRAIN_FILES, background, pool)
    if not extra:
        return real
    more = graded_rows(data, extra, background, pool)
    return {
        key: value + more[key] if isinstance(value, list) else np.concatenate([value, more[key]])
        for key, value in real.items()
    }


# ---------------------------------------------------------------------------------------------- fitting


def balanced(y: np.ndarray, files: np.ndarray) -> np.ndarray:
    """Each file and, within it, each class weighs the same."""
    w = np.zeros(len(y))
    present = sorted(set(files.tolist()))
    for f in present:
        for cls in (0.0, 1.0):
            mask = (files == f) & (y == cls)
            if mask.any():
                w[mask] = len(y) / (2 * len(present) * mask.sum())
    return w


def fit_parts(t: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """Topic and answer parts (steps 3 and 4 of the module docstring) on the rows ``rows`` selects."""
    x, g, files = t["x"][rows], t["grade"][rows], t["file"][rows]
    y_topic = (g >= 1).astype(float)
    b_topic, c_topic = kit.sign_constrained(
        lambda xa: kit.fit_logistic(xa, y_topic, balanced(y_topic, files)), x[:, :N_TOPIC], (1,) * N_TOPIC
    )
    on = g >= 1
    y_answer = (g == 2).astype(float)
    lists, per_file = [], Counter()
    by_q: dict[str, list[int]] = defaultdict(list)
    for i in np.nonzero(on)[0]:
        by_q[t["qid"][rows][i]].append(int(i))
    for idx in by_q.values():
        if 0 < y_answer[idx].sum() < len(idx):
            lists.append(np.array(idx))
            per_file[files[idx[0]]] += 1
    list_w = [len(lists) / (len(per_file) * per_file[files[idx[0]]]) for idx in lists]
    _, rank = kit.sign_constrained(lambda xa: (0.0, fit_listwise(xa, y_answer, lists, list_w)), x, GRADED_SIGNS)
    score = (x @ rank)[on]
    b_answer, slope = kit.fit_logistic(score[:, None], y_answer[on], balanced(y_answer[on], files[on]))
    return {
        "topic": (b_topic, c_topic),
        "answer": (b_answer, rank * float(slope[0])),
    }


def grades(t: dict[str, Any], parts: dict[str, Any], band: float, sharp_topic: float, sharp_answer: float):
    b_t, c_t = parts["topic"]
    b_a, c_a = parts["answer"]
    topic = 1.0 / (1.0 + np.exp(-np.clip(sharp_topic * (b_t + t["x"][:, :N_TOPIC] @ c_t), -30, 30)))
    answer = 1.0 / (1.0 + np.exp(-np.clip(sharp_answer * (b_a + t["x"] @ c_a), -30, 30)))
    answer = np.where(t["capped"], 0.0, answer)  # the elements and information caps (GradedModel.grade)
    return topic * (band + (1.0 - band) * answer)


def summary(t: dict[str, Any], r: np.ndarray, rows: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """Per file and script: mean grade of answer-bearing / same-topic / off-topic passages, the two gaps,
    MAP within the questions' own lists, and the mean CP@3 of a healthy and an all-off-topic top 3."""
    rows = np.ones(len(r), dtype=bool) if rows is None else rows
    out: dict[str, dict[str, float]] = {}
    for fname in sorted(set(t["file"][rows].tolist())):
        for cjk in (False, True):
            sel = rows & (t["file"] == fname) & (t["cjk"] == cjk)
            if not sel.any():
                continue
            means = {g: float(r[sel & (t["grade"] == g)].mean()) for g in (2, 1, 0)}
            by_q: dict[str, list[int]] = defaultdict(list)
            for i in np.nonzero(sel)[0]:
                by_q[t["qid"][i]].append(int(i))
            aps, healthy, off = [], [], []
            for idx in by_q.values():
                own = [i for i in idx if t["grade"][i] >= 1]
                ranked = [bool(t["grade"][i] == 2) for i in sorted(own, key=lambda i: (-r[i], t["texts"][i]))]
                if any(ranked):
                    aps.append(average_precision_from_labels(ranked))
                    pos = [r[i] for i in own if t["grade"][i] == 2]
                    neg = [r[i] for i in own if t["grade"][i] == 1]
                    healthy.append(sum((pos + neg)[:3]) / 3)
                off.append(sum(r[i] for i in idx if t["grade"][i] == 0) / max(1, sum(t["grade"][idx] == 0)))
            out[f"{Path(fname).stem} {'zh' if cjk else 'en'}"] = {
                "answer_bearing": round(means[2], 3),
                "same_topic": round(means[1], 3),
                "off_topic": round(means[0], 3),
                "gap_answer": round(means[2] - means[1], 3),
                "gap_topic": round(means[1] - means[0], 3),
                "map": round(float(np.mean(aps)), 3),
                "cp3_healthy": round(float(np.mean(healthy)), 3),
            }
    return out


def _print(title: str, figs: dict[str, dict[str, float]]) -> None:
    print(f"  {title}")
    heads = ("answer", "same", "off", "gap a", "gap t", "MAP")
    print(f"    {'file':22s} " + " ".join(f"{h:>7s}" for h in heads) + f" {'CP@3 ok':>8s}")
    for name, f in figs.items():
        cells = " ".join(
            f"{f[k]:7.3f}" for k in ("answer_bearing", "same_topic", "off_topic", "gap_answer", "gap_topic", "map")
        )
        print(f"    {name:22s} {cells} {f['cp3_healthy']:8.3f}")


def choose_shape(t: dict[str, Any], parts: dict[str, Any]) -> tuple[float, float, float]:
    """Band and sharpness maximising the mean smaller gap over :data:`GRID_FILES` (ties: the first)."""
    best, shape = -1.0, (BANDS[0], SHARPNESS[0], SHARPNESS[0])
    for band in BANDS:
        for s_t in SHARPNESS:
            for s_a in SHARPNESS:
                figs = summary(t, grades(t, parts, band, s_t, s_a), np.isin(t["file"], GRID_FILES))
                value = float(np.mean([min(f["gap_answer"], f["gap_topic"]) for f in figs.values()]))
                if value > best + 1e-12:
                    best, shape = value, (band, s_t, s_a)
    return shape


def grouped_folds(t: dict[str, Any], folds: int) -> np.ndarray:
    """Fold of every row, by group (source document); a :data:`WINDOWED` file's rows go with the file they are
    built from, so no held-out sentence is ever trained on inside a window."""
    fold = np.zeros(len(t["grade"]), dtype=int)
    rng = np.random.default_rng(SEED)
    source = np.array([WINDOWED.get(f, f) for f in t["file"].tolist()])
    for fname in sorted(set(source.tolist())):
        in_file = source == fname
        groups = sorted(set(t["group"][in_file].tolist()))
        of = {g: int(k) for g, k in zip(groups, rng.permutation(len(groups)) % folds, strict=True)}
        fold[in_file] = [of[g] for g in t["group"][in_file]]
    return fold


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    windows = "--windows" in argv  # the experiment of WINDOWED, off in the shipped recipe (module docstring)
    news = "--news" in argv
    args = kit.parse_args(
        __doc__.split("\n\n")[0], GRADED_WEIGHTS_PATH, [a for a in argv if a not in ("--windows", "--news")]
    )
    print("building the background ...", flush=True)
    bg_data = build_background(args.data)
    bg_text = json.dumps(bg_data, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n"
    background = Background(bg_data, hashlib.sha256(bg_text.encode()).hexdigest()[:10])
    print(f"  {bg_data['docs']} paragraphs ({bg_data['cjk_docs']} CJK), {len(bg_data['df'])} roots kept")
    pool = foreign_pool(args.data)
    print("graded rows ...", flush=True)
    extra = (*(WINDOWED if windows else ()), *((NEWS,) if news else ()))
    train = training_rows(args.data, background, pool, extra)
    dev = graded_rows(args.data, DEV_FILES, background, pool)
    print(f"  training: {len(train['grade'])} rows; dev: {len(dev['grade'])} rows")
    everything = np.ones(len(train["grade"]), dtype=bool)
    parts = fit_parts(train, everything)
    band, s_t, s_a = choose_shape(train, parts)
    print(f"  band {band}, sharpness topic {s_t}, answer {s_a}")
    fold = grouped_folds(train, args.folds)
    oof = np.zeros(len(train["grade"]))
    for k in range(args.folds):
        test = fold == k
        oof[test] = grades(train, fit_parts(train, ~test), band, s_t, s_a)[test]
    cv = summary(train, oof)
    _print(f"{args.folds}-fold grouped CV on the training files (out of fold)", cv)
    dev_figs = summary(dev, grades(dev, parts, band, s_t, s_a))
    _print("dev files (nothing set here)", dev_figs)
    b_t, c_t = parts["topic"]
    b_a, c_a = parts["answer"]
    for i, name in enumerate(GRADED_FEATURES):
        topic = f"{c_t[i]:+8.3f}" if i < N_TOPIC else " " * 8
        print(f"    {name:18s} {topic} {c_a[i]:+8.3f}")
    weights = {
        "note": {
            "trained_by": kit.trained_by("train_graded_relevance.py", args),
            "fitted_on": {f: kit.file_sha(args.data / f) for f in TRAIN_FILES},
            **(
                {
                    "windows": f"{', '.join(WINDOWED)}: {', '.join(WINDOWED.values())} sentences in document order,"
                    f" {WINDOW_SENTENCES} per window every {WINDOW_STRIDE} (answer-bearing when one is)"
                }
                if windows
                else {}
            ),
            **({"news": f"{NEWS}: scripts/news_lists.py from {', '.join(f for f, _ in NEWS_SOURCES)}"} if news else {}),
            "off_topic_from": "other groups of the same file, and train/faithfulness/ contexts of the same script",
            "set_on_dev": "nothing",
            "model": "relevance = topic x (band + (1 - band) x answer); topic: sign-constrained logistic on the"
            " topic features (own list vs off topic); answer: sign-constrained conditional logit within lists,"
            " scaled by a balanced logistic on the on-topic rows; band and sharpness from a grid on the English"
            " training files",
            "background": BACKGROUND_PATH.name,
        },
        "features": list(GRADED_FEATURES),
        "topic": {"coef": [round(float(c), 5) for c in c_t], "intercept": round(float(b_t), 5)},
        "answer": {"coef": [round(float(c), 5) for c in c_a], "intercept": round(float(b_a), 5)},
        "band": band,
        "sharpness": {"topic": s_t, "answer": s_a},
        "cv": cv,
        "dev": dev_figs,
    }
    code = 0
    if args.check:
        same = BACKGROUND_PATH.exists() and BACKGROUND_PATH.read_text(encoding="utf-8") == bg_text
        print(f"{BACKGROUND_PATH}: {'rebuilds byte-identically' if same else 'DIFFERS from the rebuild'}")
        code = 0 if same else 1
    elif not args.dry_run:
        BACKGROUND_PATH.write_text(bg_text, encoding="utf-8")
        print(f"wrote {BACKGROUND_PATH}")
    return kit.write_weights(args, weights) or code


if __name__ == "__main__":
    sys.exit(main())
