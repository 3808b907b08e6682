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
    """Drive ``frames`` into a bridge whose bus never answers; the bytes it sends back, and its error count."""
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

    async def testbench(ctx):
        for bit in bits:
            ctx.set(dut.rx, bit)
            await ctx.tick()
            line.append(ctx.get(dut.tx))
        errors.append(ctx.get(dut.errors))

    sim.add_testbench(testbench)
    sim.run()
    return _decode_line(line, divisor), errors[0]


def test_rtl_dead_bus_times_out_and_recovers():
    got, errors = _run_dead_bus([proto.encode_read(ID), proto.encode_write(ALPHA, 1), proto.encode_ping()])
    timeout = list(proto.encode_response(proto.KIND_ERROR, proto.ERR_BUS_TIMEOUT))
    ping = list(proto.encode_response(proto.KIND_PING, 0, proto.PING_MAGIC))
    assert got == timeout + timeout + ping
    assert errors == 2


def test_rtl_parameters_are_checked():
    with pytest.raises(ValueError, match="divisor"):
        UARTBridge(divisor=3)
    with pytest.raises(ValueError, match="timeout"):
        UARTBridge(divisor=8, timeout_cycles=100)
    with pytest.raises(ValueError, match="address width"):
        UARTBridge(divisor=8, addr_width=17)
