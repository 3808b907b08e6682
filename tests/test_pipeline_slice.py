"""The registered stream slice (cxlkv.hdl._pipeline.StreamSlice, slice_channel) in Amaranth's simulator.

Four checks, each with a broken slice that it must catch: the scoreboard (every beat once, in
order, under random valid/ready), the flip-flop probe (no output moves while an input changes
within a cycle), the throughput count (N beats in N + 1 cycles with ready held high) and the
flush reference (under random flushes the slice holds exactly what a two-beat queue would: the
cycle after a flush shows nothing and drops what was held, keeping only a beat handed over in it).
"""
import random

import pytest
from amaranth import Module, Signal
from amaranth.hdl import Fragment
from amaranth.lib import data
from amaranth.sim import Simulator

from cxlkv.hdl._pipeline import StreamSlice, slice_channel
from cxlkv.hdl.regs import AXI4LiteSignature

BEAT = data.StructLayout({"seq": 16, "tag": 8})


class SliceWithoutSkid(StreamSlice):
    """Broken: no skid register, ``i.ready`` always high; a beat offered while ``o`` stalls is lost."""

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload)]
        return m


class SliceWithCombinationalReady(StreamSlice):
    """Broken: a plain pipeline register; loses nothing, but ``i.ready`` is ``o.ready`` through logic."""

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.i.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload)]
        return m


class HalfRateSlice(StreamSlice):
    """Broken: registered and lossless, but takes a beat only when empty (one beat per two cycles)."""

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(~self.o.valid)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.Elif(self.i.ready & self.i.valid):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(self.i.payload)]
        return m


class SliceWithBrokenFlush(StreamSlice):
    """Broken: a good skid buffer whose ``flush`` is ``flaw``: ``"ignored"`` (it does nothing),
    ``"drops the new beat"`` (the cycle after the flush also drops the beat handed over in it,
    which the source saw taken) or ``"not registered"`` (it acts in its own cycle: a beat handed
    over in the flush cycle comes out, and the sink may take a held beat the cycle after)."""

    def __init__(self, payload_shape, flaw):
        self.flaw = flaw
        super().__init__(payload_shape)

    def _shown(self, out_valid, withdraw):
        return out_valid if self.flaw == "not registered" else super()._shown(out_valid, withdraw)

    def _withdraw(self, m, withdraw, out_valid, skid_empty):
        if self.flaw == "drops the new beat":
            with m.If(withdraw):
                m.d.sync += [out_valid.eq(0), skid_empty.eq(1)]
        elif self.flaw == "not registered":
            with m.If(self.flush):
                m.d.sync += [out_valid.eq(self.i.valid & skid_empty), self.o.payload.eq(self.i.payload),
                             skid_empty.eq(1)]


def _beat(view):
    return int(view.seq), int(view.tag)


def run_random(dut, n=400, seed=1, p_valid=0.7, p_ready=0.6, drain=20, p_flush=0.0, log=None):
    """Random valid (held until taken), ready and (``p_flush``) flush; returns the offered beats, the
    beats taken in, the beats that came out, and the combinational paths seen ("<input> -> outputs":
    an output moved while only that input changed within a cycle). ``log``: a list to which each
    cycle's ``(i.ready, beat shown at o or None, beat taken in or None, output taken, flush)`` is added."""
    rng = random.Random(seed)
    beats = [(k, rng.getrandbits(8)) for k in range(n)]
    sent, received, comb_paths = [], [], set()

    def outputs(ctx):
        return ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload.as_value())

    async def bench(ctx):
        offered = None
        pending = list(beats)
        idle = 0
        while idle < drain:
            if offered is None and pending and rng.random() < p_valid:
                offered = pending.pop(0)
            valid = offered is not None
            ready = int(rng.random() < p_ready) if pending or offered else 1
            payload = offered or (rng.getrandbits(16), rng.getrandbits(8))
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.i.payload, {"seq": payload[0], "tag": payload[1]})
            flush = int(p_flush > 0 and rng.random() < p_flush)
            ctx.set(dut.flush, flush)
            # move each input alone to all-zeros, all-ones and back: a registered slice's outputs stay put
            settled = outputs(ctx)
            raw_payload = dut.i.payload.as_value()
            for name, port, value in (("i.valid", dut.i.valid, valid), ("o.ready", dut.o.ready, ready),
                                      ("i.payload", raw_payload, ctx.get(raw_payload)), ("flush", dut.flush, flush)):
                for v in (0, (1 << len(port)) - 1, value):
                    ctx.set(port, v)
                    if outputs(ctx) != settled:
                        comb_paths.add(f"{name} -> outputs")
            # the handshakes of this clock edge
            shown = _beat(ctx.get(dut.o.payload)) if ctx.get(dut.o.valid) else None
            taken = offered if valid and ctx.get(dut.i.ready) else None
            if log is not None:
                log.append((ctx.get(dut.i.ready), shown, taken, shown is not None and bool(ready), flush))
            if taken is not None:
                sent.append(offered)
                offered = None
            if shown is not None and ready:
                received.append(shown)
            idle = 0 if pending or offered or ctx.get(dut.o.valid) else idle + 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return beats, sent, received, comb_paths


def check_scoreboard(beats, sent, received):
    """Every beat offered was taken once, in order, and came out once, in order."""
    assert sent == beats, "the producer's beats were not all taken in order"
    for k, (want, got) in enumerate(zip(sent, received)):
        assert got == want, f"beat {k}: expected {want}, got {got}"
    assert len(received) == len(sent), f"{len(sent)} beats in, {len(received)} out"


def check_against_queue(log):
    """The slice against a queue of at most two beats, cycle by cycle: the slice shows the queue's
    head (or nothing, and always nothing in the cycle after a flush) and is ready while the queue
    has room; at the clock edge an output handshake pops the head, then the cycle after a flush
    empties the queue, then a beat taken in is pushed."""
    held, withdrawing = [], False
    for cycle, (ready, shown, taken, delivered, flush) in enumerate(log):
        want = held[0] if held and not withdrawing else None
        assert shown == want, f"cycle {cycle}: the slice shows {shown}, expected {want}"
        assert ready == (len(held) < 2), f"cycle {cycle}: i.ready {ready} with {len(held)} beats held"
        if delivered:
            held.pop(0)
        if withdrawing:
            held.clear()
        if taken is not None:
            held.append(taken)
        withdrawing = bool(flush)
    assert not held, f"{len(held)} beats never came out"


def flush_cases(log):
    """How often the log's flushes met each case: in the flush cycle, the output beat taken, a beat
    taken in; in the cycle after (the withdrawal), beats held (1, 2), a beat taken in."""
    held, withdrawing = 0, False
    cases = {"beat out": 0, "beat in": 0, "held 1": 0, "held 2": 0, "beat in after": 0}
    for ready, shown, taken, delivered, flush in log:
        if flush:
            cases["beat out"] += delivered
            cases["beat in"] += taken is not None
        if withdrawing:
            for name, hit in (("held 1", held == 1), ("held 2", held == 2), ("beat in after", taken is not None)):
                cases[name] += hit
        held = 0 if withdrawing else held - delivered
        held += taken is not None
        withdrawing = bool(flush)
    return cases


def run_full_rate(dut, n=16):
    """``o.ready`` held high, a new beat offered every cycle: the cycles of the input and output handshakes."""
    taken, delivered = [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        k = 0
        for cycle in range(3 * n + 4):
            ctx.set(dut.i.valid, k < n)
            ctx.set(dut.i.payload, {"seq": k, "tag": 0})
            if ctx.get(dut.o.valid):
                delivered.append((cycle, int(ctx.get(dut.o.payload).seq)))
            if k < n and ctx.get(dut.i.ready):
                taken.append((cycle, k))
                k += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return taken, delivered


def check_full_rate(taken, delivered, n=16):
    """Beat k goes in at cycle k and comes out at cycle k + 1: N beats in N + 1 cycles."""
    assert taken == [(k, k) for k in range(n)], "the input did not take a beat every cycle"
    assert delivered == [(k + 1, k) for k in range(n)], "the beats did not come out one cycle later, back to back"


@pytest.mark.parametrize("seed,p_valid,p_ready", [(1, 0.7, 0.6), (2, 1.0, 0.3), (3, 0.3, 1.0), (4, 1.0, 0.9)])
def test_slice_delivers_every_beat_once_in_order(seed, p_valid, p_ready):
    beats, sent, received, comb_paths = run_random(StreamSlice(BEAT), seed=seed, p_valid=p_valid, p_ready=p_ready)
    check_scoreboard(beats, sent, received)
    assert not comb_paths


@pytest.mark.parametrize("seed,p_valid,p_ready", [(5, 0.7, 0.6), (6, 1.0, 0.3), (7, 0.5, 1.0)])
def test_slice_flush_drops_what_it_holds_and_keeps_the_beat_coming_in(seed, p_valid, p_ready):
    log = []
    beats, sent, received, comb_paths = run_random(StreamSlice(BEAT), seed=seed, p_valid=p_valid, p_ready=p_ready,
                                                   p_flush=0.1, log=log)
    check_against_queue(log)
    assert not comb_paths
    assert sent == beats
    cases = flush_cases(log)
    if p_ready < 1:
        assert len(received) < len(sent) and all(cases.values()), cases     # some beats flushed away
    else:
        # a sink that is always ready takes each beat in the cycle it is shown: the withdrawal finds
        # only the beat handed over in the flush cycle
        assert cases["held 2"] == 0 and len(sent) - len(received) == cases["held 1"] == cases["beat in"] > 0, cases


def test_queue_reference_without_flushes_is_the_scoreboard():
    log = []
    beats, sent, received, _ = run_random(StreamSlice(BEAT), seed=8, log=log)
    check_against_queue(log)
    check_scoreboard(beats, sent, received)


def test_slice_flush_directed():
    """Two beats held, flushed: the next cycle shows nothing, then both are gone; the output beat
    taken in a flush cycle delivered, a beat handed over the cycle after kept; a beat handed over
    in the flush cycle withdrawn with the one held."""
    dut = StreamSlice(BEAT)

    async def bench(ctx):
        def offer(seq):
            ctx.set(dut.i.valid, seq is not None)
            ctx.set(dut.i.payload, {"seq": seq or 0, "tag": 0})

        def state():
            return ctx.get(dut.i.ready), (int(ctx.get(dut.o.payload).seq) if ctx.get(dut.o.valid) else None)

        for seq in (1, 2):                                  # o stalled: main and skid fill
            offer(seq)
            await ctx.tick()
        offer(None)
        assert state() == (0, 1)
        ctx.set(dut.flush, 1)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        assert state() == (0, None)                         # the withdrawal: nothing shown
        await ctx.tick()
        assert state() == (1, None)                         # both dropped
        offer(3)
        await ctx.tick()
        offer(None)
        assert state() == (1, 3)
        ctx.set(dut.flush, 1)
        ctx.set(dut.o.ready, 1)                             # 3 taken in the flush cycle: delivered
        await ctx.tick()
        ctx.set(dut.flush, 0)
        ctx.set(dut.o.ready, 0)
        assert state() == (1, None)
        offer(4)                                            # handed over in the withdrawal: kept
        await ctx.tick()
        assert state() == (1, 4)
        offer(5)                                            # handed over in a flush cycle (into the skid)
        ctx.set(dut.flush, 1)
        await ctx.tick()
        offer(None)
        ctx.set(dut.flush, 0)
        assert state() == (0, None)
        await ctx.tick()
        assert state() == (1, None)                         # 4 and 5 dropped

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("flaw,message", [("ignored", r"shows \(\d+, \d+\), expected"),
                                          ("drops the new beat", r"shows None, expected \(\d+, \d+\)"),
                                          ("not registered", r"shows \(\d+, \d+\), expected")])
def test_queue_reference_catches_a_wrong_flush(flaw, message):
    """A slice whose flush does nothing, one whose withdrawal also drops the beat coming in, and one
    whose flush acts in its own cycle (the bridge's give-up logic right on every flip-flop the flush
    steers, as before): all are good slices without flushes, and all fail the reference."""
    log = []
    beats, sent, received, comb_paths = run_random(SliceWithBrokenFlush(BEAT, flaw), seed=9)
    check_scoreboard(beats, sent, received)
    assert not comb_paths
    run_random(SliceWithBrokenFlush(BEAT, flaw), seed=5, p_flush=0.1, log=log)
    with pytest.raises(AssertionError, match=message):
        check_against_queue(log)


def test_slice_outputs_are_registered_and_full_rate():
    check_full_rate(*run_full_rate(StreamSlice(BEAT)))


def test_scoreboard_catches_a_slice_without_skid_register():
    beats, sent, received, comb_paths = run_random(SliceWithoutSkid(BEAT))
    assert not comb_paths                        # registered, so only the scoreboard can see the loss
    with pytest.raises(AssertionError, match="expected"):
        check_scoreboard(beats, sent, received)


def test_probe_catches_a_combinational_ready():
    beats, sent, received, comb_paths = run_random(SliceWithCombinationalReady(BEAT))
    check_scoreboard(beats, sent, received)      # it loses nothing: only the probe can see it
    assert comb_paths == {"o.ready -> outputs"}


def test_full_rate_check_catches_a_half_rate_slice():
    beats, sent, received, comb_paths = run_random(HalfRateSlice(BEAT))
    check_scoreboard(beats, sent, received)
    assert not comb_paths
    with pytest.raises(AssertionError, match="every cycle"):
        check_full_rate(*run_full_rate(HalfRateSlice(BEAT)))


def test_slice_channel_on_axi4lite_channels():
    """AW (master to slave) and B (slave to master) through slice_channel: fields arrive a cycle
    later under their own names, ready goes back registered."""
    master, slave = AXI4LiteSignature(12).create(), AXI4LiteSignature(12).flip().create()
    m = Module()
    aw = slice_channel(m, "aw_slice", master, slave, "awvalid", "awready", ("awaddr", "awprot"))
    b = slice_channel(m, "b_slice", slave, master, "bvalid", "bready", ("bresp",))
    assert (aw.payload_shape.size, b.payload_shape.size) == (15, 2)

    async def bench(ctx):
        ctx.set(master.awvalid, 1)
        ctx.set(master.awaddr, 0x123)
        ctx.set(master.awprot, 5)
        ctx.set(slave.bvalid, 1)
        ctx.set(slave.bresp, 2)
        assert (ctx.get(master.awready), ctx.get(slave.bready)) == (1, 1)        # both slices empty
        assert (ctx.get(slave.awvalid), ctx.get(master.bvalid)) == (0, 0)
        await ctx.tick()
        ctx.set(master.awvalid, 0)
        ctx.set(slave.bvalid, 0)
        assert (ctx.get(slave.awvalid), ctx.get(slave.awaddr), ctx.get(slave.awprot)) == (1, 0x123, 5)
        assert (ctx.get(master.bvalid), ctx.get(master.bresp)) == (1, 2)
        ctx.set(slave.awready, 1)
        ctx.set(master.bready, 1)
        await ctx.tick()
        assert (ctx.get(slave.awvalid), ctx.get(master.bvalid)) == (0, 0)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_slice_channel_passes_flush():
    """A held AW beat is withdrawn by the flush given to slice_channel; without one the slice's flush is 0."""
    master, slave = AXI4LiteSignature(12).create(), AXI4LiteSignature(12).flip().create()
    abandon = Signal()
    m = Module()
    aw = slice_channel(m, "aw_slice", master, slave, "awvalid", "awready", ("awaddr", "awprot"), flush=abandon)
    b = slice_channel(m, "b_slice", slave, master, "bvalid", "bready", ("bresp",))

    async def bench(ctx):
        ctx.set(master.awvalid, 1)
        ctx.set(slave.bvalid, 1)
        await ctx.tick()
        ctx.set(master.awvalid, 0)
        ctx.set(slave.bvalid, 0)
        assert (ctx.get(slave.awvalid), ctx.get(master.bvalid)) == (1, 1)     # held: nobody is ready
        ctx.set(abandon, 1)
        assert (ctx.get(aw.flush), ctx.get(b.flush)) == (1, 0)
        await ctx.tick()
        ctx.set(abandon, 0)
        assert (ctx.get(slave.awvalid), ctx.get(master.bvalid)) == (0, 1)     # AW withdrawn, B still held

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_slice_channel_refuses_different_widths():
    m = Module()
    with pytest.raises(TypeError, match="awaddr is 12 bits at the source, 16 at the sink"):
        slice_channel(m, "aw_slice", AXI4LiteSignature(12).create(), AXI4LiteSignature(16).flip().create(),
                      "awvalid", "awready", ("awaddr", "awprot"))
    assert not Fragment.get(m, None).subfragments       # nothing was added (and the module counts as used)
