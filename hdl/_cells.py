"""Technology cells, where the mapping of a few signals sets the clock.

:func:`lut4`: one look-up table of up to four inputs, given as a truth table (a Python function
of booleans). On an ECP5 platform it is the ECP5 ``LUT4`` primitive: synthesis keeps it as
written, so logic behind it cannot be rebuilt from it and it cannot be merged with an
identical copy (a copy per group of loads shortens the routes of a signal with many loads).
Without a platform (simulation, Verilator, ``make verilog``) or on another one, the same truth
table is a sum of its minterms: the simulated logic and the cell share one table.

:func:`and_or_lut4`: the OR of pairwise ANDs (a one-hot choice) as a tree of such cells, left
at two outputs for the caller's last LUT: synthesis sees each cell's output as an input with no
delay and chains logic behind it, so a wide AND-OR behind a cell is a cell tree too.
"""
from amaranth import Cat, Const, Signal
from amaranth.hdl import Instance

__all__ = ["and_or_lut4", "lut4", "lut4_init"]


def lut4_init(fn, n_inputs):
    """The 16-bit INIT of an ECP5 ``LUT4`` computing ``fn`` of its first ``n_inputs`` inputs
    (``Z = INIT[{D, C, B, A}]``; inputs past ``n_inputs`` are tied to 0 and ignored)."""
    if not 1 <= n_inputs <= 4:
        raise ValueError(f"a LUT4 has 1 to 4 inputs, not {n_inputs}")
    init = 0
    for idx in range(16):
        if fn(*[bool(idx >> k & 1) for k in range(n_inputs)]):
            init |= 1 << idx
    return init


def lut4(m, platform, fn, inputs, name):
    """A one-bit signal ``fn(*inputs)``, one LUT (``inputs``: 1 to 4 one-bit values, the first on
    the cell's fastest input A: put the latest-arriving signal there)."""
    inputs = list(inputs)
    init = lut4_init(fn, len(inputs))
    z = Signal(name=name)
    padded = inputs + [Const(0, 1)] * (4 - len(inputs))
    if getattr(platform, "family", None) == "ecp5":
        m.submodules[name] = Instance("LUT4", p_INIT=Const(init, 16),
                                      i_A=padded[0], i_B=padded[1], i_C=padded[2], i_D=padded[3], o_Z=z)
    else:
        # (a sum of the table's minterms: plain logic that lints clean, no variable shift)
        index = Cat(*inputs)
        terms = [index == k for k in range(1 << len(inputs)) if init >> k & 1]
        m.d.comb += z.eq(Cat(*terms).any() if terms else 0)
    return z


def and_or_lut4(m, platform, pairs, name):
    """Up to two one-bit signals whose OR is the OR of ``a & b`` over ``pairs`` [(a, b), ...]:
    a LUT4 per two pairs, then OR4s until two or fewer are left (``a``, the later input, on A)."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("and_or_lut4 needs one pair or more")
    level = [lut4(m, platform, lambda a0, b0, a1=False, b1=False: (a0 and b0) or (a1 and b1),
                  [*pairs[k], *(pairs[k + 1] if k + 1 < len(pairs) else ())], name=f"{name}_and{k // 2}")
             for k in range(0, len(pairs), 2)]
    depth = 0
    while len(level) > 2:
        level = [lut4(m, platform, lambda *f: any(f), level[k:k + 4], name=f"{name}_or{depth}_{k // 4}")
                 for k in range(0, len(level), 4)]
        depth += 1
    return level
