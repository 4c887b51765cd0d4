"""The quote shown for a SUPPORTED claim: a sentence that supports it, not merely one that shares a word.

The claim features align a claim with the context on the words the claim *adds* to the question (restating
the question is not a hallucination), and break ties by rank. For a claim that mostly restates the question
that can be one generic word: "Software may only be installed from the company software portal." (asked
"How do I install software that is not in the software portal?") adds only "company", and the first sentence
holding it was "Hotels are booked through the company travel platform." from the chunk ranked first, while
the right one sat at rank 3. The verdict was right; the card was not, and one such card costs the evidence
column its trust. So, after the verdicts, each SUPPORTED claim's quote is settled here:

1. **The sentence** that holds most of what the claim adds, then most of the whole claim (question words
   included), then the earliest: the software claim's own sentence, never the hotel one.
2. **One chunk that holds it.** The quote must be an alignment the claim would still be supported by if its
   chunk were the only one, so its chunk must hold every word the claim takes from the context. When it does
   not (the words are spread over chunks), the best sentence of a chunk that does is quoted instead; when no
   chunk does, the judge reads the claim against each chunk alone (best first) and quotes the first one it
   still supports. A claim no single chunk supports was pieced together from several: it is reported
   UNSUPPORTED — the judge cannot show its support, and a reader could not check it.
3. **No quote at all**: a claim none of whose words occur in any sentence was supported only because it
   had nothing to check (its words were the question's or about the passages). Words about the passages
   and citation numbers only ("(Passage 1)", "This is mentioned in passage 2."): UNVERIFIABLE, like the meta
   lines they are. Anything else ("Anne Frank completed more books.", the question's words as an answer the
   context never mentions): UNSUPPORTED, ``nothing_in_context``. A claim with no word to align at all
   ("中") keeps the verdict the model gave its features.

Only verdicts of SUPPORTED claims can change, and only to UNSUPPORTED or UNVERIFIABLE: an answer's
faithfulness never rises here. ``ragwatch.scoring.evidence_check`` measures the result on labelled files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragwatch.scoring.judges.claim_context import ClaimContext
from ragwatch.scoring.judges.claim_features import _META, SUPPORTED, UNSUPPORTED, UNVERIFIABLE, VETO_CAP, ClaimAnalysis
from ragwatch.scoring.judges.claims import mask_inline_code
from ragwatch.scoring.judges.text import content_tokens, token_prior

__all__ = ["Reanalyse", "settle_evidence"]

#: The claim analyses of the answer against one chunk alone (by its index in the context), same claim order.
Reanalyse = Callable[[int], Sequence[ClaimAnalysis]]
#: The rule a claim supported only by several chunks together carries (no single chunk shows its support).
PIECED = "no_single_chunk"
#: The claim features' rule for a claim none of whose words occur in the context.
NOTHING_IN_CONTEXT = "nothing_in_context"


def settle_evidence(
    analyses: Sequence[ClaimAnalysis], ctx: ClaimContext, question_toks: set[str], reanalyse: Reanalyse
) -> None:
    """Settle the quote (``chunk_id``, ``evidence``) of every SUPPORTED claim in place (module docstring).

    ``reanalyse`` is called at most once per chunk, and only for claims whose words no single chunk holds."""
    alone: dict[int, Sequence[ClaimAnalysis]] = {}
    chunk_tokens: list[set[str]] | None = None
    # A repeated claim (same text, so same verdict and P) settles as its first reading did: an answer of one
    # sentence repeated to the size limit costs one alignment, not one per copy (issue 29, item 6).
    settled: dict[str, ClaimAnalysis] = {}
    for i, a in enumerate(analyses):
        if a.verdict != SUPPORTED:
            if not a.unverifiable:  # what settling would find, were it supported (read by threshold sweeps)
                a.settle = _unquotable(a, ctx)
            continue
        first = settled.get(a.claim.text)
        if first is not None:
            a.verdict, a.rule, a.p_supported, a.unverifiable, a.settle = (
                first.verdict,
                first.rule,
                first.p_supported,
                first.unverifiable,
                first.settle,
            )
            a.chunk_id, a.evidence = first.chunk_id, first.evidence
            continue
        settled[a.claim.text] = a
        toks, weights = _words(a)
        if not toks:  # "中", "U.S.": no word to align, the model's verdict on its features stands
            continue
        own = (toks - question_toks) or toks
        added = ctx.sentence_scores(own, weights)
        whole = ctx.sentence_scores(toks, weights)
        if not whole:
            a.settle = _nothing_or_meta(toks)
            if a.settle == "nothing":  # it names things the context never mentions
                a.verdict, a.rule, a.p_supported = UNSUPPORTED, NOTHING_IN_CONTEXT, min(a.p_supported, VETO_CAP)
            else:  # only words about the passages, and citation numbers
                a.unverifiable, a.verdict, a.chunk_id, a.evidence = True, UNVERIFIABLE, None, None
            continue

        def order(si: int) -> tuple[int, int, int]:
            return (-added.get(si, 0), -whole[si], si)  # noqa: B023 - used within this iteration only

        si = min(whole, key=order)
        needed = own & ctx.all_tokens
        if chunk_tokens is None:
            chunk_tokens = _chunk_tokens(ctx)
        if not needed <= chunk_tokens[ctx.sent_chunk[si]]:
            holders = [s for s in whole if needed <= chunk_tokens[ctx.sent_chunk[s]]]
            if holders:
                si = min(holders, key=order)
            else:
                si = _first_supported(i, sorted(whole, key=order), ctx, alone, reanalyse)
                if si < 0:
                    a.unverifiable, a.verdict, a.chunk_id, a.evidence = True, UNVERIFIABLE, None, None
                    a.rule, a.settle = PIECED, "pieced"
                    continue
        a.chunk_id, a.evidence = ctx.evidence(si, False)


def _words(a: ClaimAnalysis) -> tuple[set[str], dict[str, int]]:
    """The claim's content words (inline code masked) and the weight of each in an alignment."""
    toks = set(content_tokens(mask_inline_code(a.claim.text)))
    return toks, {t: token_prior(t) for t in toks}


def _nothing_or_meta(toks: set[str]) -> str:
    """Why a claim none of whose words occur in the context has no quote: it names things the context never
    mentions (``"nothing"``), or only speaks about the passages and cites them (``"meta"``)."""
    return "nothing" if {t for t in toks if t[0] != "#"} - _META else "meta"


def _unquotable(a: ClaimAnalysis, ctx: ClaimContext) -> str | None:
    """For a claim that is not SUPPORTED: ``"nothing"`` / ``"meta"`` when no sentence holds any of its words
    (what settling would make of it were it supported), else None. Whether it would be pieced does not
    change whether an answer is flagged (pieced claims end SUPPORTED or UNVERIFIABLE), so it is not read."""
    toks, weights = _words(a)
    if not toks or ctx.sentence_scores(toks, weights):
        return None
    return _nothing_or_meta(toks)


def _chunk_tokens(ctx: ClaimContext) -> list[set[str]]:
    out: list[set[str]] = [set() for _ in ctx.chunk_ids]
    for toks, ci in zip(ctx.sent_tokens, ctx.sent_chunk, strict=True):
        out[ci].update(toks)
    return out


def _first_supported(
    i: int,
    ranked: Sequence[int],
    ctx: ClaimContext,
    alone: dict[int, Sequence[ClaimAnalysis]],
    reanalyse: Reanalyse,
) -> int:
    """Of the sentences ``ranked`` best first, the first whose chunk alone still supports claim ``i`` (each
    chunk read once, at its best sentence), or -1 when no chunk does."""
    tried: set[int] = set()
    for si in ranked:
        ci = ctx.sent_chunk[si]
        if ci in tried:
            continue
        tried.add(ci)
        if ci not in alone:
            alone[ci] = reanalyse(ci)
        if alone[ci][i].verdict == SUPPORTED:
            return si
    return -1
