"""argparse value types shared by the command line tools: a bad number is refused by argparse with the
option's name and the rule it breaks (exit 2), never by a traceback further in. Also the one reader of
their NAME=VALUE lists (``name_values``)."""
from __future__ import annotations

import argparse
import math


#: the longest number text taken: far beyond any value a setting has, and short of Python's limit of
#: 4300 decimal digits, past which merely printing the value in a range error would fail
MAX_NUMBER_TEXT = 64


def _short(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _parse(text: str, convert, noun: str):
    """``convert(text)``, or argparse's error naming ``noun``; a text over MAX_NUMBER_TEXT is none."""
    try:
        if len(text) > MAX_NUMBER_TEXT:
            raise ValueError
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{_short(text)}' is not {noun}") from None


def _int(text: str, base: int) -> int:
    return _parse(text, lambda t: int(t, base), "an integer")


def _at_least(text: str, base: int, lo: int, rule: str) -> int:
    v = _int(text, base)
    if v < lo:
        raise argparse.ArgumentTypeError(f"{v} {rule}")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1 (a baud rate, a count)."""
    return _at_least(text, 10, 1, "is not a positive integer")


def nonneg_int(text: str) -> int:
    """An integer >= 0 (a seed)."""
    return _at_least(text, 10, 0, "is negative")


def address(text: str) -> int:
    """A non-negative integer in any base Python reads (0x100, 256)."""
    return _at_least(text, 0, 0, "is negative")


def positive_float(text: str) -> float:
    """A finite number > 0 (a clock in MHz)."""
    v = _parse(text, float, "a number")
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return v


def name_values(items, option: str, *, valid=None, noun: str = "name", strings=(), numbers=()) -> dict:
    """``NAME=VALUE`` items (``option``'s, for the messages) as ``{NAME: VALUE}``: VALUE an integer in
    any base Python reads, the text itself for a NAME in ``strings``, or a float for a NAME in
    ``numbers`` (also after a ``POLICY:`` prefix; its range is the caller's to check); NAME one of
    ``valid`` (a ``noun``) when that is given, and given once (a repeat would otherwise silently
    win). Anything else raises CxlkvError naming the item."""
    from cxlkv.errors import CxlkvError
    out, given = {}, {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CxlkvError(f"bad {option} {item!r}: use NAME=VALUE")
        if valid is not None and name not in valid:
            raise CxlkvError(f"bad {option} {item!r}: {name!r} is not a {noun}; valid: {', '.join(valid)}")
        if name in given:
            raise CxlkvError(f"{option} {name!r} given twice ({given[name]!r}, {item!r}): give each name once")
        given[name] = item
        if name in strings:
            out[name] = value
            continue
        if len(value) > MAX_NUMBER_TEXT:
            raise CxlkvError(f"bad {option} {name}=: a value of {len(value)} characters is not a number "
                             f"(at most {MAX_NUMBER_TEXT})")
        if name.rpartition(":")[2] in numbers:
            try:
                out[name] = float(value)
            except ValueError:
                raise CxlkvError(f"bad {option} {item!r}: {value!r} is not a number") from None
            continue
        try:
            out[name] = int(value, 0)
        except ValueError:
            raise CxlkvError(f"bad {option} {item!r}: {value!r} is not an integer") from None
    return out
