"""Small helpers for locating bad entries in user input, shared by the label, query-id and feature checks."""


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
        except (TypeError, ValueError):
            return i, value
    return -1, None
