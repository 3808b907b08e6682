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
#: The host's answer timeout against the emulator: generous, since the emulator is a Python thread on
#: a machine that may be busy (a 1 s timeout once expired under a parallel place-and-route); the
#: emulator always answers (an error frame for a damaged request), so no test waits for it
EMU_TIMEOUT_S = 10.0


@pytest.fixture
def emulator():
    with BridgeEmulator(baud=BAUD) as emu:
        yield emu


def test_info_over_serial_matches_the_model(emulator):
    with SyncDevice(SerialTransport(emulator.path, BAUD, timeout_s=EMU_TIMEOUT_S)) as dev:
        info = dev.info()
    with SyncDevice(ModelTransport()) as ref:
        want = ref.info()
    assert info["transport"] == "serial"
    assert {**info, "transport": "-"} == {**want, "transport": "-"}


def test_configure_counters_and_bus_errors(emulator):
    t = SerialTransport(emulator.path, BAUD, timeout_s=EMU_TIMEOUT_S)
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
        t = SerialTransport(emu.path, BAUD, timeout_s=EMU_TIMEOUT_S)
        try:
            assert asyncio.run(t.read32(regmap.BY_NAME["ID"].offset)) == 0x43584B56
            assert emu.model.errors == 1
        finally:
            asyncio.run(t.close())


def test_an_unknown_command_leaves_no_answer_behind():
    # the write's command byte (host byte 5 + 5 + 1: after the ping and a read) damaged to 0x07:
    # the bridge answers "unknown command" and reads the rest of the frame as noise, where the
    # value's 0xA5 starts a frame of its own and a second error answer; without going quiet
    # before the next request the host took that answer as the next read's and every later
    # read got the value of the register before it (found by review, 2026-12-02)
    with BridgeEmulator(baud=BAUD, fault={5 + 5 + 1: 0x07}) as emu:
        t = SerialTransport(emu.path, BAUD, timeout_s=EMU_TIMEOUT_S)
        try:
            assert asyncio.run(t.read32(regmap.BY_NAME["ID"].offset)) == 0x43584B56
            alpha = regmap.BY_NAME["ALPHA"].offset
            asyncio.run(t.write32(alpha, 0x7A5))          # resent once: the command was not executed
            assert emu.model.errors >= 1
            for name in ("VERSION", "CAPS", "ID", "ALPHA"):
                reg = regmap.BY_NAME[name]
                with SyncDevice(ModelTransport()) as ref:
                    want = 0x7A5 if name == "ALPHA" else asyncio.run(ref.t.read32(reg.offset))
                assert asyncio.run(t.read32(reg.offset)) == want, name
        finally:
            asyncio.run(t.close())


def test_quiet_outlasts_the_longest_answer():
    from cxlkv.sw.serial_transport import quiet_seconds
    for baud in (115200, 1_000_000, 3_000_000):
        longest = (4 + proto.DECISION_RECORD_BYTES * proto.EVENT_BATCH_MAX) * 10 / baud
        assert quiet_seconds(baud) > longest and quiet_seconds(baud) > 2 * 640 / baud


def test_host_starting_mid_stream_resynchronises(emulator):
    fd = os.open(emulator.path, os.O_RDWR | os.O_NOCTTY)
    os.write(fd, proto.encode_write(regmap.BY_NAME["ALPHA"].offset, 7)[:5])   # half a frame, then gone
    os.close(fd)
    with SyncDevice(SerialTransport(emulator.path, BAUD, timeout_s=EMU_TIMEOUT_S)) as dev:
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


# ---- events over the UART: `ctl --transport serial replay` against the emulated board

TRACE = "traces/tiny_llama_stdlib_thr001.npz"


def test_replay_over_serial_equals_the_model_event_for_event():
    from cxlkv.models.trace import load_trace
    sub = load_trace(TRACE)
    # ~1,200 batches: the emulator's frame timeout at 115200 baud (5.6 ms) and a 10 s answer
    # timeout keep a loaded CI machine from starving the emulator thread into a false timeout
    with BridgeEmulator(baud=115200) as emu, SyncDevice(SerialTransport(emu.path, 115200, timeout_s=10.0)) as dev:
        got = dev.replay(sub, 20, hw_pinned=2)
        got_dec = dev.last_decisions
    with SyncDevice(ModelTransport()) as ref:
        want = ref.replay(sub, 20, hw_pinned=2)
        want_dec = ref.last_decisions
    assert got["transport"] == "serial" and got["events"] == len(sub)
    assert {**got, "transport": "-"} == {**want, "transport": "-"}
    assert (got_dec == want_dec).all()
    assert got["evictions"] > 0 and 0 < got["read_hits"] < got["reads"]


def test_event_port_errors_over_serial(emulator):
    import numpy as np

    from cxlkv.sw.transport import EVENT_DTYPE, EventPortError
    rec = np.zeros(70, EVENT_DTYPE)
    rec["position"] = np.arange(70)
    t = SerialTransport(emulator.path, BAUD, timeout_s=EMU_TIMEOUT_S)
    try:
        with pytest.raises(EventPortError, match="stalled after 0 of 70"):     # CONTROL.enable = 0
            asyncio.run(t.events(rec))
        asyncio.run(t.write32(regmap.BY_NAME["CONTROL"].offset, 1))
        assert len(asyncio.run(t.events(rec[:5]))) == 5
        rec[66]["position"] = 1 << 10                                        # beyond the port: third batch
        with pytest.raises(EventPortError, match="event record 66 does not fit"):
            asyncio.run(t.events(rec))
        assert emulator.model.events == 5 + 64                               # the first two batches ran
        t.event_batch = 40                                                   # above the bridge's 32
        with pytest.raises(TransportError, match="at most 32 events per batch"):
            asyncio.run(t.events(rec[:40]))
        t.event_batch = 32
        assert len(asyncio.run(t.events(rec[:3]))) == 3                      # the link recovered
    finally:
        asyncio.run(t.close())


def test_a_corrupted_event_batch_is_resent_and_runs_once():
    import numpy as np

    from cxlkv.sw.transport import EVENT_DTYPE
    rec = np.zeros(4, EVENT_DTYPE)
    rec["position"] = [1, 2, 1, 3]
    # host stream: ping (5), write CONTROL (9), then the batch: its 12th byte is damaged
    with BridgeEmulator(baud=BAUD, fault={5 + 9 + 12: 0x77}) as emu:
        t = SerialTransport(emu.path, BAUD, timeout_s=EMU_TIMEOUT_S)
        try:
            asyncio.run(t.write32(regmap.BY_NAME["CONTROL"].offset, 1))
            dec = asyncio.run(t.events(rec))
            ref = ModelTransport()
            asyncio.run(ref.write32(regmap.BY_NAME["CONTROL"].offset, 1))
            assert (dec == asyncio.run(ref.events(rec))).all()
            assert dec["flags"][2] & 1                                       # position 1 again: a hit
            assert emu.model.events == 4 and emu.model.errors == 1
        finally:
            asyncio.run(t.close())


@pytest.mark.parametrize("answer, message", [
    (proto.encode_events_response(proto.EV_DONE, 1, bytes(8))[:-1] + b"\x01", "check byte"),
    (proto.encode_events_response(proto.EV_DONE, 2, bytes(16)), "2 decisions answered to a batch of 1"),
    (proto.encode_events_response(proto.EV_DONE, 1, bytes(8))[:6], "timed out"),
    (proto.encode_response(proto.KIND_WRITE, 0), "register answer"),
    (proto.encode_response(proto.KIND_ERROR, proto.ERR_COMMAND), "unknown command"),
    (b"\x00\x00\x00\x00", "event-batch answer was expected"),
])
def test_bad_event_answers_raise_clear_errors(answer, message):
    import numpy as np

    from cxlkv.sw.transport import EVENT_DTYPE
    # an unknown command was certainly not executed: resent once (the same answer again: an old
    # bitstream without event batches), every other bad answer is not resent
    resent = message == "unknown command"
    line = ScriptedLine([answer] * (1 + resent))
    with pytest.raises(TransportError, match=message):
        asyncio.run(line.events(np.zeros(1, EVENT_DTYPE)))
    assert len(line.sent) == 1 + resent


def test_bringup_replay_commands_run_against_the_emulated_board():
    """docs/bringup.md, section 5: a shipped trace on the board's geometry (4 x 2 queues x 2^9
    positions, 16 slots per queue), the emulator with the board's configuration and `cxlkv ctl
    --transport serial replay ... --entries 16`, as documented; equal to `policy replay --policy hw`.
    Budgets beyond the board's 16 slots, and a missing port, are refused without a traceback."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    doc = (root / "docs" / "bringup.md").read_text()
    emulate = "python -m cxlkv.sw.serial_transport emulate --board ulx3s-85f"
    replay = f"cxlkv ctl --transport serial --device /dev/pts/3 replay {TRACE} --entries 16 --json"
    policy = f"cxlkv policy replay {TRACE} --policy hw --entries 16 --json"
    for cmd in (emulate, replay, policy):
        assert cmd in doc, cmd
    cli = [sys.executable, "-m", "cxlkv.sw.cli"]
    emu = subprocess.Popen([sys.executable] + emulate.split()[1:], stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        path = emu.stdout.readline().strip()
        assert path.startswith("/dev/")
        info = subprocess.run([sys.executable, "-m", "cxlkv.sw.serial_transport", "info", "--device", path],
                              capture_output=True, text=True, cwd=root, timeout=60)
        assert info.returncode == 0, info.stderr
        geometry = {k: json.loads(info.stdout)[k] for k in ("n_layers", "n_kv_heads", "entries_log2")}
        assert geometry == {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 9}
        with SyncDevice(ModelTransport()) as ref_dev:
            assert json.loads(info.stdout)["version"] == ref_dev.info()["version"]
        out = subprocess.run(cli + replay.replace("/dev/pts/3", path).split()[1:], capture_output=True, text=True,
                             cwd=root, timeout=240)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        ref = subprocess.run(cli + policy.split()[1:], capture_output=True, text=True, cwd=root, timeout=240)
        assert ref.returncode == 0, ref.stderr
        want = json.loads(ref.stdout)
        assert got["transport"] == "serial" and got["events"] == 37_276
        for key in ("entries", "events", "reads", "read_hits", "writes", "fills", "evictions", "attention_recall",
                    "no_victim"):
            assert got[key] == want[key], key
        assert got["evictions"] > 0 and 0 < got["read_hits"] < got["reads"]
        # C = 10 % of 512 = 52 exceeds the board's 16 slots per queue: refused before any event is sent
        big = subprocess.run(cli + ["ctl", "--transport", "serial", "--device", path, "replay", TRACE,
                                    "--entries", "10%"], capture_output=True, text=True, cwd=root, timeout=120)
        assert big.returncode == 2 and "at most 16 entries per queue" in big.stderr
        assert "Traceback" not in big.stderr
        bad = subprocess.run(cli + ["ctl", "--transport", "serial", "--device", "/dev/cxlkv-no-such-tty", "replay",
                                    TRACE, "--entries", "16"], capture_output=True, text=True, cwd=root, timeout=60)
        assert bad.returncode == 2 and "cannot open serial port" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        emu.terminate()
        emu.wait(timeout=10)
        emu.stdout.close()
