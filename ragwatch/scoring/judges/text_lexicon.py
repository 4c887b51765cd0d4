"""The word lists and tables the offline judge's tokeniser reads: stopwords, CJK function characters,
month and number-word spellings, and the units a number may carry.

Apart from the tokenising code (:mod:`ragwatch.scoring.judges.text_scan`) because they are data, edited on their
own ("add a unit", "drop a stopword") and long; the code that uses them reads better without them between
its functions.
"""

from __future__ import annotations

import re

__all__ = ["CJK_FUNCTION", "MONTHS", "NUMBER_WORDS", "SCALES", "STOPWORDS", "UNITS", "UNIT_ALT", "wordset"]


def wordset(text: str) -> frozenset[str]:
    """A word list written as text (easier to read and to edit than a list of string literals)."""
    return frozenset(text.split())


STOPWORDS = wordset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves will just may might must shall also s t don now ever never however
    although though thus therefore etc eg ie vs via per yes one's get got gets getting
    """
)

#: CJK characters that carry grammar, not content; a bigram of two of them says nothing about a topic.
CJK_FUNCTION = frozenset("的了是在和与及或也都就而且并被把对为于以之其这那些个有中上下等着过吗呢吧啊从向将会让给所")

MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}
NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "thirteen": "13",
    "fourteen": "14",
    "fifteen": "15",
    "sixteen": "16",
    "seventeen": "17",
    "eighteen": "18",
    "nineteen": "19",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
    "hundred": "100",
}


UNITS = {
    "%": "%",
    "percent": "%",
    "per cent": "%",
    "‰": "‰",
    "km": "km",
    "kilometers": "km",
    "kilometres": "km",
    "kilometer": "km",
    "m": "m",
    "meters": "m",
    "metres": "m",
    "meter": "m",
    "cm": "cm",
    "mm": "mm",
    "kg": "kg",
    "kilograms": "kg",
    "g": "g",
    "grams": "g",
    "mg": "mg",
    "lb": "lb",
    "lbs": "lb",
    "pounds": "lb",
    "miles": "mile",
    "mile": "mile",
    "feet": "ft",
    "ft": "ft",
    "foot": "ft",
    "inches": "in",
    "inch": "in",
    "hours": "hour",
    "hour": "hour",
    "hrs": "hour",
    "minutes": "minute",
    "minute": "minute",
    "min": "minute",
    "seconds": "second",
    "second": "second",
    "days": "day",
    "day": "day",
    "weeks": "week",
    "week": "week",
    "months": "month",
    "month": "month",
    "years": "year",
    "year": "year",
    "million": "million",
    "billion": "billion",
    "trillion": "trillion",
    "thousand": "thousand",
    "gb": "gb",
    "mb": "mb",
    "tb": "tb",
    "ghz": "ghz",
    "mhz": "mhz",
    "℃": "°c",
    "°c": "°c",
    "°f": "°f",
    "degrees": "degree",
    "万": "万",
    "亿": "亿",
    "千": "千",
    "公里": "km",
    "千米": "km",
    "米": "m",
    "厘米": "cm",
    "公斤": "kg",
    "千克": "kg",
    "克": "g",
    "斤": "斤",
    "吨": "吨",
    "元": "元",
    "美元": "usd",
    "dollars": "usd",
    "usd": "usd",
    "$": "usd",
    "欧元": "eur",
    "euros": "eur",
    "€": "eur",
    "英镑": "gbp",
    "£": "gbp",
    "人民币": "cny",
    "rmb": "cny",
    "岁": "year_old",
    "years old": "year_old",
    "小时": "hour",
    "分钟": "minute",
    "秒": "second",
    "天": "day",
    "周": "week",
    "个月": "month",
    "年": "year",
    "倍": "times",
    "times": "times",
    "stars": "star",
    "star": "star",
    "am": "time",
    "pm": "time",
    "a.m.": "time",
    "p.m.": "time",
}
UNIT_ALT = "|".join(sorted((re.escape(u) for u in UNITS if u not in "$€£"), key=len, reverse=True))
SCALES = ("million", "billion", "trillion", "thousand")
