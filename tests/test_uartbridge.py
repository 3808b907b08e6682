"""The UART bridge's protocol model, and RTL behaviour the cocotb bench cannot reach (a dead bus).

The RTL against the model over the serial line: tb/uartbridge (tests/test_cocotb.py).
"""
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from cxlkv.hdl.uartbridge import UARTBridge
from cxlkv.models import regmap
from cxlkv.models import uartbridge as proto
from cxlkv.models.controller import ControllerModel

ID = regmap.BY_NAME["ID"].offset
ALPHA = regmap.BY_NAME["ALPHA"].offset


def bridge():
    return proto.BridgeModel(ControllerModel())


def test_frames_have_documented_bytes():
    assert proto.encode_read(0x123) == bytes([0xA5, 0x01, 0x23, 0x01, 0xA5 ^ 0x01 ^ 0x23 ^ 0x01])
    w = proto.encode_write(0x10, 0xDEADBEEF)
    assert w[:8] == bytes([0xA5, 0x02, 0x10, 0x00, 0xEF, 0xBE, 0xAD, 0xDE]) and proto.xor(w) == 0
    assert proto.encode_response(proto.KIND_PING, 0, proto.PING_MAGIC)[1:5] == b"UBRG"
    with pytest.raises(ValueError):
        proto.encode_read(0x10000)


def test_read_write_and_bus_errors():
    b = bridge()
    assert proto.decode_response(b.feed(proto.encode_read(ID))) == (proto.KIND_READ, proto.OKAY, 0x43584B56)
    assert proto.decode_response(b.feed(proto.encode_write(ALPHA, 0x2000))) == (proto.KIND_WRITE, proto.OKAY, None)
    assert proto.decode_response(b.feed(proto.encode_read(ALPHA)))[2] == 0x2000
    # out of ALPHA's range: the register block refuses it (SLVERR), nothing changes
    assert proto.decode_response(b.feed(proto.encode_write(ALPHA, 0)))[:2] == (proto.KIND_WRITE, proto.SLVERR)
    assert proto.decode_response(b.feed(proto.encode_read(0xFFC))) == (proto.KIND_READ, proto.SLVERR, 0)
    # beyond the 4 KiB window: DECERR from the bridge, no bus transaction
    n = b.transactions
    assert proto.decode_response(b.feed(proto.encode_read(0x1000))) == (proto.KIND_READ, proto.DECERR, 0)
    assert b.transactions == n
    assert b.errors == 0


def test_protocol_errors():
    b = bridge()
    bad = bytearray(proto.encode_write(ALPHA, 5))
    bad[5] ^= 0x10
    assert proto.decode_response(b.feed(bytes(bad))) == (proto.KIND_ERROR, proto.ERR_CHECKSUM, None)
    assert proto.decode_response(b.feed(proto.encode_read(ALPHA)))[2] == 0x1000     # the bad write did nothing
    assert proto.decode_response(b.feed(bytes([0xA5, 0x33]))) == (proto.KIND_ERROR, proto.ERR_COMMAND, None)
    assert b.feed(proto.encode_read(ID)[:3]) == b""
    assert proto.decode_response(b.timeout()) == (proto.KIND_ERROR, proto.ERR_FRAME_TIMEOUT, None)
    assert b.timeout() == b""                    # no frame open: silence is not an error
    assert b.errors == 3
    dead = proto.BridgeModel(None)
    assert proto.decode_response(dead.feed(proto.encode_read(ID)))[1] == proto.ERR_BUS_TIMEOUT


def test_decode_rejects_garbled_responses():
    good = proto.encode_response(proto.KIND_READ, 0, 7)
    for bad in (b"", b"\x00", good[:-1], good[:-1] + bytes([good[-1] ^ 1])):
        with pytest.raises(proto.ProtocolError):
            proto.decode_response(bad)


@settings(max_examples=200, deadline=None)
@given(noise=st.binary(max_size=24), addr=st.sampled_from([ID, ALPHA, 0x3FC]))
def test_resynchronises_after_any_noise(noise, addr):
    """Whatever the line carried before, silence past the timeout then a frame gets its answer."""
    b = bridge()
    b.feed(noise)
    b.timeout()
    kind, resp, _ = proto.decode_response(b.feed(proto.encode_read(addr)))
    assert (kind, resp) == (proto.KIND_READ, proto.OKAY if addr != 0x3FC else proto.SLVERR)


# ---- RTL behaviour with a bus that never answers (Amaranth simulator)

def _decode_line(samples, divisor):
    """Bytes in a per-cycle recording of an 8N1 line."""
    out, i = [], 0
    while i < len(samples):
        if samples[i]:
            i += 1
            continue
        mid = i + divisor // 2
        out.append(sum(samples[mid + divisor * (k + 1)] << k for k in range(8)))
        assert samples[mid + 9 * divisor] == 1, "stop bit"
        i = mid + 9 * divisor
    return out


def _run_dead_bus(frames, divisor=4, bus_timeout=40):
    """Drive ``frames`` into a bridge whose bus never answers; the bytes it sends back, its error count
    and the cycles of its ``abandon`` strobes."""
    dut = UARTBridge(divisor=divisor, timeout_cycles=100, bus_timeout_cycles=bus_timeout)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    line = []
    bits = []
    for frame in frames:
        for b in frame:
            for bit in [0] + [(b >> i) & 1 for i in range(8)] + [1]:
                bits += [bit] * divisor
        bits += [1] * (bus_timeout + 100 * divisor)     # time for the answer to go out
    errors = []
    abandons = []

    async def testbench(ctx):
        for cycle, bit in enumerate(bits):
            ctx.set(dut.rx, bit)
            if ctx.get(dut.abandon):
                abandons.append(cycle)
            await ctx.tick()
            line.append(ctx.get(dut.tx))
        errors.append(ctx.get(dut.errors))

    sim.add_testbench(testbench)
    sim.run()
    return _decode_line(line, divisor), errors[0], abandons


def _dead_bus_model(frames):
    """The model of a bridge in front of a bus that never answers, fed ``frames``."""
    model = proto.BridgeModel(None)
    answers = [model.feed(frame) for frame in frames]
    return model, answers


def test_rtl_dead_bus_times_out_and_recovers():
    frames = [proto.encode_read(ID), proto.encode_write(ALPHA, 1), proto.encode_ping()]
    got, errors, abandons = _run_dead_bus(frames)
    timeout = list(proto.encode_response(proto.KIND_ERROR, proto.ERR_BUS_TIMEOUT))
    ping = list(proto.encode_response(proto.KIND_PING, 0, proto.PING_MAGIC))
    assert got == timeout + timeout + ping
    assert errors == 2
    # one strobe for each request given up (the two bus timeouts), a single cycle each, as the model counts
    model, answers = _dead_bus_model(frames)
    assert got == list(b"".join(answers)) and model.abandons == 2
    assert len(abandons) == model.abandons and all(b - a > 1 for a, b in zip(abandons, abandons[1:]))


def test_rtl_without_an_event_path_answers_stalled():
    """A bridge built without event/decision ports takes a batch whole and answers "stalled after 0"."""
    import numpy as np

    from cxlkv.sw.transport import EVENT_DTYPE
    batch = proto.encode_events(np.zeros(2, EVENT_DTYPE).tobytes())
    damaged = batch[:-1] + bytes([batch[-1] ^ 1])
    frames = [batch, damaged, bytes([0xA5, 0x03, 33, 0]), proto.encode_ping()]
    got, errors, abandons = _run_dead_bus(frames)
    assert got == list(proto.encode_events_response(proto.EV_STALLED, 0)) + \
        list(proto.encode_response(proto.KIND_ERROR, proto.ERR_CHECKSUM)) + \
        list(proto.encode_events_response(proto.EV_BATCH_SIZE, proto.EVENT_BATCH_MAX)) + \
        list(proto.encode_response(proto.KIND_PING, 0, proto.PING_MAGIC))
    assert errors == 3
    model, _ = _dead_bus_model(frames)
    assert len(abandons) == model.abandons == 1             # the "stalled" answer only


def test_rtl_parameters_are_checked():
    with pytest.raises(ValueError, match="divisor"):
        UARTBridge(divisor=3)
    with pytest.raises(ValueError, match="timeout"):
        UARTBridge(divisor=8, timeout_cycles=100)
    with pytest.raises(ValueError, match="address width"):
        UARTBridge(divisor=8, addr_width=17)


# ---- event batches (cmd 0x03): the model against the controller model's event port

def _records(rows):
    import numpy as np

    from cxlkv.sw.transport import EVENT_DTYPE
    rec = np.zeros(len(rows), EVENT_DTYPE)
    for i, (layer, head, pos, step, sample, write) in enumerate(rows):
        rec[i] = (layer, head, pos, step, sample, write, 0)
    return rec


def _enabled_bridge(**kw):
    ctl = ControllerModel()
    b = proto.BridgeModel(ctl, **kw)
    control = regmap.BY_NAME["CONTROL"]
    enable = control.field("enable")
    assert proto.decode_response(b.feed(proto.encode_write(control.offset, 1 << enable.lsb)))[1] == proto.OKAY
    return b


def test_event_batch_equals_the_controller_models_event_port():
    import numpy as np

    from cxlkv.sw.transport import DECISION_DTYPE
    rows = [(0, 0, p % 7, p // 3, (p * 977) & 0xFFFF, int(p % 5 == 0)) for p in range(20)] + [(3, 1, 1023, 9, 1, 0)]
    rec = _records(rows)
    frame = proto.encode_events(rec.tobytes())
    assert frame[:4] == bytes([0xA5, 0x03, len(rows), 0]) and len(frame) == 5 + 16 * len(rows)
    assert proto.xor(frame) == 0
    b = _enabled_bridge()
    code, n, body = proto.decode_events_response(b.feed(frame))
    assert (code, n) == (proto.EV_DONE, len(rows))
    got = np.frombuffer(body, DECISION_DTYPE)
    ref = _enabled_bridge().bus.events([(r[0], r[1], r[2], r[5], r[4], r[3]) for r in rows])
    want = [d[5] for d in ref], [d[0] | d[1] << 1 | d[2] << 2 | d[3] << 3 | d[4] << 4 for d in ref]
    assert (got["victim"].tolist(), got["flags"].tolist()) == want
    assert any(f & 1 for f in want[1]) and any(f & 2 for f in want[1])      # hits and inserts both seen
    assert b.errors == 0 and b.events == len(rows)


def test_event_batch_errors():
    ok = _records([(0, 0, 1, 0, 5, 0)] * 3)
    b = _enabled_bridge(event_batch=4)
    # a position beyond the controller's 2^10: record 2 refused, nothing executed
    bad = _records([(0, 0, 1, 0, 5, 0), (1, 1, 2, 0, 5, 1), (0, 0, 1024, 0, 5, 0)])
    assert proto.decode_events_response(b.feed(proto.encode_events(bad.tobytes()))) == (proto.EV_BAD_RECORD, 2, b"")
    for field, value in (("layer", 4), ("head", 2), ("write", 2)):
        r = ok.copy()
        r[1][field] = value
        assert proto.decode_events_response(b.feed(proto.encode_events(r.tobytes())))[:2] == (proto.EV_BAD_RECORD, 1)
    assert b.events == 0
    # batch size: 0 and above the limit are refused as soon as the count arrives
    assert proto.decode_events_response(b.feed(bytes([0xA5, 0x03, 5, 0]))) == (proto.EV_BATCH_SIZE, 4, b"")
    assert proto.decode_events_response(b.feed(bytes([0xA5, 0x03, 0, 0]))) == (proto.EV_BATCH_SIZE, 4, b"")
    # a damaged batch executes nothing; a truncated one times out
    frame = bytearray(proto.encode_events(ok.tobytes()))
    frame[9] ^= 0x40
    assert proto.decode_response(b.feed(bytes(frame))) == (proto.KIND_ERROR, proto.ERR_CHECKSUM, None)
    assert b.feed(proto.encode_events(ok.tobytes())[:-1]) == b""
    assert proto.decode_response(b.timeout()) == (proto.KIND_ERROR, proto.ERR_FRAME_TIMEOUT, None)
    assert b.events == 0 and b.errors == 8
    assert b.abandons == 0                      # refused before any event went out: nothing to withdraw
    # disabled (CONTROL.enable = 0) and no tracker: the port stalls after 0 decisions
    disabled = bridge()
    assert proto.decode_events_response(disabled.feed(proto.encode_events(ok.tobytes()))) == (proto.EV_STALLED, 0, b"")
    assert disabled.abandons == 1 and disabled.errors == 1
    none = proto.BridgeModel(ControllerModel(tracker="none"))
    assert proto.decode_events_response(none.feed(proto.encode_events(ok.tobytes()))) == (proto.EV_STALLED, 0, b"")
    # the answers' framing is checked
    good = proto.encode_events_response(proto.EV_DONE, 1, bytes(8))
    for garbled in (good[:-1], good[:-1] + bytes([good[-1] ^ 1]), b"\x50\x00\x00"):
        with pytest.raises(proto.ProtocolError):
            proto.decode_events_response(garbled)
    with pytest.raises(ValueError):
        proto.encode_events(bytes(15))
