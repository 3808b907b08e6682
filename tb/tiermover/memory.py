"""A line-addressed tier memory (DRAM or flash) behind the tier mover's request/response ports.

Requests {addr, write, wdata} are accepted when ``req.ready`` is high (low with probability
``1 - ready_prob``, in bursts of mean ``burst``); requests execute in acceptance order: a read
returns the data as of its acceptance (after every earlier write) and is answered in order on
``resp`` after ``latency`` .. ``latency + jitter`` cycles; writes are posted. ``words`` holds real
data (unwritten lines read 0); the bench's host writes it directly (``words[addr] = v``).
``on_request(write, addr, data)`` sees every accepted request (the scoreboards' monitor); with
``rst`` given, nothing is sampled while it is high (a DUT left busy by an earlier test).
"""
from __future__ import annotations

from collections import deque

from cocotb.triggers import ReadOnly, RisingEdge


class TierMemory:
    def __init__(self, clk, req, resp, req_packer, rng, *, ready_prob=1.0, burst=1, latency=1, jitter=0,
                 name="mem", words=None, on_request=None, rst=None):
        self.clk, self.req, self.resp, self.pack, self.rng = clk, req, resp, req_packer, rng
        self.rst = rst                          # handshakes while it is high are not requests
        self.ready_prob, self.burst, self.latency, self.jitter = ready_prob, burst, latency, jitter
        self.name = name
        self.words: dict[int, int] = dict(words or {})
        self.on_request = on_request
        self.pending: deque = deque()           # (due cycle, data)
        self.inject: deque = deque()            # responses nobody asked for (protocol tests)
        self.cycle = 0
        self.reads = self.writes = self.stall_cycles = 0
        self._hold = 0

    @property
    def quiet(self) -> bool:
        return not self.pending and not self.inject

    async def run(self):
        req, resp = self.req, self.resp
        req.ready.value = 0
        resp.valid.value = 0
        offering = None
        while True:
            await ReadOnly()
            in_reset = self.rst is not None and bool(self.rst.value)
            took_req = bool(req.valid.value) and bool(req.ready.value) and not in_reset
            if bool(req.valid.value) and not bool(req.ready.value) and not in_reset:
                self.stall_cycles += 1
            payload = self.pack.unpack(int(req.payload.value)) if took_req else None
            took_resp = bool(resp.valid.value) and bool(resp.ready.value)
            if payload is not None:
                if self.on_request is not None:
                    self.on_request(payload["write"], payload["addr"], payload["wdata"])
                if payload["write"]:
                    self.writes += 1
                    self.words[payload["addr"]] = payload["wdata"]
                else:
                    self.reads += 1
                    delay = self.latency + (self.rng.randrange(self.jitter + 1) if self.jitter else 0)
                    due = max(self.cycle + delay, self.pending[-1][0] if self.pending else 0)
                    self.pending.append((due, self.words.get(payload["addr"], 0)))
            await RisingEdge(self.clk)
            self.cycle += 1
            if took_resp:
                if offering == "inject":
                    self.inject.popleft()
                else:
                    self.pending.popleft()
            if self.inject:
                offering = "inject"
                resp.valid.value = 1
                resp.payload.value = self.inject[0]
            elif self.pending and self.pending[0][0] <= self.cycle:
                offering = "read"
                resp.valid.value = 1
                resp.payload.value = self.pending[0][1]
            else:
                offering = None
                resp.valid.value = 0
            if self._hold:
                self._hold -= 1
                req.ready.value = 0
            elif self.ready_prob >= 1.0 or self.rng.random() < self.ready_prob:
                req.ready.value = 1
            else:
                self._hold = self.rng.randrange(0, 2 * self.burst - 1) if self.burst > 1 else 0
                req.ready.value = 0
