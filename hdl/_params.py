"""Constructor parameter checks shared by the blocks: a width or count outside what the block can
build is refused with its name and value (ValueError), rather than elaborating into hardware
whose fields silently have no bits."""


def require_int(block: str, name: str, value, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in ``lo`` .. ``hi`` (no upper bound when ``hi`` is None), else ValueError
    naming ``block`` and ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in {lo} .. {hi}"
        raise ValueError(f"{block}: {name} must be an integer {bound}, got {value!r}")
    return value
