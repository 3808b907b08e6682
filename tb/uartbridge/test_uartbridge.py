"""cocotb tests of the UART bridge in front of the controller top.

The bench drives the ``rx`` pin bit by bit (8N1, ``divisor`` cycles per bit)
and decodes the ``tx`` pin the same way. Every byte it sends also goes to
the golden model (cxlkv.models.uartbridge.BridgeModel in front of
cxlkv.models.controller.ControllerModel); every byte the bridge answers is
compared with the model's prediction in order. Stimulus: reads and writes
over the whole 4 KiB window and beyond it, pings, corrupt check bytes,
unknown commands, truncated frames (silence past the frame timeout), line
noise between frames, back-to-back frames, bytes with a bad stop bit, and
random gaps between bytes; event batches into the controller's tracker (good ones,
a record that does not fit, a count beyond the bridge's limit, a damaged or truncated
batch, a batch while CONTROL.enable = 0 that must time out as "stalled"). The
``errors`` counter and the number of ``abandon`` strobes (requests the bridge gave up on,
its slices flushed) are checked at the end.

Environment: CXLKV_UART_FRAMES (random scenarios, default 250), CXLKV_SEED.
"""
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from cxlkv.models import regmap
from cxlkv.models import uartbridge as proto
from cxlkv.models.controller import ControllerModel
from cxlkv.sw.driver import ConfigError, Device
from cxlkv.sw.serial_transport import BridgeTransport
from cxlkv.sw.transport import BusError, ModelTransport, TransportError
from cxlkv.tb.common import InOrderScoreboard, env_int, params, test_rng

PREFETCH = regmap.BY_NAME["PREFETCH"]
PREFETCH_EXACT = next(f for f in PREFETCH.fields if f.name == "exact")

CONTROL = regmap.BY_NAME["CONTROL"]
ENABLE = 1 << CONTROL.field("enable").lsb

REG_ADDRS = sorted({r.offset + 4 * w for r in regmap.REGISTERS for w in range(r.words)})
COLD = regmap.MEMORIES[0]
STATUS = regmap.BY_NAME["STATUS"]


class BridgeEnv:
    def __init__(self, dut, corrupt_at=None):
        p = params()
        self.dut = dut
        self.div, self.timeout = p["divisor"], p["timeout_cycles"]
        self.batch, self.event_timeout = p["event_batch"], p["event_timeout_cycles"]
        self.rng = test_rng()
        self.model = proto.BridgeModel(ControllerModel(), event_batch=self.batch)
        self.step = 0                          # the steps of random events rise, as a decode does
        self.sb = InOrderScoreboard("uartbridge")
        self.corrupt_at = corrupt_at          # negative test: damage one predicted byte
        self.n_expected = 0
        self.line_errors = 0                  # bytes sent with a bad stop bit (the RTL counts them)
        self.received = []                    # bytes decoded on tx, when not scoreboarded
        self.scoreboarding = True
        self.tx_framing_errors = 0
        self.abandons = 0                     # ``abandon`` strobes seen

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rx.value = 1
        dut.rst.value = 1
        cocotb.start_soon(self._monitor())          # before reset ends (docs/developing.md)
        cocotb.start_soon(self._count_abandons())
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 2 * self.div)

    # ---- the serial line
    async def send_byte(self, b, stop=1):
        dut = self.dut
        for bit in [0] + [(b >> i) & 1 for i in range(8)] + [stop]:
            dut.rx.value = bit
            await ClockCycles(dut.clk, self.div)
        if not stop:
            dut.rx.value = 1
            await ClockCycles(dut.clk, self.div)

    async def _monitor(self):
        dut = self.dut
        while True:
            await FallingEdge(dut.tx)
            await ClockCycles(dut.clk, self.div // 2)
            await ReadOnly()
            if int(dut.tx.value):                 # not a start bit
                continue
            value = 0
            for i in range(8):
                await ClockCycles(dut.clk, self.div)
                await ReadOnly()
                value |= int(dut.tx.value) << i
            await ClockCycles(dut.clk, self.div)
            await ReadOnly()
            if not int(dut.tx.value):
                self.tx_framing_errors += 1
            if self.scoreboarding:
                self.sb.actual(value)
            else:
                self.received.append(value)

    async def _count_abandons(self):
        while True:                               # a one-cycle strobe, never two cycles in a row
            await RisingEdge(self.dut.abandon)
            self.abandons += 1

    # ---- stimulus with prediction
    def _expect(self, data):
        for b in data:
            if self.n_expected == self.corrupt_at:
                b ^= 0x01
            self.sb.expect(b)
            self.n_expected += 1

    async def send(self, data, max_gap=0):
        for b in data:
            await self.send_byte(b)
            self._expect(self.model.byte(b))
            if max_gap and self.rng.random() < 0.3:
                await ClockCycles(self.dut.clk, self.rng.randrange(1, max_gap))

    async def drain(self, limit_chars=None):
        """Wait until every predicted byte has arrived (or a generous limit passed: a batch's
        answer, after the memory sweep or the decision timeout)."""
        if limit_chars is None:
            limit_chars = 80 + self.batch * 8 + self.event_timeout // (10 * self.div)
        for _ in range(limit_chars):
            if not self.sb.expected:
                break
            await ClockCycles(self.dut.clk, 10 * self.div)
        await ClockCycles(self.dut.clk, 12 * self.div)   # let a surplus byte show itself

    async def go_silent(self):
        """Silence past the frame timeout: an open frame is abandoned."""
        self._expect(self.model.timeout())          # predicted first: the answer comes during the wait
        await ClockCycles(self.dut.clk, self.timeout + 30 * self.div)
        await self.drain()

    # ---- random scenarios
    def random_addr(self):
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(REG_ADDRS) | (self.rng.randrange(4) if self.rng.random() < 0.1 else 0)
        if r < 0.75:
            return COLD.offset + 4 * self.rng.randrange(COLD.size // 4)
        if r < 0.9:
            return self.rng.randrange(1 << 12)
        return self.rng.randrange(1 << 12, 1 << 16)

    def random_value(self):
        return self.rng.choice([self.rng.getrandbits(32), self.rng.randrange(16), self.rng.randrange(1 << 16),
                                self.rng.randrange(1 << 21)])

    def random_records(self, n, bad=None):
        """``n`` event records in the harness's format; ``bad``: index of one that does not fit."""
        import numpy as np

        from cxlkv.sw.transport import EVENT_DTYPE
        rng = self.rng
        rec = np.zeros(n, EVENT_DTYPE)
        for i in range(n):
            self.step += rng.choice([0, 0, 1, 3])
            rec[i] = (rng.randrange(4), rng.randrange(2), rng.choice([rng.randrange(12), rng.randrange(1024)]),
                      self.step, rng.getrandbits(16), int(rng.random() < 0.15), rng.getrandbits(8))
        if bad is not None:
            field, value = rng.choice([("layer", rng.randrange(4, 1 << 16)), ("head", rng.randrange(2, 1 << 16)),
                                       ("position", rng.randrange(1024, 1 << 32)), ("write", rng.randrange(2, 256))])
            rec[bad][field] = value
        return rec

    def random_batch(self):
        rng = self.rng
        n = rng.randrange(1, self.batch + 1)
        return proto.encode_events(self.random_records(n, rng.randrange(n) if rng.random() < 0.1 else None).tobytes())

    def random_frame(self):
        k = self.rng.random()
        if k < 0.45:
            addr = self.random_addr()
            while addr & ~3 == STATUS.offset:
                # STATUS.busy is timing (the memory sweep for 8,192 cycles after CONTROL.enable, the tier
                # mover at work), which the transaction-level model does not time: a read there can
                # differ (COCOTB_RANDOM_SEED=1795702663 read busy = 1 after an enable)
                addr = self.random_addr()
            return proto.encode_read(addr)
        if k < 0.9:
            addr, value = self.random_addr(), self.random_value()
            if addr & ~3 == PREFETCH.offset:
                # exact mode only: with PREFETCH.exact = 0 the controller's prefetch timing is
                # its own (by design) and the transaction-level model does not follow it
                value |= 1 << PREFETCH_EXACT.lsb
            return proto.encode_write(addr, value)
        return proto.encode_ping()

    async def scenario(self):
        rng = self.rng
        kind = rng.choices(["frame", "badchk", "badcmd", "truncated", "noise", "pipelined", "badstop", "events",
                            "enable", "batchsize"], [55, 8, 6, 5, 8, 10, 3, 14, 2, 1])[0]
        gap = rng.choice([0, 0, 40])
        if kind == "events":
            frame = self.random_batch()
            if rng.random() < 0.1:
                frame = bytearray(frame)
                frame[rng.randrange(4, len(frame))] ^= 1 << rng.randrange(8)
                frame = bytes(frame)
            elif rng.random() < 0.05:
                frame = frame[:rng.randrange(4, len(frame))]
            await self.send(frame, gap)
        elif kind == "enable":                       # the tracker on (mostly) or off: batches then stall
            await self.send(proto.encode_write(CONTROL.offset, ENABLE if rng.random() < 0.8 else 0), gap)
        elif kind == "batchsize":                    # 0 or beyond the limit: refused as the count arrives
            n = rng.choice([0, self.batch + 1, 0xFFFF])
            await self.send(bytes([proto.SYNC, proto.CMD_EVENTS]) + n.to_bytes(2, "little"), gap)
        elif kind == "frame":
            await self.send(self.random_frame(), gap)
        elif kind == "badchk":
            frame = bytearray(self.random_frame())
            frame[rng.randrange(1, len(frame))] ^= 1 << rng.randrange(8)
            await self.send(bytes(frame), gap)
        elif kind == "badcmd":
            bad = rng.choice([c for c in range(256) if c not in proto.REQUEST_LEN])
            await self.send(bytes([proto.SYNC, bad]) + bytes(rng.getrandbits(8) for _ in range(rng.randrange(4))), gap)
        elif kind == "truncated":
            frame = self.random_frame()
            await self.send(frame[:rng.randrange(1, len(frame))], gap)
        elif kind == "noise":
            await self.send(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 6))), gap)
            if not self.model.frame:
                await self.send(self.random_frame(), gap)
        elif kind == "pipelined":
            await self.send(self.random_frame() + self.random_frame())
        else:                                        # a byte with a bad stop bit is dropped and counted
            frame = self.random_frame()
            cut = rng.randrange(len(frame) + 1)
            await self.send(frame[:cut], gap)
            await self.send_byte(rng.getrandbits(8), stop=0)
            self.line_errors += 1
            await self.send(frame[cut:], gap)
        await self.drain()
        if self.model.frame:
            await self.go_silent()

    def check(self):
        self.sb.check()
        assert self.tx_framing_errors == 0, f"{self.tx_framing_errors} response bytes with a bad stop bit"
        got = int(self.dut.errors.value)
        want = min(self.model.errors + self.line_errors, 0xFFFF)
        assert got == want, f"errors counter {got}, model {self.model.errors} + {self.line_errors} line errors"
        assert self.abandons == self.model.abandons, \
            f"{self.abandons} abandon strobes, model {self.model.abandons} requests given up"


@cocotb.test()
async def test_directed(dut):
    """Each response kind once: ping, read, write OK/SLVERR, DECERR, checksum, command, timeout."""
    env = BridgeEnv(dut)
    await env.start()
    alpha = regmap.BY_NAME["ALPHA"].offset
    for frame in (proto.encode_ping(), proto.encode_read(regmap.BY_NAME["ID"].offset),
                  proto.encode_write(alpha, 0x2000), proto.encode_read(alpha),
                  proto.encode_write(alpha, 0), proto.encode_read(0xFFC), proto.encode_read(0x1000),
                  # a refused write at an unaligned address: REJECT_ADDR holds the word's address
                  proto.encode_write(alpha + 3, 0), proto.encode_read(regmap.BY_NAME["REJECT_ADDR"].offset),
                  proto.encode_write(0xFFFF, 1), proto.encode_read(alpha)[:-1] + b"\x00",
                  bytes([proto.SYNC, 0x7F])):
        await env.send(frame)
        await env.drain()
    await env.send(proto.encode_write(alpha, 5)[:6])
    await env.go_silent()
    await env.send(proto.encode_read(alpha))
    await env.drain()
    env.check()
    assert env.model.errors == 3


def _damage_last(frame):
    return frame[:-1] + bytes([frame[-1] ^ 1])


@cocotb.test()
async def test_event_batches(dut):
    """Event batches into the tracker: each answer once (done, bad record, batch size, checksum,
    truncated, stalled while disabled), then the port again after re-enabling."""
    env = BridgeEnv(dut)
    await env.start()
    await env.send(proto.encode_write(CONTROL.offset, ENABLE))
    await env.drain()
    frames = [proto.encode_events(env.random_records(env.batch).tobytes()) for _ in range(3)]
    frames += [proto.encode_events(env.random_records(5, bad=3).tobytes()),
               bytes([proto.SYNC, proto.CMD_EVENTS, env.batch + 1, 0]),
               _damage_last(proto.encode_events(env.random_records(2).tobytes())),
               proto.encode_write(CONTROL.offset, 0),
               proto.encode_events(env.random_records(3).tobytes()),          # disabled: stalled after 0
               proto.encode_write(CONTROL.offset, ENABLE),
               proto.encode_events(env.random_records(1).tobytes())]
    for frame in frames:
        await env.send(frame)
        await env.drain()
    await env.send(proto.encode_events(env.random_records(4).tobytes())[:30])
    await env.go_silent()
    env.check()
    assert env.model.events == 3 * env.batch + 1
    assert env.model.errors == 5, env.model.errors
    assert env.model.abandons == 1, env.model.abandons          # the stalled batch


@cocotb.test()
async def test_random(dut):
    """Random scenarios with noise, errors, gaps and back-to-back frames against the model."""
    env = BridgeEnv(dut)
    await env.start()
    await env.send(proto.encode_write(CONTROL.offset, ENABLE))      # the tracker on: batches run
    await env.drain()
    for _ in range(env_int("CXLKV_UART_FRAMES", 250)):
        await env.scenario()
    env.check()
    dut._log.info(f"{env.sb.matched} response bytes matched, {env.model.transactions} bus transactions, "
                  f"{env.model.events} events, {env.model.errors} protocol errors, {env.line_errors} line errors, "
                  f"{env.abandons} abandon strobes")


@cocotb.test()
async def test_scoreboard_catches_a_wrong_byte(dut):
    """Negative test: one damaged prediction must be reported, exactly that one."""
    env = BridgeEnv(dut, corrupt_at=7)
    await env.start()
    for _ in range(4):
        await env.send(proto.encode_read(regmap.BY_NAME["ID"].offset))
        await env.drain()
    # exactly the damaged byte: nothing else mismatched, missing or unexpected, and check() fails on it
    env.sb.assert_caught_one(index=7, log=dut._log)


class UartPinTransport(BridgeTransport):
    """The driver's serial-transport protocol on the bench's UART pins."""

    def __init__(self, env):
        self.env = env
        env.scoreboarding = False

    async def _write(self, data):
        for b in data:
            await self.env.send_byte(b)

    async def _read(self, n):
        env = self.env
        for _ in range(n * 20 + env.event_timeout // (10 * env.div) + 50):   # a batch answers after its decisions
            if len(env.received) >= n:
                break
            await ClockCycles(env.dut.clk, 10 * env.div)
        if len(env.received) < n:
            raise TransportError(f"no answer: {len(env.received)} of {n} bytes")
        out, env.received[:] = bytes(env.received[:n]), env.received[n:]
        return out

    async def _quiet(self):
        await ClockCycles(self.env.dut.clk, self.env.timeout + 30 * self.env.div)
        self.env.received.clear()


@cocotb.test()
async def test_driver_over_uart(dut):
    """The host driver's Device over the serial-transport protocol: info, configure, a refused write."""
    env = BridgeEnv(dut)
    await env.start()
    # start mid-stream: half a frame already on the line, as a host that opens the port late sees it
    await env.send_byte(proto.SYNC)
    await env.send_byte(proto.CMD_WRITE)
    transport = UartPinTransport(env)
    await transport.resync()
    dev = await Device.open(transport)
    info = await dev.info()
    ref = await Device.open(ModelTransport())
    want = await ref.info()
    assert {**info, "transport": "-"} == {**want, "transport": "-"}, (info, want)
    await dev.configure(alpha=0x1234, tau=77)
    assert (await dev.config())["alpha"] == 0x1234
    try:
        await transport.write32(regmap.BY_NAME["ALPHA"].offset, 0)       # below ALPHA's range_min
    except BusError as exc:
        assert exc.resp == proto.SLVERR
    else:
        raise AssertionError("an out-of-range write was not refused")
    try:
        await dev.configure(alpha=0)
    except ConfigError:
        pass
    else:
        raise AssertionError("the driver accepted an out-of-range alpha")
    assert (await dev.status())["cfg_reject"] == 1
    await dev.set_format(3, 2)
    assert await dev.get_format(3) == 2


@cocotb.test()
async def test_events_through_the_serial_transport(dut):
    """BridgeTransport.events (what `ctl --transport serial replay` sends) on the pins: the RTL
    tracker's decisions equal the model transport's, over several batches; then its errors."""
    from cxlkv.sw.transport import EventPortError
    env = BridgeEnv(dut)
    await env.start()
    transport = UartPinTransport(env)
    transport.event_batch = env.batch
    await transport.resync()
    ref = ModelTransport()
    for t in (transport, ref):
        await t.write32(regmap.BY_NAME["QUEUE_BUDGET"].offset, 6)
        await t.write32(CONTROL.offset, ENABLE)
    rec = env.random_records(3 * env.batch + 5)
    rec["position"] %= 20                       # one queue, 20 positions, budget 6: hits, misses, evictions
    rec["layer"], rec["head"], rec["write"] = 0, 0, 0
    got = await transport.events(rec)
    want = await ref.events(rec)
    assert (got == want).all(), (got, want)
    flags = got["flags"].tolist()
    assert any(f & 1 for f in flags) and any(f & 4 for f in flags), flags
    rec[env.batch + 2]["head"] = 7
    try:
        await transport.events(rec)
    except EventPortError as exc:
        assert f"event record {env.batch + 2} does not fit" in str(exc), exc
    else:
        raise AssertionError("a record beyond the event port was taken")
    await transport.write32(CONTROL.offset, 0)
    try:
        await transport.events(rec[:2])
    except EventPortError as exc:
        assert "stalled after 0 of 2" in str(exc), exc
    else:
        raise AssertionError("a disabled event port took events")


@cocotb.test()
async def test_scoreboard_catches_a_wrong_decision_byte(dut):
    """Negative test on the event path: one damaged byte of a batch's decisions is reported."""
    env = BridgeEnv(dut)
    await env.start()
    await env.send(proto.encode_write(CONTROL.offset, ENABLE))
    await env.drain()
    env.corrupt_at = env.n_expected + 3 + 8 * 2 + 4          # the flags of the third decision
    await env.send(proto.encode_events(env.random_records(4).tobytes()))
    await env.drain()
    env.sb.assert_caught_one(index=env.corrupt_at, log=dut._log)
