"""Numbers in English and Chinese text, read so that two ways of writing one number compare
equal: thousands separators, full-width digits, 万/亿 and Chinese numerals before a unit, English
number words and ordinals (``three`` = ``3``, ``third`` = ``3rd`` = ``3``, ``twenty-one`` =
``21``) and scale words (``2.5 million`` = ``2,500,000``, ``$1.2 billion`` = ``1200000000``).

Some words are numbers only sometimes: "one of the reasons", "first, open the tray", "wait a
second". Read ``lenient``ly, a text offers every reading (``one`` is also 1, ``5 million`` also
5); read strictly, it claims only the numbers it surely states. A claim's strict numbers must be
among the lenient numbers of its evidence.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rag_bench.text.scripts import fold_width, has_han

# A number, with the letters glued before it when it is a code (IPX4, LM-E7, R300: a changed
# code is a changed fact), and 万/亿 after it (50万 = 500000).
NUMBER = re.compile(r"(?<![a-z])([a-z]*)(\d+(?:[.,:]\d+)*)(?:\s*([万亿]))?")
# Chinese numerals before a unit (七天, 十五个工作日, 三到五个工作日), after 第 or 百分之.
# (一点 "a little" is why 点 is no unit.)
CN_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
CN_POWERS = {"十": 10, "百": 100, "千": 1000}
CN_SECTIONS = {"万": 10**4, "亿": 10**8}
CN_NUMERAL = re.compile("[零〇一二两三四五六七八九十百千万亿]+")
CN_UNIT = re.compile(
    "(?:[到至或~～\\-－][零〇一二两三四五六七八九十百千万亿]+)?"
    "(?:工作日|小时|分钟|星期|季度|周年|公里|公斤|千克|厘米|毫米|毫升|"
    "[天日周月年岁时分秒个次件份位名人元块角倍成折条项章节款页层号步种类台部辆张本箱瓶包斤克吨米升度级期届笔单遍码寸])"
)


def cn_numeral(text: str) -> int:
    """The value of a Chinese numeral: 七 7, 十五 15, 二十 20, 一百零五 105, 两万五千 25000,
    and digit by digit 二〇二五 2025. (Colloquial 三千五 for 3500 reads as 3005.)"""
    if len(text) > 1 and all(c in CN_DIGITS for c in text):
        return int("".join(str(CN_DIGITS[c]) for c in text))
    total = section = digit = 0
    for char in text:
        if char in CN_DIGITS:
            digit = CN_DIGITS[char]
        elif char in CN_POWERS:
            section += (digit or 1) * CN_POWERS[char]
            digit = 0
        else:
            total += (section + digit) * CN_SECTIONS[char]
            section = digit = 0
    return total + section + digit


def _cn_numbers(text: str) -> set[str]:
    found = set()
    for match in CN_NUMERAL.finditer(text):
        run, before = match.group(), text[: match.start()]
        if before.endswith(("第", "百分之")):
            found.add(str(cn_numeral(run)))
        elif run == "一" or not any(c in CN_DIGITS or c == "十" for c in run):
            continue  # 一 is mostly "a" (一个, 一种); 百, 万, 千万 alone are no count
        elif (
            run == "十"
            and text.startswith("分", match.end())
            and not text.startswith("分钟", match.end())
        ):
            continue  # 十分 is "very" (十分方便), 十分钟 ten minutes
        elif CN_UNIT.match(text, match.end()):
            found.add(str(cn_numeral(run)))
    return found


UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINAL_UNITS = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
WORD_VALUES = {
    **{w: i for i, w in enumerate(UNITS)},
    **{w: 20 + 10 * i for i, w in enumerate(TENS)},
    **{w: i for i, w in enumerate(ORDINAL_UNITS)},
    **{w[:-1] + "ieth": 20 + 10 * i for i, w in enumerate(TENS)},
}
SCALES = {"hundred": 100, "thousand": 10**3, "million": 10**6, "billion": 10**9}
SCALES |= {"trillion": 10**12, "hundredth": 100, "thousandth": 10**3, "millionth": 10**6}
# Words that are often no number: "one of them", "first, ...", "a second"; "zero" as in "zero
# tolerance". Only a lenient reading counts them alone.
AMBIGUOUS = frozenset({"zero", "zeroth", "one", "first", "second"})
NUMBER_WORD = "|".join(sorted({*WORD_VALUES, *SCALES}, key=len, reverse=True))
# A run of number words ("two hundred and five", "twenty-first"), or digits before a scale
# word ("2.5 million", "1,200 billion").
WORD_RUN = re.compile(
    rf"\b(?:{NUMBER_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{NUMBER_WORD}))*\b"
    rf"|(?<![\w.,])(\d+(?:,\d{{3}})*(?:\.\d+)?)\s*(hundred|thousand|million|billion|trillion)\b"
)


SPACED_CODE = re.compile(r"(?<![\w.-])([a-z]*[a-z][0-9]?)[ \u00a0](\d+)(?![\d.,]*\d)")


def _word_value(words: list[str]) -> int:
    """The value of number words: units and tens add up, a scale multiplies what came before
    (two hundred and five 205, three million two hundred thousand 3200000)."""
    total = current = 0
    for word in words:
        if word in SCALES:
            if SCALES[word] == 100:
                current = (current or 1) * 100
            else:
                total += (current or 1) * SCALES[word]
                current = 0
        else:
            current += WORD_VALUES[word]
    return total + current


def _canonical(value: Decimal) -> str:
    """A value as ``numbers`` writes it: an integer without a point, else as a decimal."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _english_numbers(text: str, lenient: bool) -> tuple[set[str], str]:
    """Numbers written in words or with a scale word, and the text with them blanked out (so
    that the digits of ``2.5 million`` are not read again as 2.5)."""
    found: set[str] = set()

    def read(match: re.Match) -> str:
        if match.group(1):
            mantissa = match.group(1).replace(",", "")
            try:
                found.add(_canonical(Decimal(mantissa) * SCALES[match.group(2)]))
            except InvalidOperation:
                return match.group()
            if lenient:
                found.add(mantissa)
            return " " * len(match.group())
        words = [w for w in re.split(r"[\s-]+", match.group()) if w != "and"]
        if len(words) == 1 and words[0] in AMBIGUOUS and not lenient:
            return match.group()
        if len(words) == 1 and words[0] in SCALES:
            return match.group()  # "hundreds of", "a thousand thanks": no count
        enumerates = words[0] in ORDINAL_UNITS and text.startswith(",", match.end())
        if len(words) == 1 and enumerates and not lenient:
            return match.group()  # "Third, mix the flour": an enumeration, not a count
        found.add(str(_word_value(words)))
        return " " * len(match.group())

    return found, WORD_RUN.sub(read, text)


def numbers(text: str, lenient: bool = False) -> set[str]:
    """Numbers in a text, thousands separators removed (1,200 == 1200), full-width digits read
    as digits (７ == 7), codes whole (IPX4 → ipx4, so IPX5 is another number), 万 and 亿 applied
    (50万 → 500000), and Chinese numerals that count something (七天, 第三条, 百分之十 → 7, 3,
    10). Chinese numerals inside words (一起, 统一, 万一) are not numbers. English number words
    and ordinals are read as their value (three, third → 3), and a scale word multiplies
    (2.5 million → 2500000); ``lenient`` adds the readings that are only sometimes numbers (one,
    first, second; 5 of "5 million"; tio2 of "TiO 2")."""
    text = fold_width(text).lower()
    found, text = _english_numbers(text, lenient)
    for code, digits, scale in NUMBER.findall(text):
        number = re.sub(r",(?=\d{3}\b)", "", digits)
        if scale and not code and re.fullmatch(r"\d+(?:\.\d+)?", number):
            value = float(number) * CN_SECTIONS[scale]
            number = str(int(value)) if value.is_integer() else str(value)
        found.add(code + number)
    if has_han(text):
        found |= _cn_numbers(text)
    if lenient:  # a code written apart: "TiO 2" is TiO2, "KS 440" is KS440
        found |= {"".join(m) for m in SPACED_CODE.findall(text)}
    return found
