"""The driver's serial transport against the emulated board (a pseudo-terminal served by the
bridge and controller golden models), and its error behaviour.

The same protocol code runs against the RTL bridge in tb/uartbridge (test_driver_over_uart).
"""
import asyncio
import os

import pytest

from cxlkv.models import regmap
from cxlkv.models import uartbridge as proto
from cxlkv.sw.driver import SyncDevice
from cxlkv.sw.serial_transport import BridgeEmulator, BridgeTransport, SerialTransport
from cxlkv.sw.transport import BusError, ModelTransport, TransportError

BAUD = 1_000_000            # only sets the emulated frame timeout (0.64 ms) and the host's quiet time


@pytest.fixture
def emulator():
    with BridgeEmulator(baud=BAUD) as emu:
        yield emu


def test_info_over_serial_matches_the_model(emulator):
    with SyncDevice(SerialTransport(emulator.path, BAUD)) as dev:
        info = dev.info()
    with SyncDevice(ModelTransport()) as ref:
        want = ref.info()
    assert info["transport"] == "serial"
    assert {**info, "transport": "-"} == {**want, "transport": "-"}


def test_configure_counters_and_bus_errors(emulator):
    t = SerialTransport(emulator.path, BAUD)
    with SyncDevice(t) as dev:
        dev.configure(alpha=0x2345, tau=500)
        assert dev.config()["alpha"] == 0x2345
        assert set(dev.counters()) and all(v == 0 for v in dev.counters().values())
        with pytest.raises(BusError, match="SLVERR"):
            asyncio.run(t.read32(0xFFC))                 # unmapped
        with pytest.raises(BusError, match="SLVERR"):
            asyncio.run(t.write32(regmap.BY_NAME["ALPHA"].offset, 0))   # below range_min: refused
        with pytest.raises(BusError, match="DECERR"):
            asyncio.run(t.read32(0x1000))                # beyond the bridge's window
        assert dev.status()["cfg_reject"] == 1
        assert dev.config()["alpha"] == 0x2345


def test_a_corrupted_request_is_resent():
    # byte 3 of the host's stream after the ping (5 bytes) is damaged: the bridge answers
    # "checksum", the transport resynchronises and sends the request again
    with BridgeEmulator(baud=BAUD, fault={5 + 3: 0x5A}) as emu:
        t = SerialTransport(emu.path, BAUD)
        try:
            assert asyncio.run(t.read32(regmap.BY_NAME["ID"].offset)) == 0x43584B56
            assert emu.model.errors == 1
        finally:
            asyncio.run(t.close())


def test_host_starting_mid_stream_resynchronises(emulator):
    fd = os.open(emulator.path, os.O_RDWR | os.O_NOCTTY)
    os.write(fd, proto.encode_write(regmap.BY_NAME["ALPHA"].offset, 7)[:5])   # half a frame, then gone
    os.close(fd)
    with SyncDevice(SerialTransport(emulator.path, BAUD)) as dev:
        assert dev.info()["id"] == "0x43584b56"
        assert dev.config()["alpha"] == 0x1000           # the half frame did nothing


def test_missing_port_and_silent_port():
    with pytest.raises(TransportError, match="cannot open serial port"):
        SerialTransport("/dev/cxlkv-no-such-tty", BAUD)
    master, slave = os.openpty()                         # a terminal nobody answers on
    try:
        t = SerialTransport(os.ttyname(slave), BAUD, timeout_s=0.2)
        with pytest.raises(TransportError, match="is the board programmed"):
            asyncio.run(t.read32(0))
        asyncio.run(t.close())
    finally:
        os.close(master)
        os.close(slave)


class ScriptedLine(BridgeTransport):
    """A byte channel whose answers are scripted: for garbled and unexpected responses."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.sent = []
        self.pending = b""

    async def _write(self, data):
        self.sent.append(bytes(data))
        self.pending += self.answers.pop(0) if self.answers else b""

    async def _read(self, n):
        if len(self.pending) < n:
            raise TransportError("timed out")
        out, self.pending = self.pending[:n], self.pending[n:]
        return out

    async def _quiet(self):
        self.pending = b""


@pytest.mark.parametrize("answer, message", [
    (b"\x00\x00", "not a response status|where a response status"),
    (proto.encode_response(proto.KIND_READ, 0, 5)[:-1] + b"\x00", "check byte"),
    (proto.encode_response(proto.KIND_WRITE, 0), "kind 1 to a request of kind 0"),
    (proto.encode_response(proto.KIND_ERROR, proto.ERR_BUS_TIMEOUT), "bus timeout"),
    (proto.encode_response(proto.KIND_READ, 0, 5)[:3], "timed out"),
])
def test_bad_answers_raise_clear_errors(answer, message):
    line = ScriptedLine([answer])
    with pytest.raises(TransportError, match=message):
        asyncio.run(line.read32(0))
    assert len(line.sent) == 1                            # an answer was lost or wrong: not resent


def test_not_executed_is_resent_once_only():
    err = proto.encode_response(proto.KIND_ERROR, proto.ERR_FRAME_TIMEOUT)
    line = ScriptedLine([err, proto.encode_response(proto.KIND_WRITE, 0)])
    asyncio.run(line.write32(0x40, 1))
    assert len(line.sent) == 2
    line = ScriptedLine([err, err, proto.encode_response(proto.KIND_WRITE, 0)])
    with pytest.raises(TransportError, match="frame timeout"):
        asyncio.run(line.write32(0x40, 1))


def test_command_line_info_and_errors(emulator, capsys):
    import json

    from cxlkv.sw.serial_transport import main
    assert main(["info", "--device", emulator.path, "--baud", str(BAUD)]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "0x43584b56"
    assert main(["info", "--device", "/dev/cxlkv-no-such-tty"]) == 2
    assert "cannot open serial port" in capsys.readouterr().err
