"""Small helpers for locating bad entries in user input, shared by the label, query-id and feature checks."""

import re

# ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses, and "+-1" passes a strip of signs.
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def int64_or_none(text):
    """The integer ``text`` writes if it is one within int64 (optional sign, ASCII digits), else None."""
    if not _INTEGER_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def is_missing(value):
    """None, NaN or pandas' NA (without importing pandas)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    try:
        return bool(value != value)  # NaN of any float type
    except (TypeError, ValueError):
        return False


def first_non_number(a):
    """Index and value of the first entry of an object array that does not convert to float (for messages).

    Only called after a vectorised conversion failed, so the Python loop runs on the error path alone.
    """
    for i, value in enumerate(a.reshape(-1)):
        try:
            float(value)
        except (TypeError, ValueError, OverflowError):
            return i, value
    return -1, None
