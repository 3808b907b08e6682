"""Constructor parameter checks shared by the blocks: a width or count outside what the block can
build is refused with its name and value (ValueError), rather than elaborating into hardware
whose fields silently have no bits.

A component refused in its constructor is never elaborated, and Amaranth would warn about an
unused elaboratable when it is collected (an error under the test suite's -W error): a refusal
silences that warning for the object it refused."""
from contextlib import contextmanager


def _silence(component) -> None:
    component._MustUse__silence = True          # refused, never built: no unused-elaboratable warning


def _refuse(owner, message: str, error: type[Exception]):
    block = owner if isinstance(owner, str) else type(owner).__name__
    if not isinstance(owner, str):
        _silence(owner)
    raise error(f"{block}: {message}")


def require_int(owner, name: str, value, lo: int, hi: int | None = None, *,
                error: type[Exception] = ValueError) -> int:
    """``value`` as an int in ``lo`` .. ``hi`` (no upper bound when ``hi`` is None), else ``error``
    (a ValueError, or the block's own subclass of it) naming the block and ``name``. A bool is not
    an integer here. ``owner``: the component being constructed, or a block's name (a helper class
    of the block's, checked inside a constructor that uses ``refusals``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in {lo} .. {hi}"
        _refuse(owner, f"{name} must be an integer {bound}, got {value!r}", error)
    return value


def require_bool(owner, name: str, value, *, error: type[Exception] = ValueError) -> bool:
    """``value`` if it is a bool, else ``error`` naming the block and ``name`` (a string such as
    'no' would otherwise be taken as True)."""
    if not isinstance(value, bool):
        _refuse(owner, f"{name} must be True or False, got {value!r}", error)
    return value


@contextmanager
def refusals(component):
    """Around a constructor's checks: any exception they raise silences the unused-elaboratable
    warning of ``component``, which will never be built."""
    try:
        yield
    except Exception:
        _silence(component)
        raise
