"""What the offline judge measures of each claim: its alignment features, the hard rules and the verdicts.

Separate from the judge (:mod:`ragwatch.scoring.judges.offline`, which owns the model, the weights and the
scores) because this is where the definition of every feature column lives, and the training script reads
the same analysis as the judge. How each feature and rule is computed is told in the judge's docstring.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragwatch.scoring.judges.budget import check as check_time
from ragwatch.scoring.judges.claim_context import ClaimContext
from ragwatch.scoring.judges.claims import Claim, mask_inline_code
from ragwatch.scoring.judges.text import token_prior
from ragwatch.scoring.judges.text_rules import entity_tokens, negation_reach, negation_scopes
from ragwatch.scoring.judges.text_scan import NumberMention, scan, stem
from ragwatch.scoring.judges.unverifiable import is_unverifiable

if TYPE_CHECKING:
    from ragwatch.scoring.judges.offline import ClaimModel

__all__ = [
    "FAITH_FEATURES",
    "FAITH_SIGNS",
    "LEGACY_FEATURES",
    "RULES",
    "SUPPORTED",
    "UNSUPPORTED",
    "UNVERIFIABLE",
    "VETO_CAP",
    "ClaimAnalysis",
    "analyse_claims",
]


SUPPORTED = "SUPPORTED"
UNSUPPORTED = "UNSUPPORTED"
UNVERIFIABLE = "UNVERIFIABLE"
#: A vetoed claim's P(supported) is at most this: the hard verdict must also show in the ranking scores.
VETO_CAP = 0.25

#: Claim features, in the order of the model's columns. The first thirteen are the ones the 2026-11
#: logistic calibration used (kept so its figures can be reproduced by ``scripts/train_offline.py``); the
#: rest describe the alignment in more detail (see :func:`analyse_claims`).
FAITH_FEATURES = (
    "cov_all",
    "cov_sent",
    "cov_pair",
    "cov_phrase",
    "miss_entity",
    "num_missing",
    "unit_mismatch",
    "neg_flip",
    "hedge_drop",
    "modal_drop",
    "json_conflict",
    "miss_count",
    "miss_run",
    "entity_swap",
    "num_absent",
    "phrase_sent",
    "sent_prec",
    "miss_weight",
    "neg_parity",
    "num_local",
    "ent_local",
)
#: The hard rules, in the order they are checked; a weight file's ``vetoes`` says which decide a verdict.
RULES = (
    "number_not_in_context",
    "unit_mismatch",
    "negation_flip",
    "hedge_dropped",
    "structured_value_conflict",
    "entity_not_in_context",
    "nothing_in_context",
)
#: The first thirteen features, the ones the original logistic calibration was fitted on.
LEGACY_FEATURES = FAITH_FEATURES[:13]
#: The direction each faithfulness feature may push P(supported) (0: either): fits keep these signs.
FAITH_SIGNS = (1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 0, -1, -1, 1, 1)

#: Words about the passages themselves ("according to the passage", "the data shows"): never need support.
_META = frozenset(
    stem(w)
    for w in """
    passage passages context contexts document documents text article articles information provided given
    mentioned mentions mention according based summary overall answer question note data source sources
    stated states describes described indicates indicated suggests suggested explains explained reviewer
    reviewers review reviews customer customers user users additionally furthermore moreover
    """.split()  # noqa: SIM905 - stemmed, so not a plain word set
)

#: Citations and enumeration labels ("(Passage 2)", "[1]", "Step 4", "Option 2"): numbers that assert nothing.
_CITATION_RE = re.compile(
    r"[(（\[]?\b(?:passages?|documents?|docs?|sources?|contexts?|chunks?|references?|articles?|steps?|options?"
    r"|methods?|tips?|ways?|points?|parts?|phases?|stages?|items?|reasons?|examples?|sections?|chapters?"
    r"|questions?|reviews?|reviewers?)\s*#?\d+(?:\s*(?:,|and|&|-|or)\s*\d+)*[)）\]]?"
    r"|\[\d+(?:\s*[,-]\s*\d+)*\]"
    r"|[(（]?(?:段落|文档|资料|来源|参考|步骤|方法)\s*\d+[)）]?"
    r"|第\s*\d+\s*(?:步|条|点|段|篇)"
    # rating scales and round-the-clock phrases: "4.5 out of 5 stars", "seven days a week", "24/7"
    r"|\bout of (?:5|10|100)(?:\.0)?\b|\b(?:seven|7) days a week\b|\b24/7\b|\b24 hours a day\b",
    re.IGNORECASE,
)

#: A unit conversion the writer added in parentheses ("58 °F (15 °C)"): arithmetic, not a claim about the
#: context, so its number is not looked for there.
_CONVERSION_RE = re.compile(
    r"(?<=[A-Za-z°%\d])\s*[(（](?:about |approx\.? |approximately |around |~|≈)?\d[\d.,]*\s*"
    r"(?:°\s?[CF]\b|degrees? (?:Celsius|Fahrenheit|C|F)\b|km\b|kilomet(?:er|re)s?\b|miles?\b|m\b|met(?:er|re)s?\b|"
    r"ft\b|feet\b|kg\b|kilograms?\b|lbs?\b|pounds?\b|cm\b|inch(?:es)?\b|in\b|ml\b|l\b|liters?\b|oz\b|"
    r"ounces?\b|g\b|grams?\b|mph\b|km/h\b|cups?\b)[^)）]{0,10}[)）]",
    re.IGNORECASE,
)

#: Unit families: a bare "degrees" is compatible with °C and °F, "miles" is not with "km".
_UNIT_FAMILY = {
    "degree": "temperature",
    "°c": "temperature",
    "°f": "temperature",
    "year": "age",  # "between 30 and 40 years old" = "between the age of 30 and 40 years"
    "year_old": "age",
}


@dataclass(slots=True)
class ClaimAnalysis:
    """One claim with its features and verdict; ``p_supported`` is the calibrated probability."""

    claim: Claim
    unverifiable: bool
    features: list[float]
    rule: str | None
    p_supported: float
    verdict: str
    chunk_id: str | None
    evidence: str | None
    #: What settling its quote found (:mod:`~ragwatch.scoring.judges.evidence`), for any verifiable claim
    #: whatever its verdict: ``"nothing"`` (none of its words in the context), ``"meta"`` (only words about
    #: the passages), ``"pieced"`` (no single chunk holds its words), else None. It changes the verdict of a
    #: SUPPORTED claim only; a threshold sweep reads it to say what the judge would do at another threshold.
    settle: str | None = None

    def as_detail(self) -> dict[str, Any]:
        if self.verdict == UNVERIFIABLE:
            confidence = 0.9
        elif self.verdict == SUPPORTED:
            confidence = self.p_supported
        else:
            confidence = 1.0 - self.p_supported
        detail = {
            "text": self.claim.text,
            "start": self.claim.start,
            "end": self.claim.end,
            "verdict": self.verdict,
            "chunk_id": self.chunk_id,
            "evidence": self.evidence,
            "confidence": round(confidence, 4),
        }
        if self.verdict != UNVERIFIABLE:
            detail["p_supported"] = round(self.p_supported, 4)
        if self.rule:
            detail["rule"] = self.rule
        return detail


#: Only a claim with a digit (or "seven days a week") can hold a citation or a neutral number.
_HAS_DIGIT_RE = re.compile(r"\d|seven days", re.IGNORECASE)


def _units_compatible(unit: str, known: set[str]) -> bool:
    if unit in known:
        return True
    family = _UNIT_FAMILY.get(unit)
    return any(_UNIT_FAMILY.get(k) == family for k in known) if family else False


def _numbers_check(num_toks: set[str], mentions: list[NumberMention], ctx: ClaimContext) -> tuple[float, float]:
    """Share of the claim's numbers absent from the context, and whether a unit contradicts one."""
    if not num_toks:
        return 0.0, 0.0
    missing = sum(1 for t in num_toks if t not in ctx.all_tokens)
    unit_bad = 0.0
    for m in mentions:
        units = ctx.numbers.get(m.value)
        if units is None or m.unit is None or m.unit in units:
            continue
        known = {u for u in units if u is not None}
        if known and not _units_compatible(m.unit, known):
            unit_bad = 1.0
    return missing / len(num_toks), unit_bad


#: A claim that says a value is not known agrees with a null one.
_UNKNOWN_RE = re.compile(
    r"\b(?:unknown|unspecified|unclear|not (?:specified|mentioned|listed|provided|stated|known|indicated))\b", re.I
)


def _json_conflict(plain: str, tokset: set[str], negations: int, json_pol: dict[tuple[str, ...], int]) -> float:
    """1 when the claim names a key of a structured chunk with the opposite polarity ("offers WiFi" against
    ``"WiFi": "no"``), or asserts a value the record leaves null; keys whose polarity the claim leaves
    unclear (the tail of a negated list) are not judged."""
    negated, unclear = negation_reach(plain) if negations else (set(), set())
    for key, pol in json_pol.items():
        if not all(t in tokset for t in key):
            continue
        neg = any(t in negated for t in key)
        if not neg and any(t in unclear for t in key):
            continue
        if pol == 0:
            if _UNKNOWN_RE.search(plain) is None:
                return 1.0
        elif (pol < 0) != neg:
            return 1.0
    return 0.0


def _longest_missing_run(toks: list[str], present: set[str], skip: set[str]) -> int:
    run = best = 0
    for t in toks:
        if t in skip:
            continue
        if t in present:
            run = 0
        else:
            run += 1
            best = max(best, run)
    return best


def _phrase_support(toks: list[str], ctx: ClaimContext, si: int) -> float:
    """Share of the claim's token bigrams found in its best sentence and the one after it (same chunk):
    phrases supported *locally*, not scattered over the whole context."""
    bigrams = list(itertools.pairwise(toks))
    if not bigrams or si < 0:
        return 0.0
    seq = ctx.sent_seq[si]
    local = set(itertools.pairwise(seq))
    nxt = si + 1
    if nxt < len(ctx.sent_seq) and ctx.sent_chunk[nxt] == ctx.sent_chunk[si]:
        local.update(itertools.pairwise(ctx.sent_seq[nxt]))
    return sum(1 for b in bigrams if b in local) / len(bigrams)


def analyse_claims(
    claims: list[Claim],
    question_toks: set[str],
    ctx: ClaimContext,
    model: ClaimModel,
    threshold: float,
    vetoes: frozenset[str] = frozenset(RULES),
) -> list[ClaimAnalysis]:
    """Each claim's features, rule and verdict against ``ctx``; the model decides every verifiable claim in one
    batch (so the claim-count prior sees them all), and a vetoing rule overrides it."""
    out: list[ClaimAnalysis] = []
    pending: list[tuple[int, int]] = []  # (index in out, best sentence) of the claims the model decides
    rows: list[list[float]] = []
    has_context = bool(ctx.sent_tokens)
    n_features = len(FAITH_FEATURES)
    given = question_toks | _META  # tokens a claim need not find in the context
    # A claim's analysis is a function of its text alone (against this context), so a repeated claim is read
    # once: an answer of one sentence repeated to the size limit costs one claim, not n (see claim_context).
    first_of: dict[str, int] = {}  # claim text → index in ``out`` of its first analysis
    row_of: dict[int, int] = {}  # index in ``out`` → its row in ``rows`` (claims the model decides)
    for n_done, claim in enumerate(claims):
        check_time(n_done, len(claims), "claims")
        seen = first_of.get(claim.text)
        if seen is not None:
            if seen in row_of:
                row_of[len(out)] = len(rows)
                pending.append((len(out), pending[row_of[seen]][1]))
                rows.append(rows[row_of[seen]])
            out.append(dataclasses.replace(out[seen], claim=claim, features=list(out[seen].features)))
            continue
        first_of[claim.text] = len(out)
        text = mask_inline_code(claim.text)
        if is_unverifiable(text):
            out.append(ClaimAnalysis(claim, True, [], None, 0.0, UNVERIFIABLE, None, None))
            continue
        plain = _CITATION_RE.sub(" ", text) if _HAS_DIGIT_RE.search(text) else text
        if "(" in plain:
            plain = _CONVERSION_RE.sub(" ", plain)
        sc = scan(plain)
        toks = sc.tokens
        tokset = set(toks)
        if not has_context:
            feats = [0.0] * n_features
            out.append(ClaimAnalysis(claim, False, feats, "no_context", 0.0, UNSUPPORTED, None, None))
            continue
        check = {t for t in tokset if t not in given or t[0] == "#"}
        weights = dict(zip(tokset, map(token_prior, tokset), strict=True))
        total = sum(weights[t] for t in check)
        full_total = sum(weights.values())
        all_tokens = ctx.all_tokens
        if total < 10:  # the claim only restates the question or talks about the passages: nothing to check
            cov_all = cov_sent = cov_pair = 1.0
            scores = ctx.sentence_scores(tokset, weights)
            check = tokset
            miss_weight = 0.0
        else:
            covered = sum(weights[t] for t in check if t in all_tokens)
            cov_all = covered / total
            miss_weight = min(1.0, (total - covered) / 100)
            scores = ctx.sentence_scores(check, weights)
            best = max(scores.values()) if scores else 0
            cov_sent = best / total
            best_p, _ = ctx.best_pair(check, weights, scores) if scores else (0, -1)
            cov_pair = max(best_p, best) / total
        si = min(scores, key=lambda i: (-scores[i], i)) if scores else -1
        bigrams = list(itertools.pairwise(toks))
        cov_phrase = sum(1 for b in bigrams if b in ctx.bigrams) / len(bigrams) if bigrams else cov_all
        ents = (entity_tokens(plain) & tokset) - given
        miss_entity = sum(1 for t in ents if t not in all_tokens) / len(ents) if ents else 0.0
        num_toks = {t for t in tokset if t[0] == "#"}
        mentions = sc.numbers
        num_missing, unit_bad = _numbers_check(num_toks, mentions, ctx)
        digits_missing = any(m.value not in all_tokens and m.value not in question_toks for m in mentions)
        neg_flip = hedge_drop = modal_drop = 0.0
        # Rules look at the whole claim, question words included: "was not approved" negates words the
        # question ("was it approved?") already contains.
        full_scores = scores if check == tokset else ctx.sentence_scores(tokset, weights)
        top = max(full_scores.values()) if full_scores else 0
        if len(tokset) >= 3 and top >= 0.6 * full_total:
            near = [i for i, v in full_scores.items() if v >= top - 0.1 * full_total and v >= 0.6 * full_total]
            # a negation flip is only read off a sentence that says nearly the same thing both ways
            twins = [i for i, v in full_scores.items() if v >= 0.8 * full_total and v >= 0.5 * ctx.sent_weight[i]]
            if twins:
                claim_scopes = negation_scopes(plain) if sc.negation_count else []
                flips = 0
                for i in twins:
                    sent_toks = ctx.sent_tokens[i]
                    mine = sum(1 for scope in claim_scopes if scope & sent_toks)
                    theirs = sum(1 for scope in ctx.sent_scopes(i) if scope & tokset)
                    flips += (mine - theirs) % 2
                if flips == len(twins):
                    neg_flip = 1.0
            if not (sc.strong or sc.modal or sc.approx or sc.ranged):
                bare = num_toks - sc.approx_numbers
                if all(ctx.sent_strong[i] or (bare and bare & ctx.sent_approx_numbers(i)) for i in near):
                    hedge_drop = 1.0
                elif all(ctx.sent_modal[i] for i in near):
                    modal_drop = 1.0
        # Entity swap: every other word of the claim sits in one sentence, which names someone or something
        # else where the claim names an entity the context never mentions ("in Paris" vs "in Rome").
        entity_swap = 0.0
        missing_ents = {t for t in ents if t not in all_tokens}
        if missing_ents and full_scores:
            rest_total = full_total - sum(weights[t] for t in missing_ents)
            best_i = min(full_scores, key=lambda i: (-full_scores[i], i))
            if rest_total >= 10 and full_scores[best_i] >= 0.8 * rest_total:
                entity_swap = 1.0 if ctx.sent_entities(best_i) - tokset else 0.0
        json_conflict = _json_conflict(plain, tokset, sc.negation_count, ctx.json_pol) if ctx.json_pol else 0.0
        strong = {t for t in check if weights[t] >= 10}
        miss_count = min(4, sum(1 for t in strong if t not in all_tokens)) / 4
        miss_run = min(3, _longest_missing_run(toks, all_tokens, given)) / 3
        if si < 0 and full_scores:  # nothing to check matched: quote the sentence closest to the whole claim
            si = min(full_scores, key=lambda i: (-full_scores[i], i))
        # The finer alignment: how local the support is (phrases, numbers and names in the best sentence
        # and the next one rather than anywhere in the context), how much of that sentence the claim uses,
        # how much weight is missing, a negation count that differs from the aligned sentence's. Features
        # saying what *kind* of claim it is (length, language, context size) were tried and dropped: they
        # let the trees learn each training set's quirks and cost leave-one-dataset-out transfer.
        local = ctx.sent_tokens[si] if si >= 0 else frozenset()
        if si >= 0 and si + 1 < len(ctx.sent_tokens) and ctx.sent_chunk[si + 1] == ctx.sent_chunk[si]:
            local = local | ctx.sent_tokens[si + 1]
        sent_prec = full_scores.get(si, 0) / ctx.sent_weight[si] if si >= 0 and ctx.sent_weight[si] else 0.0
        neg_parity = 0.0
        if si >= 0 and cov_sent >= 0.5 and (sc.negation_count - ctx.sent_neg[si]) % 2:
            neg_parity = 1.0
        feats = [
            cov_all,
            cov_sent,
            cov_pair,
            cov_phrase,
            miss_entity,
            num_missing,
            unit_bad,
            neg_flip,
            hedge_drop,
            modal_drop,
            json_conflict,
            miss_count,
            miss_run,
            entity_swap,
            1.0 if digits_missing else 0.0,
            _phrase_support(toks, ctx, si),
            min(1.0, sent_prec),
            miss_weight,
            neg_parity,
            sum(1 for t in num_toks if t in local) / len(num_toks) if num_toks else 1.0,
            sum(1 for t in ents if t in local) / len(ents) if ents else 1.0,
        ]
        rule = None
        if digits_missing:
            rule = "number_not_in_context"
        elif unit_bad:
            rule = "unit_mismatch"
        elif neg_flip:
            rule = "negation_flip"
        elif hedge_drop:
            rule = "hedge_dropped"
        elif json_conflict:
            rule = "structured_value_conflict"
        elif entity_swap:
            rule = "entity_not_in_context"
        elif total >= 10 and cov_all == 0.0:  # not one word of what the claim adds is in the context
            rule = "nothing_in_context"
        if rule not in vetoes:  # the data did not find this rule strong enough for a hard verdict
            rule = None
        chunk_id = evidence = None
        if si >= 0:
            chunk_id, evidence = ctx.evidence(si, False)
        row_of[len(out)] = len(rows)
        pending.append((len(out), si))
        rows.append(feats)
        out.append(ClaimAnalysis(claim, False, feats, rule, 0.0, UNSUPPORTED, chunk_id, evidence))
    spread = model.prior_spread * math.log(len(pending)) if len(pending) > 1 else 0.0
    for (i, _), p in zip(pending, model.predict(rows, spread), strict=True):
        a = out[i]
        a.verdict = SUPPORTED if p >= threshold and a.rule is None else UNSUPPORTED
        a.p_supported = min(p, VETO_CAP) if a.rule is not None else p
    return out
