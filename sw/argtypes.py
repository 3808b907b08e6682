"""argparse value types shared by the command line tools: a bad number is refused by argparse with the
option's name and the rule it breaks (exit 2), never by a traceback further in."""
from __future__ import annotations

import argparse
import math


def _int(text: str, base: int) -> int:
    try:
        return int(text, base)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (a baud rate, a count)."""
    v = _int(text, 10)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not a positive integer")
    return v


def nonneg_int(text: str) -> int:
    """An integer >= 0 (a seed)."""
    v = _int(text, 10)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def address(text: str) -> int:
    """A non-negative integer in any base Python reads (0x100, 256)."""
    v = _int(text, 0)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0 (a clock in MHz)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return v
