"""Control of a pipeline whose stages all move together (shared by scoring and quant).

Every stage advances when the output register is empty or being read; backpressure
stops all stages at once. ``i.ready = advance & accept`` (``accept`` gates the input,
e.g. while configuration settles), and a stage's valid bit follows its event.
"""
from amaranth import Cat, Signal


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
