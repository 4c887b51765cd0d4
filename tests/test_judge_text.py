"""The offline judge's text analysis on hand-made sentences: hedges, ranges, times, negation scopes, JSON keys."""

from __future__ import annotations

from ragwatch.scoring.judges.text import analyse_text, sentence_spans
from ragwatch.scoring.judges.text_rules import entity_tokens, json_polarity, negation_reach, negation_scopes
from ragwatch.scoring.judges.text_scan import scan


def test_an_approximator_must_stand_right_before_its_number() -> None:
    assert scan("The survey reached about 3,000 households.").approx_numbers == {"#3000"}
    assert scan("He reached over 4,300 pounds.").approx_numbers == {"#4300"}
    # "about" is the blog's topic here, not an approximation of 100
    assert scan('He decided to blog about "100 Days of Rejection".').approx_numbers == set()


def test_a_range_is_imprecise_itself() -> None:
    assert scan("Bake for 6 to 8 minutes.").ranged
    assert scan("Cook for 4-6 minutes.").ranged
    assert not scan("Bake for 8 minutes at 300 degrees.").ranged
    assert not scan("Reviewed on 2022-01-18.").ranged  # a date is no range


def test_twelve_hour_times_read_as_a_24_hour_clock() -> None:
    assert [m.value for m in scan("Open from 7 am to 5:30 pm.").numbers] == ["#7:00", "#17:30"]
    assert [m.value for m in scan('"Monday": "7:0-17:30"').numbers] == ["#7:00", "#17:30"]
    assert "#12:00" in scan("Lunch starts at 12 p.m. sharp").tokens
    assert "#2012" in scan("launched on May 15, 2012.12:01 AM PST").tokens  # a date run into a time


def test_dotted_acronyms_and_unit_names() -> None:
    assert scan("the U.S. military").tokens == scan("the US military").tokens
    assert entity_tokens("It was 58 degrees Fahrenheit in Sausalito.") == {"sausalito"}


def test_a_word_also_said_plainly_is_not_negated() -> None:
    both = "Nonessential amino acids can be made by the body, while essential amino acids cannot be made by the body."
    assert negation_scopes(both) == [set()]
    assert negation_scopes("The stone bridge over the river is not 120 meters long.") == [{"#120", "meter", "long"}]


def test_negation_scope_stops_at_its_clause() -> None:
    [scope] = negation_scopes("The organs are not physically connected as they are discrete in nature.")
    assert "discret" not in scope and "connect" in scope
    assert negation_scopes("It is not as big as the other one.") == [{"big"}]
    assert negation_scopes("People on the no-fly list can appeal.") == []
    # "neither … nor" is one negation, like "didn't … or"
    assert len(negation_scopes("a letter that neither confirmed nor denied it")) == 1


def test_negation_reach_over_lists_and_copulas() -> None:
    negated, unclear = negation_reach("They do not offer reservations, outdoor seating, or music.")
    assert "reservation" in negated and {"outdoor", "seat", "music"} <= unclear
    negated, unclear = negation_reach("The bar offers outdoor seating, and WiFi is not currently available.")
    assert "wifi" in negated and "outdoor" in unclear  # a list before the comma may or may not be negated
    negated, _ = negation_reach("Valet and garage parking are not available.")
    assert {"valet", "garag"} <= negated
    assert negation_reach("Open every day.") == (set(), set())


def test_json_keys_are_whole_and_only_settings_have_polarity() -> None:
    record = (
        '{"name": "Cafe", "state": "CA", "attributes": {"OutdoorSeating": false, "WiFi": "u\'free\'", '
        '"RestaurantsTakeOut": true, "Alcohol": "u\'none\'", "Music": null, "hours": {"Monday": "7:0-17:0"}}}'
    )
    polarity, _ = json_polarity(record)
    assert polarity == {("outdoor", "seat"): -1, ("wifi",): 1, ("takeout",): 1, ("alcohol",): -1, ("music",): 0}
    assert "takeout" in scan("They offer take-out.").tokens and "takeout" in scan("Takeout only").tokens


# The judge reads a chunk's sentences as ranges of the chunk and words-only text in bulk (for speed); both
# must give exactly what scanning each sentence's own text word by word gives.
_EDGE_TEXTS = [
    "It takes about\nan hour. They plan\nto go. The price went up by about. 30 came; 5-6 left.",  # no state across
    "They plan to. Open the U.S. office in 2024! Next, if you plan to visit, call.",
    "There is no-fly zone here. No. The no\n-smoking sign. It is not open; it can't be.",
    'Wi-Fi and e-mail. {"WiFi": "no", "NoiseLevel": "u\'quiet\'"}, {"take-out": true}',
    "预计明年约1200万人。没有\n30左右！不断增长。It may be about an hour. Around half came.",
    "Stop!Next sentence starts here. e.g. the plan. Fewer than 5 left. He expected 3 km.",
    "A. B. 5. $ 5 is about 5 dollars. Nearly a dozen. At least 10:30 pm. almost some ten.",
]


def test_analyse_text_equals_scanning_each_sentence_alone() -> None:
    for text in _EDGE_TEXTS:
        an = analyse_text(text)
        alone = [scan(text[s:e]) for s, e in sentence_spans(text)]
        assert an.spans == sentence_spans(text)
        assert an.tokens == [sc.tokens for sc in alone], text
        assert an.negations == [sc.negation_count for sc in alone], text
        assert an.strong == [sc.strong for sc in alone], text
        assert an.modal == [sc.modal for sc in alone], text
        assert an.approx == [sc.approx for sc in alone], text
        assert an.numbers == [m for sc in alone for m in sc.numbers], text


def test_the_words_only_pass_agrees_with_the_full_one() -> None:
    # positions=True always takes the full pass; without, words-only text takes the bulk one
    words_only = [
        "They plan to open it. If you plan to go, they are scheduled for noon and poised to win.",
        "It is not open, there is no-fly zone and no one can't say; nobody came.",
        "Reportedly it may open, possibly about an hour later, around half of them, over a dozen.",
        "The U.S. office and the e-mail and Wi-Fi are new, the check-in is late.",
    ]
    for text in words_only + _EDGE_TEXTS:
        fast, full = scan(text), scan(text, positions=True)
        assert (fast.tokens, fast.negation_count, fast.strong, fast.modal, fast.approx) == (
            full.tokens,
            full.negation_count,
            full.strong,
            full.modal,
            full.approx,
        ), text
        assert (fast.numbers, fast.approx_numbers, fast.ranged) == (full.numbers, full.approx_numbers, full.ranged)
    assert scan(words_only[0]).strong and not scan("If you plan to go.").strong
    assert scan(words_only[1]).negation_count == 4  # "no-fly" negates nothing
    assert scan(words_only[2]).approx and scan(words_only[2]).modal and scan(words_only[2]).strong
