"""Is a short answer what the question's own context says? The one reading that tells the right director
from another film's.

Why: a short answer ("Christopher Nolan", "武汉", "On the first working day.") is read by its type alone
(:mod:`ragwatch.scoring.judges.answer_relevance`), and an unrelated answer of the right type — the director
of another film, the city of another games — carries the same type, so every correct short answer shared
the unrelated-answer score. No reference-free check of the answer alone can tell them apart; the retrieved
chunks can: the right director is named in a chunk about *this* film, near its title, and another film's
director is not. So a short answer is **grounded** when what it adds to the question (its content tokens
the question lacks: the name, the number, the date) sits in one sentence of a chunk, at least
:data:`FOUND_SHARE` of that weight and every number of it, and the window of that sentence and its
neighbours (:data:`WINDOW` either side, one chunk) is on the question's topic: it holds at least
:data:`TOPIC_SHARE` of the question's content weight and every name the question gives (its capitalised
words, 《titles》, Latin names in Chinese text: "Halvorsen" *and* "Bridge", so the Tellby Bridge's designer is
not the Halvorsen Bridge's). Words anywhere in the context are not enough: a number said about another topic
("answered within 2 working days" in the software section, asked when a laptop arrives) sits in a window
that does not hold the question.

The three numbers are set a priori, not on the dev files. The window's share was checked on training data
only: on SelQA's articles (``../shared/data/train/relevance/selqa.jsonl``) the window around an answer
sentence holds half the question's weight for 79 % of the answers and for 26 % of the article's other
sentences — of the shares 0.3 to 0.6, 0.5 separates them best (Youden's J).

Only a lift: an answer the context does not hold keeps the score its type gave it. Whether an answer is
*true to* the context is faithfulness's question, and reading it down here would count a hallucination a
second time, as off topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragwatch.scoring.judges.text import TextAnalysis, token_prior

__all__ = ["FOUND_SHARE", "TOPIC_SHARE", "WINDOW", "grounded"]

#: Share of the answer's own content weight that one sentence must hold (every number of it, too).
FOUND_SHARE = 0.75
#: Share of the question's content weight the window around that sentence must hold.
TOPIC_SHARE = 0.5
#: Sentences either side of the answer's sentence that count as near it (within its chunk).
WINDOW = 1


def _weight(tokens: set[str] | frozenset[str]) -> int:
    return sum(map(token_prior, tokens))


def grounded(
    question_tokens: set[str], entities: Sequence[set[str]], answer_tokens: set[str], context: Sequence[TextAnalysis]
) -> bool | None:
    """Whether the answer's own content sits in an on-topic window of a chunk (module docstring).

    ``None`` when there is nothing to look for or nowhere to look: no chunk text, a question without
    content words, or an answer that only repeats the question's words."""
    own = answer_tokens - question_tokens
    if not own or not question_tokens or not any(ta.tokens for ta in context):
        return None
    own_weight = _weight(own)
    numbers = {t for t in own if t[0] == "#"}
    q_weight = _weight(question_tokens)
    for ta in context:
        sentences: list[set[str]] | None = None
        for i, toks in enumerate(ta.tokens):
            held = own.intersection(toks)
            if not numbers <= held or _weight(held) < FOUND_SHARE * own_weight:
                continue
            if sentences is None:
                sentences = [set(t) for t in ta.tokens]
            window = set().union(*sentences[max(0, i - WINDOW) : i + WINDOW + 1])
            if not all(e & window for e in entities):
                continue
            if _weight(question_tokens & window) >= TOPIC_SHARE * q_weight:
                return True
    return False
