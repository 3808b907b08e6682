"""Shared pieces of the cocotb benches: parameters, packing, stream driver/monitor, scoreboard, metrics.

The shape follows cocotb's own examples: a driver pushes stimulus into the
DUT; a monitor samples every completed handshake (in the ReadOnly phase, so
it sees what the DUT sees at the clock edge); input transactions go through
the golden model into an expected queue; output transactions are checked
against it in order by :class:`InOrderScoreboard`.
"""
from __future__ import annotations

import json
import os
import random
import warnings
from collections import deque
from dataclasses import dataclass, field

from cxlkv.sw.transport import BusError, Transport


# Third-party bus models (cocotbext-axi, cocotb-bus) still call APIs cocotb 2.x
# deprecates. Those warnings are not ours to fix; every other warning stays an
# error under `make test` (PYTHONWARNINGS=error reaches the simulator).
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(cocotbext|cocotb_bus)(\.|$)")


def params() -> dict:
    """The DUT's constructor parameters, as the runner passed them."""
    return json.loads(os.environ.get("CXLKV_PARAMS", "{}"))


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def test_rng(default_seed: int = 1) -> random.Random:
    """Stimulus RNG: seeded from CXLKV_SEED (or cocotb's seed) so a failure can be replayed."""
    seed = os.environ.get("CXLKV_SEED")
    if seed is None:
        import cocotb
        seed = getattr(cocotb, "RANDOM_SEED", default_seed)
    return random.Random(int(seed))


def report_metric(name: str, value: float, unit: str, config: dict | None = None):
    """Hand a measured figure to the runner (and so to ``make bench``)."""
    out = os.environ.get("CXLKV_METRICS_OUT")
    if not out:
        return
    with open(out, "a") as f:
        f.write(json.dumps({"name": name, "value": value, "unit": unit, "config": config or {}}) + "\n")


class Packer:
    """Packs dicts into the integer a StructLayout port carries, and back.

    Offsets come from the Amaranth layout itself, the one source of truth for
    the bit layout of every stream payload.
    """

    def __init__(self, layout):
        self.fields = [(name, f.offset, f.width) for name, f in layout]
        self.width = layout.size

    def pack(self, values: dict) -> int:
        word = 0
        for name, off, width in self.fields:
            v = values[name]
            if not 0 <= v < (1 << width):
                raise ValueError(f"field {name}={v} does not fit {width} bits")
            word |= v << off
        return word

    def unpack(self, word: int) -> dict:
        return {name: (word >> off) & ((1 << width) - 1) for name, off, width in self.fields}


class StreamPort:
    """Handles of one ``lib.stream`` port as Amaranth flattens it (``<name>__valid`` ...)."""

    def __init__(self, dut, name: str):
        self.name = name
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")


#: cycles ``offer`` waits for ``ready`` before it calls the design stuck: far more than any bench's
#: longest legitimate stall (backpressure, slow memory models), far less than a hung CI run
OFFER_MAX_WAIT = 100_000


async def offer(clk, port: StreamPort, packer: Packer | None, item, max_wait: int = OFFER_MAX_WAIT):
    """Offer one ``item`` on ``port`` and return in the cycle after it was taken (``valid`` low again).
    Fails, naming the port, when ``ready`` stays low for ``max_wait`` cycles: a deadlocked design
    fails its test instead of hanging the run. ``packer`` None: ``item`` is the payload's integer."""
    from cocotb.triggers import ReadOnly, RisingEdge

    port.payload.value = item if packer is None else packer.pack(item)
    port.valid.value = 1
    for _ in range(max_wait):
        await ReadOnly()
        taken = bool(port.ready.value)
        await RisingEdge(clk)
        if taken:
            break
    else:
        raise AssertionError(f"{port.name}: ready stayed low for {max_wait} cycles with valid high "
                             f"(item {str(item)[:200]}): the design stopped taking input")
    port.valid.value = 0


async def drive_stream(clk, port: StreamPort, packer: Packer, items, rng: random.Random,
                       idle: float = 0.0):
    """Offer ``items`` one by one; between items, idle a cycle with probability ``idle``."""
    from cocotb.triggers import RisingEdge

    port.valid.value = 0
    for item in items:
        while idle and rng.random() < idle:
            await RisingEdge(clk)
        await offer(clk, port, packer, item)


async def drive_ready(clk, port: StreamPort, rng: random.Random, ready_prob: float = 1.0,
                      burst: int = 1):
    """Backpressure: hold ``ready`` low for random bursts (mean length ``burst``)."""
    from cocotb.triggers import RisingEdge

    while True:
        if ready_prob >= 1.0:
            port.ready.value = 1
        elif rng.random() < ready_prob:
            port.ready.value = 1
        else:
            port.ready.value = 0
            for _ in range(rng.randrange(1, 2 * burst)):
                await RisingEdge(clk)
            continue
        await RisingEdge(clk)


def pause_axil(master, rng: random.Random, valid_pause: float = 0.2, ready_pause: float = 0.4):
    """Gaps on a cocotbext-axi AXI4-Lite master's AW, W and AR valids and backpressure on its B and R
    readies (its pause generators: True pauses a channel for a clock), each channel pausing with its
    probability in every clock, from a random stream of their own seeded from ``rng``."""
    pause_rng = random.Random(rng.getrandbits(32))

    def pauses(p):
        while True:
            yield pause_rng.random() < p
    for ch in (master.write_if.aw_channel, master.write_if.w_channel, master.read_if.ar_channel):
        ch.set_pause_generator(pauses(valid_pause))
    for ch in (master.write_if.b_channel, master.read_if.r_channel):
        ch.set_pause_generator(pauses(ready_pause))


@dataclass
class StreamViolation:
    index: int          #: which checked cycle (the cycles that followed a stalled one, counted from 0)
    cycle: int          #: the checker's cycle count (cycles out of reset)
    held: object        #: the payload offered when the stall began (an int, or a tuple of fields)
    seen: object        #: the payload seen in this cycle, or "valid dropped"


class StreamStability:
    """The stream rule on one stream (docs: "holds its payload while valid and not ready"): in a
    cycle that follows one with ``valid`` high and ``ready`` low, ``valid`` must still be high and
    the payload must be the one offered when the stall began. The scoreboards see only the payload
    that is taken; this sees one that changed, or a ``valid`` withdrawn, before the handshake.

    Compares with the payload held since the stall's first cycle (not the previous cycle's), so one
    wrong cycle is one violation. Fed a cycle at a time by :func:`watch_stability` (or by a bench
    that samples every cycle itself). A payload is an int (the stream's bits) or a tuple of its
    fields. ``corrupt_at``: a negative test's hook, the payload seen in that checked cycle is altered
    (bit 0, of the first field for a tuple) as a design changing it would, and must be the one
    violation reported."""

    def __init__(self, name: str, corrupt_at: int | None = None, keep: int = 20):
        self.name = name
        self.corrupt_at = corrupt_at
        self.keep = keep
        self.held = None            # the payload of the stall in progress (None: not stalled)
        self.checked = 0            # cycles that followed a stalled cycle
        self.stalled = 0            # cycles with valid high and ready low (backpressure coverage)
        self.handshakes = 0
        self.errors = 0
        self.violations: list[StreamViolation] = []

    def reset(self):
        """The design is in reset: a stall in progress ends (reset may clear ``valid``)."""
        self.held = None

    def observe(self, cycle: int, valid: int, ready: int, payload: int):
        if self.held is not None:
            if self.checked == self.corrupt_at:
                payload = (payload[0] ^ 1,) + tuple(payload[1:]) if isinstance(payload, tuple) else payload ^ 1
            if not valid or payload != self.held:
                self.errors += 1
                if len(self.violations) < self.keep:
                    self.violations.append(StreamViolation(self.checked, cycle, self.held,
                                                           payload if valid else "valid dropped"))
            self.checked += 1
        if valid and not ready:
            self.stalled += 1
            if self.held is None:
                self.held = payload
        else:
            self.held = None
            self.handshakes += int(bool(valid))

    def check(self):
        if self.errors:
            def shown(v):
                return hex(v) if isinstance(v, int) else str(v)
            first = "; ".join(f"#{v.index} (cycle {v.cycle}): held {shown(v.held)}, then {shown(v.seen)}"
                              for v in self.violations[:5])
            raise AssertionError(f"{self.name}: {self.errors} stalled cycles broke the stream rule "
                                 f"(payload changed or valid dropped before the handshake): {first}")

    def assert_caught_one(self, index, log=None):
        """Negative-test check: exactly one violation, at checked cycle ``index``, and check() fails."""
        self.assert_caught([index], log)

    def assert_caught(self, indices, log=None):
        """Negative-test check: exactly the violations at checked cycles ``indices``, and check() fails."""
        got = [v.index for v in self.violations]
        if self.errors != len(indices) or got != list(indices):
            raise AssertionError(f"{self.name}: expected violations at {list(indices)}, saw {self.errors} at {got}")
        import logging
        must_fail(self.check, f"an unstable {self.name}", log or logging.getLogger(__name__),
                  match="broke the stream rule")


async def watch_stability(clk, port: StreamPort, checker: StreamStability, rst=None):
    """Feed ``checker`` with ``port``'s valid, ready and payload every cycle, sampled in the ReadOnly
    phase (what the design sees at the clock edge); cycles with ``rst`` high end any stall."""
    from cocotb.triggers import ReadOnly, RisingEdge

    cycle = 0
    while True:
        await ReadOnly()
        if rst is not None and int(rst.value):
            checker.reset()
        else:
            checker.observe(cycle, int(port.valid.value), int(port.ready.value), int(port.payload.value))
            cycle += 1
        await RisingEdge(clk)


def watch_streams(dut, names, clk=None, rst=None) -> dict:
    """A :class:`StreamStability` per stream of ``dut`` named in ``names``, each fed by its own
    :func:`watch_stability` coroutine; returns them by name (check each at the end)."""
    import cocotb

    checkers = {}
    for name in names:
        checkers[name] = StreamStability(f"{name} stability")
        cocotb.start_soon(watch_stability(clk if clk is not None else dut.clk, StreamPort(dut, name),
                                          checkers[name], rst))
    return checkers


class ScoreboardError(AssertionError):
    pass


@dataclass
class Mismatch:
    index: int
    expected: object
    actual: object


@dataclass
class InOrderScoreboard:
    """Compares actual transactions with expected ones, in order.

    Records every mismatch (up to ``keep``) rather than stopping at the first,
    so a negative test can check exactly what was caught.
    """
    name: str
    keep: int = 20
    expected: deque = field(default_factory=deque)
    matched: int = 0
    compared: int = 0
    mismatches: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)

    def expect(self, item):
        self.expected.append(item)

    def actual(self, item):
        if not self.expected:
            if len(self.unexpected) < self.keep:
                self.unexpected.append(item)
            return
        exp = self.expected.popleft()
        if exp == item:
            self.matched += 1
        elif len(self.mismatches) < self.keep:
            self.mismatches.append(Mismatch(self.compared, exp, item))
        self.compared += 1

    @property
    def errors(self) -> int:
        return (self.compared - self.matched) + len(self.unexpected)

    def assert_caught_one(self, index: int | None = None, log=None):
        """Negative-test check: exactly one mismatch (at ``index`` if given), and check() fails on it."""
        if self.errors != 1:
            raise AssertionError(f"{self.name}: expected exactly one mismatch, saw {self.errors}")
        if self.expected:           # a lost output is another failure than the corruption's
            raise AssertionError(f"{self.name}: {len(self.expected)} predictions never arrived, "
                                 f"first {self.expected[0]}")
        if index is not None and self.mismatches[0].index != index:
            raise AssertionError(f"{self.name}: the mismatch is at {self.mismatches[0].index}, not {index}")
        try:
            self.check()
        except ScoreboardError as exc:
            if log is not None:
                log.info("scoreboard failed as it must: %s", str(exc).splitlines()[0])
        else:
            raise AssertionError(f"{self.name}: check() passed despite a corrupted prediction")

    def check(self):
        """Raise ScoreboardError unless every expected item arrived and matched."""
        problems = []
        for mm in self.mismatches[:5]:
            problems.append(f"  #{mm.index}: expected {mm.expected}, got {mm.actual}")
        if self.compared != self.matched:
            problems.insert(0, f"{self.compared - self.matched} mismatches of {self.compared}")
        if self.unexpected:
            problems.append(f"{len(self.unexpected)} unexpected outputs, first {self.unexpected[0]}")
        if self.expected:
            problems.append(f"{len(self.expected)} expected outputs never arrived, first {self.expected[0]}")
        if problems:
            raise ScoreboardError(f"{self.name}: " + "\n".join(problems))
        if self.compared == 0:
            raise ScoreboardError(f"{self.name}: nothing was compared")


def must_fail(check, what, log, match: str = "mismatch"):
    """A negative test's last step: ``check()`` must raise AssertionError whose message says it
    found the corruption (``match``, a regular expression; default: a mismatch), logged with its first
    line; else this raises naming ``what`` (the corruption the scoreboard missed). A check that failed
    for another reason (nothing compared, nothing produced) has not shown it can catch a corruption."""
    import re
    try:
        check()
    except AssertionError as exc:
        if not re.search(match, str(exc)):
            raise AssertionError(f"{check.__name__}() failed, but not on {what} (no '{match}' in its "
                                 f"message): {str(exc).splitlines()[0]}") from exc
        log.info("%s failed as it must: %s", check.__name__, str(exc).splitlines()[0])
    else:
        raise AssertionError(f"{check.__name__}() passed despite {what}")


class AxiLiteTransport(Transport):
    """The host driver's transport over cocotbext-axi's AXI4-Lite master: the same host code as on
    hardware, in a cocotb bench (tb/regs, tb/controller)."""
    name = "axil"

    def __init__(self, master):
        self.master = master

    async def read32(self, addr):
        from cocotbext.axi import AxiResp
        r = await self.master.read(addr, 4)
        if r.resp != AxiResp.OKAY:
            raise BusError("read", addr, int(r.resp))
        return int.from_bytes(r.data, "little")

    async def write32(self, addr, value):
        from cocotbext.axi import AxiResp
        w = await self.master.write(addr, value.to_bytes(4, "little"))
        if w.resp != AxiResp.OKAY:
            raise BusError("write", addr, int(w.resp))
