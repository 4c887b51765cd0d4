"""Which claims assert nothing checkable: refusals, meta statements, framing and courtesy lines.

Kept apart from the features because it is the first question the offline judge asks of a claim, and the one
a reader debugging an UNVERIFIABLE verdict comes to answer: such a claim leaves the denominator of
faithfulness rather than being scored. The patterns cover English and Chinese.

Faithfulness asks only whether a line is unverifiable (:func:`is_unverifiable`); answer relevance also asks
why (:func:`is_refusal`): a refusal does not answer the question, while a lead-in, a courtesy line or a
statement about the passages is no answer and no refusal either.
"""

from __future__ import annotations

import re

__all__ = ["is_refusal", "is_unverifiable"]

_REFUSAL_RE = re.compile(
    r"\bI (?:do not|don't|did not|didn't) know\b|\bI(?:'m| am) not (?:sure|certain|aware)\b"
    r"|\bI (?:cannot|can't|could not|couldn't|am unable to) (?:answer|determine|find|provide|say|confirm)"
    r"|\b(?:the|these|those|this|provided|given|above) (?:provided |given |retrieved )?"
    r"(?:context|passages?|documents?|sources?|texts?|information|articles?|search results?|data|reviews?)\b"
    r"[^.;:]{0,60}?\b(?:do(?:es)? not|do(?:es)?n[’']t|did not|didn[’']t|never|fails? to) "
    r"(?:explicitly |specifically |directly |clearly )?"
    r"(?:say|mention|provide|specify|contain|include|state|give|address|discuss|offer|indicate|tell|"
    r"explain|cover|have|list|reveal|answer|define|describe|detail|clarify|elaborate on|identify|show)"
    r"|\b(?:there is|there's|there are|there was) no (?:specific |additional |further |explicit |direct |"
    r"clear |relevant |detailed )?(?:information|mention|details?|data|evidence|answer)"
    r"|\bno (?:specific |relevant )?(?:information|mention|details?) (?:is|was|are|were|has been) "
    r"(?:provided|given|available|mentioned|found)"
    r"|\bnot (?:explicitly |specifically )?(?:mentioned|specified|provided|stated|available|given|discussed)"
    r" in the (?:context|passages?|documents?|text|information|sources?|reviews?|data)"
    r"|\b(?:unable to|cannot|can't|could not|couldn't) (?:be )?(?:answered|answer|determined|determine|"
    r"confirm|confirmed|verify|verified) (?:based on|from|with|using|given)"
    r"|\b(?:insufficient|not enough) information\b"
    r"|\bnone of the (?:provided |given |above )?(?:passages|documents|sources|texts|articles|reviews|contexts)\b"
    r"[^.;:]{0,40}?\b(?:provides?|mentions?|says?|contains?|gives?|discuss(?:es)?|includes?|address(?:es)?|specif(?:y|ies)"
    r"|explains?|states?)\b"
    # a fragment whose subject (the passage) was the previous claim: "…, but does not provide instructions on X"
    r"|^(?:but |however,? |and )?(?:it |they |this |that )?(?:does|do|did)(?: not|n[’']t) "
    r"(?:provide|give|offer|include|contain|mention|discuss|specify|explain) "
    r"(?:any |specific |detailed |further |more |clear |explicit |additional )*"
    r"(?:information|details?|instructions?|specifics|data|guidance|answer|steps|explanation)\b"
    r"|\b(?:it is|it's|it’s) (?:impossible|not possible) to (?:provide|give|determine|say|answer|know|tell)\b"
    r"|根据(?:现有|已有|提供的|给定的|所给的?|上述)?(?:的)?(?:信息|资料|文档|文件|上下文|内容|材料)[^。]{0,12}无法"
    r"|无法(?:确定|回答|判断|得知|找到|确认|给出)|不知道|不清楚|不确定"
    r"|(?:没有|未|并未|没)(?:提及|提到|说明|给出|提供|找到|相关信息|足够的?信息|明确)|信息不足|文档中没有|资料中没有",
    re.IGNORECASE,
)
#: Statements about the passages themselves ("Passage 3 provides the necessary information"): they answer
#: nothing and refuse nothing.
_ABOUT_PASSAGES_RE = re.compile(
    r"\b(?:passages?|documents?|sources?|context|texts?|articles?)\b[^.;:]{0,20}?\b(?:provides?|gives?|contains?"
    r"|repeats?|offers?) (?:the |all (?:the )?)?(?:same|necessary|relevant|required|needed|similar) "
    r"(?:information|details|answer)\b",
    re.IGNORECASE,
)
_COURTESY_RE = re.compile(
    r"^(?:I hope (?:this|that|these)|hope (?:this|that) helps|let me know|feel free|please (?:let|feel|note that "
    r"these)|if you have any (?:other|more|further)|thank you|thanks|good luck|enjoy|happy\b)"
    r"|希望(?:这|以上|对你)|如有(?:其他|任何)|祝你",
    re.IGNORECASE,
)
_FRAMING_RE = re.compile(
    r"^(?:sure|certainly|of course|okay|ok|absolutely|great question)\b[^.!?]{0,40}[.!:]?$"
    r"|^(?:here(?:'s| is| are)|below (?:is|are)|the following)\b[^.]{0,150}[:：]$"
    r"|^(?:based on|according to) the (?:given |provided |above )?(?:passages?|context|information|"
    r"documents?|data|text|sources?|reviews?)[^.]{0,150}[:：]$"
    r"|^[^.!?。！？]{1,60}[:：]\**$"
    # a line that announces what follows ("To make a graph, follow these steps:") asserts nothing itself;
    # with a number in it, it still might ("the steps for Windows 7:")
    r"|^[^\d.!?。！？]{1,200}[:：][*\"”']*$",
    re.IGNORECASE,
)

#: Every refusal and about-the-passages pattern contains one of these; checking them first skips the big regexes
#: for most claims.
_REFUSAL_KEYS = (
    "know", "sure", "certain", "aware", "unable", "cannot", "can't", "n't", "not", "no ", "never", "fail",
    "insufficient", "enough", "none of", "impossible", "possible", "information", "details", "answer", "无法", "不",
    "没", "未",
)  # fmt: skip


def is_unverifiable(text: str) -> bool:
    """Refusals, meta statements about the context and framing lines assert nothing checkable."""
    stripped = _stripped(text)
    low = stripped.lower()
    return (
        (_refuses(stripped, low) or (_keyed(low) and _ABOUT_PASSAGES_RE.search(stripped) is not None))
        or _FRAMING_RE.match(stripped) is not None  # every alternative is anchored at ^
        or _COURTESY_RE.search(stripped) is not None
    )


def is_refusal(text: str) -> bool:
    """Of the unverifiable lines, the ones that decline to answer ("Unable to answer based on the given passages",
    "The passages do not say when…"): answer relevance reads these as not answering, while a lead-in, a citation,
    a courtesy line or a statement about the passages ("Passage 3 provides the necessary information") says
    nothing either way (:func:`ragwatch.scoring.judges.answer_relevance.refusal_share`)."""
    stripped = _stripped(text)
    return _refuses(stripped, stripped.lower())


def _stripped(text: str) -> str:
    return text.strip().strip("*_#").strip()


def _keyed(low: str) -> bool:
    return any(k in low for k in _REFUSAL_KEYS)


def _refuses(stripped: str, low: str) -> bool:
    return _keyed(low) and _REFUSAL_RE.search(stripped) is not None
