"""The facts task's rule check for free-form answers: does a response state the asked fact?

:mod:`thinkj.synthetic.fact_task` reads back only its own templated responses (``what_it_says``). A policy answering the
questions writes whatever it likes ("Nairobi is the capital city of Kenya.", "There are 7 days in a week"), so
this check looks for values instead of templates: a response **states the fact** when it names the right value and
no other value of the same family (naming two capitals is a hedge, not an answer). Numbers count as words or
digits ("seven" = "7", "twenty-four" = "24"). A refusal or an answer to another question names no right value.
"""

from __future__ import annotations

import re

from thinkj.synthetic.fact_task import FAMILIES, Fact

NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "six": 6, "seven": 7, "eight": 8, "twelve": 12, "twenty-four": 24,
                "twenty-six": 26, "sixty": 60}


def _pattern(value: str) -> re.Pattern[str]:
    forms = [re.escape(value)]
    if value in NUMBER_WORDS:
        forms += [str(NUMBER_WORDS[value]), re.escape(value.replace("-", " "))]
    # word boundaries that also respect hyphens: "cock-a-doodle-doo" must not count as "doo", "seventy" not "seven"
    return re.compile(rf"(?<![\w-])(?:{'|'.join(forms)})(?![\w-])", re.IGNORECASE)


_PATTERNS = {value: _pattern(value) for _, _, table in FAMILIES.values() for value in table.values()}


def values_named(response: str, fact: Fact) -> list[str]:
    """The values of the fact's family that the response names, in the family table's order."""
    values = list(dict.fromkeys(FAMILIES[fact.family][2].values()))
    found, text = set(), response
    for value in sorted(values, key=len, reverse=True):  # longest first: "twenty four" is not also "four"
        if _PATTERNS[value].search(text):
            found.add(value)
            text = _PATTERNS[value].sub(" ", text)
    return [v for v in values if v in found]


def states_fact(response: str, fact: Fact) -> bool:
    """The rule check: the response names the right value and no other value of its family."""
    return values_named(response, fact) == [fact.value]


def answer_kind(response: str, fact: Fact) -> str:
    """What a response does with the asked fact: right / wrong value / several values / no value."""
    named = values_named(response, fact)
    if named == [fact.value]:
        return "right"
    if len(named) > 1:
        return "several values"
    return "wrong value" if named else "no value"
