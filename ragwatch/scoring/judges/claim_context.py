"""The retrieved chunks as the offline judge compares claims with them, computed once per sample.

Its own module because it is the index the claim features are read off (sentences, their tokens and cues, an
inverted index, the numbers and units, the polarity of structured keys), while the features themselves live
in :mod:`ragwatch.scoring.judges.claim_features`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from ragwatch.scoring.judges.text import TextAnalysis, content_tokens, token_prior
from ragwatch.scoring.judges.text_rules import approximated_numbers, entity_tokens, json_polarity, negation_scopes

__all__ = ["ClaimContext"]


def _merge_polarity(
    into: dict[tuple[str, ...], int], mixed: set[tuple[str, ...]], new: dict[tuple[str, ...], int]
) -> None:
    for tok, pol in new.items():
        if tok in into and into[tok] != pol:
            mixed.add(tok)
        into[tok] = pol


class ClaimContext:
    """Everything about the retrieved chunks the claims are compared with, computed once per sample.

    Sentences are the alignment windows; an inverted index (token → sentences) lets a claim find its
    best-aligned sentences by touching only the sentences that share a token with it.
    """

    __slots__ = (
        "all_tokens",
        "bigrams",
        "chunk_ids",
        "chunk_texts",
        "free_tokens",
        "json_pol",
        "numbers",
        "postings",
        "scopes",
        "sent_approx",
        "sent_chunk",
        "sent_modal",
        "sent_neg",
        "sent_seq",
        "sent_span",
        "sent_strong",
        "sent_tokens",
        "sent_weight",
    )

    def __init__(self, chunk_ids: list[str], chunk_texts: list[str], analyses: list[TextAnalysis]) -> None:
        self.chunk_ids = chunk_ids
        self.chunk_texts = chunk_texts
        self.sent_tokens: list[frozenset[str]] = []
        self.sent_seq: list[list[str]] = []
        self.sent_weight: list[int] = []
        self.sent_chunk: list[int] = []
        self.sent_span: list[tuple[int, int]] = []
        self.sent_neg: list[int] = []
        self.sent_strong: list[bool] = []
        self.sent_modal: list[bool] = []
        self.sent_approx: list[bool] = []
        self.postings: dict[str, list[int]] = {}
        self.bigrams: set[tuple[str, str]] = set()
        self.all_tokens: set[str] = set()
        self.numbers: dict[str, set[str | None]] = {}
        self.json_pol: dict[tuple[str, ...], int] = {}
        self.free_tokens: set[str] = set()
        #: Negation scopes per sentence, filled on first use (None: not read yet). Every claim that nearly
        #: repeats a sentence asks for them, so computing them again per claim made an answer of n repeated
        #: claims against a context of m repeated sentences cost n × m scans (20 s at the size limits).
        self.scopes: list[list[set[str]] | None] = []
        mixed: set[tuple[str, ...]] = set()
        for ci, (text, an) in enumerate(zip(chunk_texts, analyses, strict=True)):
            for mention in an.numbers:
                self.numbers.setdefault(mention.value, set()).add(mention.unit)
            pol, free_text = json_polarity(text)
            if pol:
                _merge_polarity(self.json_pol, mixed, pol)
                self.free_tokens.update(content_tokens(free_text))
            self._add_sentences(ci, an)
            if not pol:
                self.free_tokens |= self.all_tokens
        for key in mixed:
            self.json_pol.pop(key, None)
        for key in list(self.json_pol):
            if all(t in self.free_tokens for t in key):  # the free text (a review) speaks about it too
                del self.json_pol[key]

    def _add_sentences(self, ci: int, an: TextAnalysis) -> None:
        """Index the sentences of chunk ``ci`` that have a token (list-wide operations: ~50 per sample)."""
        kept = [k for k, toks in enumerate(an.tokens) if toks]
        if not kept:
            return
        first = len(self.sent_tokens)
        seqs = [an.tokens[k] for k in kept]
        sets = [frozenset(toks) for toks in seqs]
        self.sent_tokens += sets
        self.sent_seq += seqs
        self.sent_weight += [sum(map(token_prior, s)) for s in sets]  # ints: exact in any order
        self.sent_chunk += [ci] * len(kept)
        self.sent_span += [an.spans[k] for k in kept]
        self.sent_neg += [an.negations[k] for k in kept]
        self.sent_strong += [an.strong[k] for k in kept]
        self.sent_modal += [an.modal[k] for k in kept]
        self.sent_approx += [an.approx[k] for k in kept]
        self.scopes += [None] * len(kept)
        self.all_tokens.update(*sets)
        bigrams = self.bigrams
        for toks in seqs:
            bigrams.update(itertools.pairwise(toks))
        postings = self.postings
        for si, tokset in enumerate(sets, first):
            for t in tokset:
                if t in postings:
                    postings[t].append(si)
                else:
                    postings[t] = [si]

    def sentence_scores(self, claim_toks: Iterable[str], weights: dict[str, int]) -> dict[int, int]:
        """Weighted overlap of the claim with every sentence that shares at least one token with it."""
        scores: dict[int, int] = {}
        postings = self.postings
        for t in claim_toks:
            w = weights[t]
            for si in postings.get(t, ()):
                scores[si] = scores.get(si, 0) + w
        return scores

    def best_pair(self, claim_toks: set[str], weights: dict[str, int], scores: dict[int, int]) -> tuple[int, int]:
        """Best pair of adjacent sentences of one chunk, looked for around the best single sentences only.

        ``scores`` must be :meth:`sentence_scores` of the same tokens and weights: a pair's overlap is then
        the two sentences' scores less the weight of the claim tokens both contain (integers, exact).
        """
        best_p, best_pi = -1, -1
        top = sorted(scores, key=lambda i: (-scores[i], i))[:4]
        chunk_of = self.sent_chunk
        sent_tokens = self.sent_tokens
        n = len(sent_tokens)
        for si in top:
            for a in (si - 1, si):
                b = a + 1
                if a < 0 or b >= n or chunk_of[a] != chunk_of[b]:
                    continue
                both = claim_toks.intersection(sent_tokens[a], sent_tokens[b])
                sc = scores.get(a, 0) + scores.get(b, 0) - sum(map(weights.__getitem__, both))
                if sc > best_p:
                    best_p, best_pi = sc, a
        return best_p, best_pi

    def sent_approx_numbers(self, si: int) -> set[str]:
        """Numbers one sentence approximates ("about 30"), computed on demand."""
        if not self.sent_approx[si]:
            return set()
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        return approximated_numbers(self.chunk_texts[ci][s:e])

    def sent_entities(self, si: int) -> set[str]:
        """Capitalised-name tokens of one sentence, computed on demand."""
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        return entity_tokens(self.chunk_texts[ci][s:e])

    def sent_scopes(self, si: int) -> list[set[str]]:
        """Negation scopes of one sentence, computed once on demand (only twins of a claim ever need them);
        callers must not mutate them."""
        found = self.scopes[si]
        if found is None:
            found = []
            if self.sent_neg[si]:
                ci = self.sent_chunk[si]
                s, e = self.sent_span[si]
                found = negation_scopes(self.chunk_texts[ci][s:e])
            self.scopes[si] = found
        return found

    def evidence(self, si: int, pair: bool) -> tuple[str, str]:
        """Chunk id and the exact quote (a substring of that chunk) of a sentence or a sentence pair."""
        ci = self.sent_chunk[si]
        s, e = self.sent_span[si]
        if pair and si + 1 < len(self.sent_span) and self.sent_chunk[si + 1] == ci:
            e = self.sent_span[si + 1][1]
        return self.chunk_ids[ci], self.chunk_texts[ci][s:e]
