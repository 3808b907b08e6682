"""A tier memory model in gateware: a ``lib.memory`` RAM behind the tier mover's memory port with a
latency set at run time (a helper of the controller top, not a block; docs/controller.md).

The tier mover (hdl/tiermover.py, docs/tiermover.md "Memory ports") expects of each port: a
request moves on ``valid & ready``; requests execute in acceptance order (a read returns the data
of every write accepted before it); reads are answered in order, with any latency; writes are
posted (no answer). :class:`TierMemory` is exactly that, synthesizable, so the controller top can
hold device DRAM and flash stand-ins of a small line size and the harness can run the whole
decision -> movement path at Verilator speed.

Timing: a read accepted in cycle t is answered (``resp.valid``) from cycle t + 2 + ``latency``
on (the RAM's synchronous read and the answer FIFO take the 2), held until ``resp.ready``;
answers keep request order. ``latency`` (an input, e.g. a register) may change at any time: a
read takes the value of the cycle it is accepted in. At most ``max_reads`` reads wait for their
answer; ``req.ready`` falls while that many do (writes wait then too: one request order).

Ports: ``req`` (in stream: ``addr``, ``write``, ``wdata``), ``resp`` (out stream: the line),
``latency`` (in, ``latency_bits``). The RAM starts zeroed (``init``: optional initial lines).
"""
from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from cxlkv.errors import CxlkvError


class TierMemoryError(CxlkvError, ValueError):
    """A tier memory that cannot be built."""


def _bits(n):
    return max(1, (n - 1).bit_length())


class TierMemory(wiring.Component):
    """``depth`` lines of ``line_bits``; ``addr_bits`` wide addresses (at least enough for ``depth``;
    an address at or beyond ``depth`` is not checked and reads an undefined line: the tier mover
    only makes in-range addresses); ``max_reads`` (power of two >= 2) answers in flight;
    ``latency_bits`` wide ``latency`` (cycles added to the minimum of 2)."""

    def __init__(self, depth, line_bits, addr_bits=None, max_reads=8, latency_bits=8, init=()):
        try:
            addr_bits = self._check(depth, line_bits, addr_bits, max_reads, latency_bits, init)
        except TierMemoryError:
            self._MustUse__silence = True        # never built: no unused-elaboratable warning
            raise
        self.depth, self.line_bits, self.addr_bits = depth, line_bits, addr_bits
        self.max_reads, self.latency_bits, self.init = max_reads, latency_bits, list(init)
        self.req_layout = data.StructLayout({"addr": addr_bits, "write": 1, "wdata": line_bits})
        super().__init__({
            "req": In(stream.Signature(self.req_layout)),
            "resp": Out(stream.Signature(line_bits)),
            "latency": In(latency_bits),
        })

    @staticmethod
    def _check(depth, line_bits, addr_bits, max_reads, latency_bits, init):
        def whole(v):                        # an int, not a bool (True would build one line)
            return isinstance(v, int) and not isinstance(v, bool)
        if not whole(depth) or depth < 1:
            raise TierMemoryError(f"tier memory: depth must be a positive integer, got {depth!r}")
        if not whole(line_bits) or line_bits < 1:
            raise TierMemoryError(f"tier memory: line_bits must be a positive integer, got {line_bits!r}")
        addr_bits = _bits(depth) if addr_bits is None else addr_bits
        if not whole(addr_bits) or addr_bits < _bits(depth):
            raise TierMemoryError(f"tier memory: {addr_bits!r} address bits cannot reach {depth} lines")
        if not whole(max_reads) or max_reads < 2 or max_reads & (max_reads - 1):
            raise TierMemoryError(f"tier memory: max_reads must be a power of two >= 2, got {max_reads!r}")
        if not whole(latency_bits) or not 1 <= latency_bits <= 14:
            raise TierMemoryError(f"tier memory: latency_bits must be in 1 .. 14, got {latency_bits!r}")
        if len(init) > depth:
            raise TierMemoryError(f"tier memory: {len(init)} initial lines for a depth of {depth}")
        return addr_bits

    def elaborate(self, platform):
        m = Module()
        m.submodules.ram = ram = Memory(shape=self.line_bits, depth=self.depth, init=self.init)
        rd = ram.read_port()                 # synchronous: the line one cycle after the request
        wr = ram.write_port()
        R = self.max_reads
        # the time a read may be answered: a free-running 32-bit cycle count, compared modulo 2^32
        # (an answer left untaken for 2^31 cycles would read as not due again)
        tb = 32
        now = Signal(tb)
        m.d.sync += now.eq(now + 1)

        # answers waiting, in order: {due, line}, a ring of R (written at t + 1, read combinationally)
        m.submodules.answers = fifo = Memory(shape=data.StructLayout({"due": tb, "line": self.line_bits}),
                                             depth=R, init=[])
        fwr = fifo.write_port()
        frd = fifo.read_port(domain="comb")
        head = Signal(range(R))
        tail = Signal(range(R))
        waiting = Signal(range(R + 1))       # reads accepted, not yet answered (in the RAM or the ring)
        stored = Signal(range(R + 1))        # answers in the ring

        req = self.req
        take = Signal()
        rd_take = Signal()
        m.d.comb += [req.ready.eq(waiting != R), take.eq(req.valid & req.ready),
                     rd_take.eq(take & ~req.payload.write),
                     rd.addr.eq(req.payload.addr), rd.en.eq(rd_take),
                     wr.addr.eq(req.payload.addr), wr.data.eq(req.payload.wdata),
                     wr.en.eq(take & req.payload.write)]

        # the read's line arrives one cycle later: into the ring with its due time
        pend = Signal()
        pend_due = Signal(tb)
        m.d.sync += [pend.eq(rd_take), pend_due.eq(now + 2 + self.latency)]
        m.d.comb += [fwr.addr.eq(tail), fwr.data.due.eq(pend_due), fwr.data.line.eq(rd.data), fwr.en.eq(pend)]

        with m.If(pend):
            m.d.sync += tail.eq(tail + 1)        # R is a power of two: the pointers wrap

        # the head answer, once due (now - due, modulo 2^tb, in the lower half)
        head_line = frd.data
        due = Signal()
        m.d.comb += [frd.addr.eq(head), due.eq(((now - head_line.due)[:tb] >> (tb - 1)) == 0),
                     self.resp.valid.eq((stored != 0) & due), self.resp.payload.eq(head_line.line)]
        pop = Signal()
        m.d.comb += pop.eq(self.resp.valid & self.resp.ready)
        with m.If(pop):
            m.d.sync += head.eq(head + 1)
        m.d.sync += [stored.eq(stored + pend - pop), waiting.eq(waiting + rd_take - pop)]
        return m
