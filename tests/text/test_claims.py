from __future__ import annotations

import pytest

from rag_bench.model import Claim
from rag_bench.text.claims import is_refusal, split_claims


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            "Returns within 7 days [d1]. Fresh food is excluded [d2].",
            [("Returns within 7 days.", ("d1",)), ("Fresh food is excluded.", ("d2",))],
        ),
        ("A fee applies [d1][d2].", [("A fee applies.", ("d1", "d2"))]),
        ("A fee applies [d1, d2].", [("A fee applies.", ("d1", "d2"))]),
        (
            "Returns within 7 days. [d1] Fresh food excluded. [d2][d3]",
            [("Returns within 7 days.", ("d1",)), ("Fresh food excluded.", ("d2", "d3"))],
        ),
        (
            "first part [d1]. at roughly 1 minute [d2].",
            [("first part.", ("d1",)), ("at roughly 1 minute.", ("d2",))],
        ),
        (
            "No citation here. Version 6.2.1 is current [d9].",
            [("No citation here.", ()), ("Version 6.2.1 is current.", ("d9",))],
        ),
        (
            "签收7天内可退货【d1】。生鲜商品除外【d2】。",
            [("签收7天内可退货。", ("d1",)), ("生鲜商品除外。", ("d2",))],
        ),
        ("Repeated [d1][d1].", [("Repeated.", ("d1",))]),
    ],
)
def test_split_claims(answer, expected):
    assert split_claims(answer) == [Claim(text, cites) for text, cites in expected]


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I can't answer that from the available documents.",
        "I cannot answer this question.",
        "The documents don't say how long that takes.",
        "The provided documents do not mention it.",
        "There is not enough information to answer.",
        "无法回答。",
        "我不知道。",
    ],
)
def test_refusals_are_recognised(answer):
    assert is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Returns are accepted within 7 days [d1].",
        "I know the deadline: 7 days [d1].",
        "Nothing in the box is fragile [d2].",
    ],
)
def test_answers_are_not_refusals(answer):
    assert not is_refusal(answer)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            "Use a certified drive, e.g. Seagate IronWolf [d1]. It works [d2].",
            ["Use a certified drive, e.g. Seagate IronWolf.", "It works."],
        ),
        (
            "Dr. Smith signs it in Jan. 2024 [d1]. Then wait.",
            ["Dr. Smith signs it in Jan. 2024.", "Then wait."],
        ),
        (
            "J. R. Smith and the U.S. Army agreed. Done.",
            ["J. R. Smith and the U.S. Army agreed.", "Done."],
        ),
        ("Version 3.5 is out. It costs 5.25 USD.", ["Version 3.5 is out.", "It costs 5.25 USD."]),
        (
            "Steps: 1. Open the tray. 2. Insert the drive.",
            ["Open the tray.", "Insert the drive."],  # "Steps:" heads a list, the numbers number it
        ),
        (
            "Form No. 7 applies. He said no. Later.",
            ["Form No. 7 applies.", "He said no.", "Later."],
        ),
        ("The limit is 5. Then it stops.", ["The limit is 5.", "Then it stops."]),
    ],
)
def test_abbreviations_initials_decimals_dates_and_list_items_stay_whole(answer, expected):
    assert [c.text for c in split_claims(answer)] == expected


# Each case is the kind of answer an LLM writes over retrieved passages, in the words of the
# verdicts that motivated the rule (issue 26): list numbers read as facts, meta sentences judged
# as claims, lower-case text never split, "[citation needed]" stripped as a citation.
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            "Here are the steps:\n4. Whisk the eggs [d1].\n5. Mix 1 tsp baking soda into flour.",
            [("Whisk the eggs.", ("d1",)), ("Mix 1 tsp baking soda into flour.", ())],
        ),
        (
            "- Fresh food is excluded [d1]\n* Opened items cost 10% [d2]",
            [("Fresh food is excluded", ("d1",)), ("Opened items cost 10%", ("d2",))],
        ),
        (
            "Based on the provided passages, the restocking fee is 10% [d1]. I hope this helps!",
            [("The restocking fee is 10%.", ("d1",))],
        ),
        (
            "According to the context, tariffs rose in 2019 [d1]. The documents state that "
            "prices fell [d2]. Let me know if you have any other questions.",
            [("Tariffs rose in 2019.", ("d1",)), ("Prices fell.", ("d2",))],
        ),
        (
            "Sure! Here is what I found:\nThe office opens at 9 [d1].",
            [("The office opens at 9.", ("d1",))],
        ),
        (
            "the fee is 10% [d1]. returns take 30 days. see the u.s. rules, e.g. this one.",
            [
                ("the fee is 10%.", ("d1",)),
                ("returns take 30 days.", ()),
                ("see the u.s. rules, e.g. this one.", ()),
            ],
        ),
        (
            "The band split in 1999 [citation needed]. It reformed later [d1, d2].",
            [
                ("The band split in 1999 [citation needed].", ()),
                ("It reformed later.", ("d1", "d2")),
            ],
        ),
        (
            "The restocking fee is 10% of\nthe item price [d1].\nReturns take 30 days.",
            [
                ("The restocking fee is 10% of the item price.", ("d1",)),
                ("Returns take 30 days.", ()),
            ],
        ),
        (
            "See [the guide](https://example.org) for more [d3].",
            [("See [the guide](https://example.org) for more.", ("d3",))],
        ),
    ],
)
def test_list_numbers_meta_sentences_and_non_markers_are_no_claims(answer, expected):
    assert split_claims(answer) == [Claim(text, cites) for text, cites in expected]


def test_a_chinese_lead_in_about_the_sources_is_no_claim():
    answer = "根据提供的资料，签收7天内可退货【d1】。生鲜商品除外【d2】。"
    expected = [("签收7天内可退货。", ("d1",)), ("生鲜商品除外。", ("d2",))]
    assert split_claims(answer) == [Claim(text, cites) for text, cites in expected]
