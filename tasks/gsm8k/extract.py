"""Find the final number in a model's completion and compare it with the gold answer.

Order of preference (the first that yields a number wins):

1. ``#### N``        the GSM8K marker the prompt asks for, directly followed by the number
                     (the first one: it ends an answer; ``#### Step 1`` is a heading)
2. ``\\boxed{N}``     the last box (math-tuned models)
3. ``answer is N``   the last "answer is / answer: / answer = / final answer" directly followed
                     by a number ("answer" as a verb, "to answer 34-16", does not count)
4. the last number in the text

Before that, anything from a line that starts a new turn ("Question:", "Q:", "User:", ...) is
cut off, so a model that keeps writing few-shot style examples after its answer is judged on its
own answer. Numbers may carry ``$``, ``%``, thousands commas, a sign and decimals; they are
compared exactly as rationals, never rounded (``18 == 18.0 == 18.00``, ``1,000 == 1000``,
``0.999...9 != 1`` however many nines); digit strings longer than ``MAX_DIGITS`` are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

METHODS = ("marker", "boxed", "phrase", "last", "none")

_NUMBER = re.compile(
    r"(?<![\w.])"                      # not the tail of a word or of a longer number
    r"(?P<sign>-)?\$?(?P<sign2>-)?"     # "-5", "-$5", "$-5"; "10 - 3" is not -3
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
)
_FRACTION = re.compile(r"\\d?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}|(?<![\w.])(-?\d+)\s*/\s*(\d+)\b")
_MARKER = re.compile(r"####[ \t]*(?:\*\*|\$|[ \t])*")  # then the number, on the same line
# "answer" as a noun only: followed by is/was/... or ":"/"=", or "final answer"; "she has to
# answer 34-16 = 18" uses the verb and names no answer
_PHRASE = re.compile(
    r"(?:\bfinal\s+answer\s*(?:(?:is|was|would be|will be|should be)\s*)?[:=]?"
    r"|\banswer\s*(?:(?:is|was|would be|will be|should be)\s*[:=]?|[:=]))"
    r"\s*(?:\*\*|\$|\\\(|\\\[|\s)*",
    re.IGNORECASE,
)
MAX_DIGITS = 200  # longer digit strings are not answers (and int <-> str would refuse them)
_NEW_TURN = re.compile(r"\n\s*(?:Question|Q|User|Human|Problem|Instruction)\s*:", re.IGNORECASE)
_UNICODE_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-", "\uff0d": "-"})


@dataclass(frozen=True)
class Extraction:
    """The extracted number in canonical form (``None`` when there is none) and how it was
    found (one of ``METHODS``)."""

    value: str | None
    method: str


def to_fraction(text: str) -> Fraction | None:
    """``"1,000"`` / ``"$18.00"`` / ``"-5"`` / ``"3.5"`` / ``"18%"`` / ``"7/2"`` as an exact
    rational; ``None`` if the text is not a single number."""
    text = text.strip().translate(_UNICODE_MINUS).replace(",", "").replace("$", "")
    text = text.rstrip("%").strip()
    if "/" in text:
        num, _, den = text.partition("/")
        try:
            value = Fraction(int(num.strip()), int(den.strip()))
        except (ValueError, ZeroDivisionError):
            return None
        return value
    try:
        return Fraction(Decimal(text))
    except (InvalidOperation, ValueError, OverflowError):
        return None


def canonical(value: Fraction) -> str:
    """``18``, ``-5``, ``3.5``; a fraction that has no finite decimal stays ``a/b``."""
    if value.denominator == 1:
        return str(value.numerator)
    den, places = value.denominator, 0
    for p in (2, 5):
        count = 0
        while den % p == 0:
            den //= p
            count += 1
        places = max(places, count)
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    # exact: 10**places is a multiple of the denominator (Decimal division would round to its
    # context's 28 digits, making 0.999...9 equal 1)
    digits = str(abs(value.numerator) * (10 ** places // value.denominator))
    digits = digits.rjust(places + 1, "0")
    text = (digits[:-places] + "." + digits[-places:]).rstrip("0").rstrip(".")
    return "-" + text if value < 0 else text


def normalize_number(text: str) -> str | None:
    """Canonical form of a number written as text, or ``None`` if it is not one."""
    value = to_fraction(text)
    return None if value is None else canonical(value)


def _number_at(match: re.Match | None) -> str | None:
    """The canonical number a ``_NUMBER`` match spells; None for no match or an absurdly long
    one."""
    if match is None or len(match.group("digits")) > MAX_DIGITS:
        return None
    negative = bool(match.group("sign")) != bool(match.group("sign2"))
    value = to_fraction(match.group("digits"))
    return canonical(-value if negative else value)


def _numbers(text: str) -> list[str]:
    return [n for n in map(_number_at, _NUMBER.finditer(text)) if n is not None]


def _boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` (nested braces respected), in order."""
    out = []
    for match in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[match.end():i - 1])
    return out


def _number_in_box(content: str) -> str | None:
    frac = _FRACTION.search(content)
    if frac:
        num, den = (frac.group(1), frac.group(2)) if frac.group(1) else (frac.group(3),
                                                                         frac.group(4))
        value = to_fraction(f"{num}/{den}")
        if value is not None:
            return canonical(value)
    numbers = _numbers(content.replace("{,}", ","))
    return numbers[-1] if numbers else None


def own_answer(completion: str) -> str:
    """The completion up to the first line that starts a new turn (if anything precedes it)."""
    text = completion.translate(_UNICODE_MINUS)
    for match in _NEW_TURN.finditer(text):
        if text[:match.start()].strip():
            return text[:match.start()]
    return text


def extract_answer(completion: str) -> Extraction:
    """The final numeric answer of a completion; see the module docstring for the rules."""
    text = own_answer(completion)
    for match in _MARKER.finditer(text):
        number = _number_at(_NUMBER.match(text, match.end()))
        if number is not None:  # "#### Step 1: ..." (a markdown heading) is not an answer
            return Extraction(number, "marker")
    for content in reversed(_boxed_contents(text)):
        number = _number_in_box(content)
        if number is not None:
            return Extraction(number, "boxed")
    for match in reversed(list(_PHRASE.finditer(text))):
        number = _number_at(_NUMBER.match(text, match.end()))
        if number is not None:
            return Extraction(number, "phrase")
    numbers = _numbers(text)
    if numbers:
        return Extraction(numbers[-1], "last")
    return Extraction(None, "none")


def gold_of(solution: str) -> str:
    """The gold number of a GSM8K-style solution (the text after its last ``####``), canonical.
    Raises ValueError when there is no marker or it is not followed by a single number."""
    if "####" not in solution:
        raise ValueError(f"solution has no '#### <number>' line: {solution[-80:]!r}")
    tail = solution.rsplit("####", 1)[1].strip()
    value = normalize_number(tail)
    if value is None:
        raise ValueError(f"'#### {tail}' is not a number")
    return value


def is_correct(extracted: str | None, gold: str) -> bool:
    """Numeric equality of two canonical (or raw) number strings."""
    if extracted is None:
        return False
    a, b = to_fraction(extracted), to_fraction(gold)
    return a is not None and b is not None and a == b


def score_completion(completion: str, gold: str) -> float:
    """1.0 when the completion's final number equals ``gold``, else 0.0."""
    return 1.0 if is_correct(extract_answer(completion).value, gold) else 0.0
