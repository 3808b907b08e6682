"""hdl/_cells.py: lut4's truth table, the plain logic it simulates as, and the ECP5 cell it
becomes on a board."""
import itertools

import pytest
from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.sim import Simulator

from cxlkv.hdl._cells import and_or_lut4, lut4, lut4_init


def _ecp5_lut4(init, a, b, c, d):
    """The ECP5 LUT4 as Yosys's cells_sim models it: a mux tree D, C, B, A over INIT."""
    s3 = (init >> 8) & 0xFF if d else init & 0xFF
    s2 = (s3 >> 4) & 0xF if c else s3 & 0xF
    s1 = (s2 >> 2) & 0x3 if b else s2 & 0x3
    return (s1 >> 1) & 1 if a else s1 & 1


def _mask_bit(f, t, e):                 # the tracker's rewritten-slot bit: early | (take_first & first)
    return e or (t and f)


FUNCTIONS = [
    (_mask_bit, 3),
    (lambda a, b, c, d: (a ^ b) and not (c and d), 4),
    (lambda a: not a, 1),
    (lambda a, b: a and not b, 2),
]


@pytest.mark.parametrize("fn,n", FUNCTIONS)
def test_init_is_the_function_on_the_ecp5_cell(fn, n):
    init = lut4_init(fn, n)
    for bits in itertools.product([0, 1], repeat=4):
        assert _ecp5_lut4(init, *bits) == int(bool(fn(*bits[:n]))), bits


def test_init_with_the_inputs_in_the_wrong_order_fails_the_check():
    # negative: the same table read with A as the most significant bit is another function
    init = lut4_init(_mask_bit, 3)
    wrong = [_ecp5_lut4(init, d, c, b, a) for a, b, c, d in itertools.product([0, 1], repeat=4)]
    right = [int(_mask_bit(a, b, c)) for a, b, c, d in itertools.product([0, 1], repeat=4)]
    assert wrong != right


@pytest.mark.parametrize("n", [0, 5])
def test_input_count_out_of_range_is_an_error(n):
    with pytest.raises(ValueError, match="1 to 4 inputs"):
        lut4_init(lambda *a: True, n)


@pytest.mark.parametrize("fn,n", FUNCTIONS)
def test_plain_logic_without_a_platform(fn, n):
    m = Module()
    ins = [Signal(name=f"i{k}") for k in range(n)]
    z = lut4(m, None, fn, ins, name="z")
    sim = Simulator(m)

    async def bench(ctx):
        for bits in itertools.product([0, 1], repeat=n):
            for s, b in zip(ins, bits):
                ctx.set(s, b)
            assert ctx.get(z) == int(bool(fn(*bits))), bits

    sim.add_testbench(bench)
    sim.run()


class _ECP5:
    family = "ecp5"


def test_an_ecp5_cell_on_an_ecp5_platform():
    m = Module()
    ins = [Signal(name=f"i{k}") for k in range(3)]
    out = Signal()
    m.d.comb += out.eq(lut4(m, _ECP5(), _mask_bit, ins, name="bit"))
    text = rtlil.convert(m, ports=[*ins, out])
    assert "cell \\LUT4 " in text
    assert f"parameter \\INIT 16'{lut4_init(_mask_bit, 3):016b}" in text
    # without the platform, no cell: plain logic
    m2 = Module()
    out2 = Signal()
    m2.d.comb += out2.eq(lut4(m2, None, _mask_bit, ins, name="bit"))
    assert "LUT4" not in rtlil.convert(m2, ports=[*ins, out2])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16])
def test_and_or_is_the_or_of_the_pairs(n):
    import random
    m = Module()
    a = [Signal(name=f"a{k}") for k in range(n)]
    b = [Signal(name=f"b{k}") for k in range(n)]
    outs = and_or_lut4(m, None, list(zip(a, b)), name="ao")
    assert 1 <= len(outs) <= 2
    z = Signal()
    m.d.comb += z.eq(outs[0] if len(outs) == 1 else outs[0] | outs[1])
    rng = random.Random(n)
    # every single pair alone, none, and random words (a one-hot a, as the tracker's first, and any)
    cases = [(1 << k, (1 << n) - 1) for k in range(n)] + [(0, (1 << n) - 1)]
    cases += [(rng.getrandbits(n), rng.getrandbits(n)) for _ in range(200)]
    sim = Simulator(m)

    async def bench(ctx):
        for wa, wb in cases:
            for k in range(n):
                ctx.set(a[k], wa >> k & 1)
                ctx.set(b[k], wb >> k & 1)
            assert ctx.get(z) == int(wa & wb != 0), (wa, wb)

    sim.add_testbench(bench)
    sim.run()


def test_and_or_on_an_ecp5_platform_is_a_cell_tree():
    m = Module()
    pairs = [(Signal(name=f"a{k}"), Signal(name=f"b{k}")) for k in range(16)]
    outs = and_or_lut4(m, _ECP5(), pairs, name="ao")
    z = Signal()
    m.d.comb += z.eq(outs[0] | outs[1])
    text = rtlil.convert(m, ports=[*[s for p in pairs for s in p], z])
    assert text.count("cell \\LUT4 ") == 8 + 2      # two pairs per cell, then two OR4s
    # the pair cell: (A & B) | (C & D), the first pair's a on A
    assert f"parameter \\INIT 16'{lut4_init(lambda a0, b0, a1, b1: (a0 and b0) or (a1 and b1), 4):016b}" in text


def test_and_or_with_no_pair_is_an_error():
    m = Module()
    with pytest.raises(ValueError, match="one pair or more"):
        and_or_lut4(m, None, [], name="ao")
    rtlil.convert(m, ports=[])          # (the module stays usable: nothing was added to it)
