"""The tracker's metadata region in the bench: a memory behind a read channel and a write channel."""
from __future__ import annotations

from collections import deque

from cocotb.triggers import ReadOnly, RisingEdge


class SplitChannelMemory:
    """The metadata region behind a read channel and a write channel (as an AXI4 slave has).

    ``rd`` carries {addr}; its data comes back in order on ``rd_data`` after ``latency`` ..
    ``latency + jitter`` cycles, several reads in flight (pipelined). ``wr`` carries {addr,
    wdata}. Ordering, the weakest the tracker allows: a read accepted in a later cycle than a
    write returns the written data; a read accepted in the same cycle as a write to the same
    word returns the old data. Each channel's ``ready`` is low with probability ``1 - ready_prob``.
    Unwritten words read 0.
    """

    def __init__(self, clk, rd, rd_data, wr, rd_packer, wr_packer, rng, *, ready_prob=1.0, latency=1,
                 jitter=0):
        self.clk, self.rd, self.rd_data, self.wr = clk, rd, rd_data, wr
        self.rd_pack, self.wr_pack, self.rng = rd_packer, wr_packer, rng
        self.ready_prob, self.latency, self.jitter = ready_prob, latency, jitter
        self.words: dict[int, int] = {}
        self.pending: deque = deque()           # (due cycle, data)
        self.cycle = 0
        self.reads = self.writes = 0

    def _ready(self):
        return int(self.ready_prob >= 1.0 or self.rng.random() < self.ready_prob)

    async def run(self):
        rd, rd_data, wr = self.rd, self.rd_data, self.wr
        rd.ready.value = wr.ready.value = 0
        rd_data.valid.value = 0
        while True:
            await ReadOnly()
            took_rd = bool(rd.valid.value) and bool(rd.ready.value)
            took_wr = bool(wr.valid.value) and bool(wr.ready.value)
            rd_req = self.rd_pack.unpack(int(rd.payload.value)) if took_rd else None
            wr_req = self.wr_pack.unpack(int(wr.payload.value)) if took_wr else None
            took_data = bool(rd_data.valid.value) and bool(rd_data.ready.value)
            await RisingEdge(self.clk)
            self.cycle += 1
            if took_data:
                self.pending.popleft()
            if rd_req is not None:              # before the same cycle's write: old data
                self.reads += 1
                delay = self.latency + (self.rng.randrange(self.jitter + 1) if self.jitter else 0)
                due = max(self.cycle + delay - 1, self.pending[-1][0] if self.pending else 0)
                self.pending.append((due, self.words.get(rd_req["addr"], 0)))
            if wr_req is not None:
                self.writes += 1
                self.words[wr_req["addr"]] = wr_req["wdata"]
            if self.pending and self.pending[0][0] <= self.cycle:
                rd_data.valid.value = 1
                rd_data.payload.value = self.pending[0][1]
            else:
                rd_data.valid.value = 0
            rd.ready.value = self._ready()
            wr.ready.value = self._ready()
