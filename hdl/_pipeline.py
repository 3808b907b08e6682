"""Pipeline helpers.

:class:`LockstepPipeline`: control of a pipeline whose stages all move together (shared by
scoring and quant). Every stage advances when the output register is empty or being read;
backpressure stops all stages at once. ``i.ready = advance & accept`` (``accept`` gates the
input, e.g. while configuration settles), and a stage's valid bit follows its event.

:class:`StreamSlice`, :func:`slice_channel`: a registered slice (skid buffer) on a valid/ready
channel, to cut every combinational path between two blocks (the UART bridge and the
controller on the board), with a synchronous ``flush`` that withdraws the beats it holds.
"""
from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out


class LockstepPipeline:
    def __init__(self, m, stages, i, o, accept=1):
        self.m = m
        self.valid = Signal(stages)          # valid[k]: stage k+1 holds an event
        self.advance = Signal()
        m.d.comb += [
            self.advance.eq(~self.valid[-1] | o.ready),
            i.ready.eq(self.advance & accept),
            o.valid.eq(self.valid[-1]),
        ]
        with m.If(self.advance):
            m.d.sync += self.valid.eq(Cat(i.valid & i.ready, self.valid[:-1]))

    def on_advance(self, *stmts):
        """Register ``stmts`` when the pipeline moves."""
        with self.m.If(self.advance):
            self.m.d.sync += list(stmts)

    def carry(self, src, name):
        """Register ``src`` into the next stage (moves with the pipeline)."""
        dst = Signal.like(src, name=name)
        self.on_advance(dst.eq(src))
        return dst


class StreamSlice(wiring.Component):
    """Registered slice of a stream: ``o.payload`` and ``i.ready`` are flip-flops, ``o.valid`` is
    one gated only by another (the registered flush): nothing combinational crosses the slice.

    One cycle of latency, one beat per cycle sustained. ``i.ready`` is "the skid register is
    empty", known a cycle ahead, so a beat offered while ``o`` stalls is taken into the skid
    register; ``i.ready`` then drops until the output register has taken it back.

    ``flush`` withdraws the beats the slice holds, a cycle later: it is registered inside the
    slice (so the source's decision to flush, and the route to the slice, end at one flip-flop
    instead of at every flip-flop the flush steers). In the cycle a flush comes in the slice works
    as usual; in the next one it shows nothing (``o.valid`` low: the output flip-flop gated by the
    registered flush) and drops, at its end, every beat it held at that cycle's start: the output
    beat taken by the sink in the flush cycle is delivered, a beat handed over in the flush cycle
    is withdrawn with the rest, a beat handed over in the cycle after is kept (``i.ready`` is a
    flip-flop, so the slice cannot refuse it there). Withdraw what was handed over up to the
    flush, never what comes after it.
    """

    def __init__(self, payload_shape):
        self.payload_shape = payload_shape
        super().__init__({"i": In(stream.Signature(payload_shape)), "o": Out(stream.Signature(payload_shape)),
                          "flush": In(1)})

    def elaborate(self, platform):
        m = Module()
        skid_payload = Signal(self.payload_shape)
        skid_empty = Signal(init=1)
        out_valid = Signal()                             # the output register holds a beat
        withdraw = Signal()                              # the flush, registered: this cycle drops
        m.d.sync += withdraw.eq(self.flush)
        m.d.comb += [self.i.ready.eq(skid_empty), self.o.valid.eq(self._shown(out_valid, withdraw))]
        # The skid register copies the input whenever it is empty (its content is then unused), so
        # its enable is the flip-flop ``skid_empty`` rather than the sink's ``ready`` through the
        # stall decision: on the board that decision → the skid register's enable crossed the
        # chip twice (the UART bridge's event slice, in front of the controller's event gate).
        with m.If(skid_empty):
            m.d.sync += skid_payload.eq(self.i.payload)
        with m.If(~self.o.valid | self.o.ready):         # the output register is free: refill it
            m.d.sync += [out_valid.eq(~skid_empty | self.i.valid),
                         self.o.payload.eq(Mux(skid_empty, self.i.payload, skid_payload)),
                         skid_empty.eq(1)]
        with m.Elif(self.i.valid & skid_empty):          # output stalled, input beat taken: keep it
            m.d.sync += skid_empty.eq(0)
        self._withdraw(m, withdraw, out_valid, skid_empty)
        return m

    # The flush's two effects, apart so that the tests' broken slices vary only these
    # (tests/test_pipeline_slice.py)
    def _shown(self, out_valid, withdraw):
        """``o.valid``: the output register's beat, hidden in the cycle that withdraws it."""
        return out_valid & ~withdraw

    def _withdraw(self, m, withdraw, out_valid, skid_empty):
        """A withdrawal drops what is held and keeps the beat taken now, which the refill put in
        the output register (a withdrawn output is free). Added after the refill, so it wins, and
        apart from it so that a flush left at 0 folds away (an If/Elif chain on a constant lints
        CASEOVERLAP)."""
        with m.If(withdraw):
            m.d.sync += [out_valid.eq(self.i.valid & skid_empty), skid_empty.eq(1)]


def slice_channel(m, name, src, dst, valid, ready, payload, flush=None):
    """Put a :class:`StreamSlice` (submodule ``name``) on a channel of flat signals: ``src.<valid>``
    and the ``src.<payload>`` members reach ``dst``'s members of the same names a cycle later,
    ``dst.<ready>`` reaches ``src.<ready>`` (e.g. the AW channel of an AXI4-Lite master and slave).
    ``flush``: a 1-bit value driving the slice's ``flush`` (none: never flushed)."""
    fields = {}
    for f in payload:
        fields[f] = getattr(src, f).shape()
        if len(getattr(dst, f)) != fields[f].width:
            raise TypeError(f"{name}: {f} is {fields[f].width} bits at the source, {len(getattr(dst, f))} at the sink")
    m.submodules[name] = s = StreamSlice(data.StructLayout(fields))
    m.d.comb += [s.i.valid.eq(getattr(src, valid)), getattr(src, ready).eq(s.i.ready),
                 getattr(dst, valid).eq(s.o.valid), s.o.ready.eq(getattr(dst, ready))]
    if flush is not None:
        m.d.comb += s.flush.eq(flush)
    for f in payload:
        m.d.comb += [s.i.payload[f].eq(getattr(src, f)), getattr(dst, f).eq(s.o.payload[f])]
    return s
