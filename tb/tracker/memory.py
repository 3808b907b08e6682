"""A word-addressed memory behind the tracker's request/response ports, with stalls.

Requests {addr, write, [wmask,] wdata} are accepted when ``req.ready`` is high (low with
probability ``1 - ready_prob``, in bursts); a read is answered in order on ``resp`` after
``latency`` .. ``latency + jitter`` cycles; writes are posted. Unwritten words read 0 (the
tracker's regions are zeroed before use). ``fields`` maps write-mask bits to bit ranges, so a
masked write changes only the selected fields.
"""
from __future__ import annotations

from collections import deque

from cocotb.triggers import ReadOnly, RisingEdge


class StallingMemory:
    def __init__(self, clk, req, resp, req_packer, rng, *, ready_prob=1.0, latency=1, jitter=0,
                 mask_fields=None, name="mem"):
        self.clk, self.req, self.resp, self.pack, self.rng = clk, req, resp, req_packer, rng
        self.ready_prob, self.latency, self.jitter = ready_prob, latency, jitter
        self.mask_fields = mask_fields          # [(bit, offset, width)] or None: whole word
        self.name = name
        self.words: dict[int, int] = {}
        self.pending: deque = deque()           # (due cycle, data)
        self.cycle = 0
        self.reads = self.writes = self.stall_cycles = 0

    def _write(self, addr, mask, data):
        if self.mask_fields is None:
            self.words[addr] = data
            return
        word = self.words.get(addr, 0)
        for bit, off, width in self.mask_fields:
            if mask & bit:
                f = ((1 << width) - 1) << off
                word = (word & ~f) | (data & f)
        self.words[addr] = word

    async def run(self):
        req, resp = self.req, self.resp
        req.ready.value = 0
        resp.valid.value = 0
        while True:
            await ReadOnly()
            took_req = bool(req.valid.value) and bool(req.ready.value)
            if bool(req.valid.value) and not bool(req.ready.value):
                self.stall_cycles += 1
            payload = self.pack.unpack(int(req.payload.value)) if took_req else None
            took_resp = bool(resp.valid.value) and bool(resp.ready.value)
            await RisingEdge(self.clk)
            self.cycle += 1
            if took_resp:
                self.pending.popleft()
            if payload is not None:
                if payload["write"]:
                    self.writes += 1
                    self._write(payload["addr"], payload.get("wmask", 0), payload["wdata"])
                else:
                    self.reads += 1
                    delay = self.latency + (self.rng.randrange(self.jitter + 1) if self.jitter else 0)
                    self.pending.append((self.cycle + delay, self.words.get(payload["addr"], 0)))
            if self.pending and self.pending[0][0] <= self.cycle:
                resp.valid.value = 1
                resp.payload.value = self.pending[0][1]
            else:
                resp.valid.value = 0
            req.ready.value = int(self.ready_prob >= 1.0 or self.rng.random() < self.ready_prob)
