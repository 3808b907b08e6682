"""Register map: generated files current, register-file model rules, driver over model and mmio, `cxlkv ctl`."""
import asyncio
import json
import mmap
from pathlib import Path

import pytest

from cxlkv.models import regmap
from cxlkv.models.regs import OKAY, SLVERR, FormatTable, RegisterFile
from cxlkv.sw import cli
from cxlkv.sw.driver import ConfigError, Device, DeviceError, SyncDevice
from cxlkv.sw.transport import MmioTransport, ModelTransport, Transport, TransportError

R = regmap.BY_NAME


def test_generated_files_are_current():
    pytest.importorskip("systemrdl", reason="systemrdl-compiler (test extra) regenerates the map")
    from cxlkv.sw import regmap_gen
    stale = [str(p) for p, text in regmap_gen.generate().items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"stale generated files (run `make regmap`): {stale}"


@pytest.mark.parametrize("compiler,std", [("gcc", "-std=c11"), ("g++", "-std=c++11")])
def test_the_c_header_compiles(tmp_path, compiler, std):
    """The generated header as a C11 and a C++11 user includes it (nothing else in the tree does),
    with its static_asserts of the struct layout checked by the compiler."""
    import shutil
    import subprocess
    if not shutil.which(compiler):
        pytest.skip(f"{compiler} not installed")
    header = Path(__file__).resolve().parent.parent / "sw" / "include" / "cxlkv_regs.h"
    src = tmp_path / ("use.c" if compiler == "gcc" else "use.cpp")
    src.write_text(f'#include "{header}"\n'
                   "int reads_offset(void) { return (int)CXLKV_REGS__READS__COUNT_bw; }\n")
    done = subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", str(src)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_map_has_fixed_identity_offsets_and_no_overlaps():
    assert (R["ID"].offset, R["VERSION"].offset, R["GEOMETRY"].offset) == (0, 4, 8)
    spans = sorted((r.offset, r.offset + 4 * r.words, r.name) for r in regmap.REGISTERS)
    spans += [(m.offset, m.offset + m.size, m.name) for m in regmap.MEMORIES]
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        assert a1 <= b0, f"{an} overlaps {bn}"


def test_reset_values_and_identity():
    rf = RegisterFile()
    assert rf.read(0x000) == (0x43584B56, OKAY)
    assert rf.read(R["ALPHA"].offset) == (0x1000, OKAY)
    assert rf.read(R["TAU"].offset) == (1000, OKAY)


def test_unmapped_and_read_only_answer_slverr():
    rf = RegisterFile()
    assert rf.read(0x018) == (0, SLVERR)
    assert rf.write(0x018, 1) == SLVERR
    assert rf.write(R["ID"].offset, 0) == SLVERR
    assert rf.write(R["READS"].offset, 0) == SLVERR
    assert rf.read(0x03) == rf.read(0x00)                 # low address bits ignored


def test_out_of_range_write_is_refused_and_flagged():
    rf = RegisterFile()
    assert rf.write(R["TAU"].offset, 0) == SLVERR
    assert rf.get("TAU", "value") == 1000                 # not applied
    assert rf.read(R["STATUS"].offset)[0] >> 2 & 1 == 1
    assert rf.read(R["REJECT_ADDR"].offset)[0] == R["TAU"].offset
    assert rf.read(R["IRQ_STATUS"].offset)[0] & 1
    assert rf.write(R["STATUS"].offset, 1 << 2) == OKAY   # W1C
    assert rf.read(R["STATUS"].offset)[0] >> 2 & 1 == 0
    assert rf.write(R["TAU"].offset, 1 << 20) == OKAY and rf.get("TAU", "value") == 1 << 20


def test_refused_unaligned_write_records_the_word_address():
    rf = RegisterFile()
    assert rf.write(R["TAU"].offset + 3, 0) == SLVERR     # low address bits ignored: TAU, refused
    assert rf.read(R["REJECT_ADDR"].offset)[0] == R["TAU"].offset


def test_strobes_merge_bytes():
    rf = RegisterFile()
    rf.write(R["SCRATCH"].offset, 0x11223344)
    rf.write(R["SCRATCH"].offset, 0xAABBCCDD, strb=0b0100)
    assert rf.read(R["SCRATCH"].offset)[0] == 0x11BB3344


def test_counter_high_word_is_latched_by_low_read():
    rf = RegisterFile()
    rf.set_hw("READS", "count", 0x1_FFFFFFFF)
    assert rf.read(R["READS"].offset) == (0xFFFFFFFF, OKAY)
    rf.set_hw("READS", "count", 0x2_00000000)
    assert rf.read(R["READS"].offset + 4) == (1, OKAY)


def test_irq_and_sticky_bits():
    rf = RegisterFile()
    rf.hw_set("IRQ_STATUS", "bi_timeout")
    assert not rf.irq()
    rf.write(R["IRQ_ENABLE"].offset, 0b10)
    assert rf.irq()
    rf.write(R["IRQ_STATUS"].offset, 0b10)
    assert not rf.irq()


def test_singlepulse_reads_zero_and_records_pulse():
    rf = RegisterFile()
    rf.write(R["CONTROL"].offset, 1 << 8 | 1)
    assert rf.pulses == [("CONTROL", "counters_clear")]
    assert rf.read(R["CONTROL"].offset)[0] == 1


def test_format_table_indirect_access():
    rf = RegisterFile()
    rf.external = FormatTable(4, rf)
    rf.write(R["FMT_SEL"].offset, 2)
    assert rf.write(R["FMT_DATA"].offset, 3) == OKAY
    assert rf.read(R["FMT_DATA"].offset) == (3, OKAY)
    rf.write(R["FMT_SEL"].offset, 9)                      # no such queue
    assert rf.read(R["FMT_DATA"].offset) == (0, SLVERR)
    assert rf.write(R["FMT_DATA"].offset, 1) == SLVERR


def test_driver_over_model():
    # Llama-70B's 640 queues: too many positions for on-chip RAM, so the tracker is external
    with SyncDevice(ModelTransport(n_layers=80, n_kv_heads=8, tracker="external")) as dev:
        info = dev.info()
        assert info["queues"] == 640 and info["version"] == "0.5"
        assert {"tracker", "prefetch"} <= set(info["caps"])
        dev.configure(alpha=0x2000, tau=4000, prefetch_window=8)
        assert dev.config()["tau"] == 4000 and dev.config()["prefetch_window"] == 8
        with pytest.raises(ConfigError, match="outside"):
            dev.configure(tau=0)
        with pytest.raises(ConfigError, match="unknown setting"):
            dev.configure(tua=5)
        dev.set_format(639, 3)
        assert dev.get_format(639) == 3
        assert set(dev.counters()) >= {"reads", "read_hits", "evictions", "bisnp_sent"}


class _RegistersOnly(Transport):
    """A transport with the model's registers and no event or access streams (as mmio and serial
    are for HDM accesses), recording every write."""
    name = "registers-only"

    def __init__(self, **params):
        self.inner = ModelTransport(**params)
        self.writes = []

    async def read32(self, addr):
        return await self.inner.read32(addr)

    async def write32(self, addr, value):
        self.writes.append((addr, value))
        await self.inner.write32(addr, value)


def test_a_refused_configure_writes_nothing():
    """Every value of a configure call is checked before the first write: a request with one value
    out of range leaves the device as it was (docs/regs.md, "Driver")."""
    t = _RegistersOnly()
    with SyncDevice(t) as dev:
        before, n = dev.config(), len(t.writes)
        with pytest.raises(ConfigError, match="TAU.value = 0 is outside"):
            dev.configure(alpha=100, tau=0)
        with pytest.raises(ConfigError, match="is not an integer"):
            dev.configure(alpha=100, tau="x")
        assert dev.config() == before and len(t.writes) == n


def test_a_replay_the_transport_cannot_drive_changes_nothing():
    """A replay is refused before the device is touched when the transport cannot inject its stream:
    its configuration and counters stay as they were."""
    from cxlkv.models.tracegen import synth
    trace = synth("recent", n_layers=2, n_kv_heads=2, prefill=8, steps=8, seed=1)
    t = _RegistersOnly(n_layers=2, n_kv_heads=2)
    with SyncDevice(t) as dev:
        before, n = dev.config(), len(t.writes)
        for via, what in (("events", "access events"), ("hdm", "HDM accesses")):
            with pytest.raises(TransportError, match=f"cannot inject {what}"):
                dev.replay(trace, 4, via=via)
        assert dev.config() == before and len(t.writes) == n


def _fake_bar(tmp_path, magic=0x43584B56, geometry=2 << 16 | 4, entries_log2=10, bitags=16):
    path = tmp_path / "resource0"
    path.write_bytes(bytes(4096))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096) as mm:
        mm[0:4] = magic.to_bytes(4, "little")
        mm[8:12] = geometry.to_bytes(4, "little")             # GEOMETRY: 4 layers x 2 KV heads
        mm[12] = entries_log2                               # GEOMETRY2.entries_log2
        mm[13] = bitags                                     # GEOMETRY2.bitags
        mm[16] = 1                                          # CAPS.tracker: the tracker's settings are taken
    return path


def test_driver_over_file_backed_mmio(tmp_path):
    path = _fake_bar(tmp_path)
    with SyncDevice(MmioTransport(str(path))) as dev:
        assert dev.info()["queues"] == 8
        dev.configure(alpha=0x1234)
    assert int.from_bytes(path.read_bytes()[R["ALPHA"].offset:R["ALPHA"].offset + 4], "little") == 0x1234


def test_mmio_errors_are_clear(tmp_path):
    with pytest.raises(TransportError, match="no such device"):
        MmioTransport(str(tmp_path / "nope"))
    path = _fake_bar(tmp_path, magic=0xFFFFFFFF)            # absent device reads all ones
    with pytest.raises(DeviceError, match="not a cxlkv controller"):
        SyncDevice(MmioTransport(str(path)))
    # the right ID over registers no controller has (a 0 x 0 geometry, no positions, no BI tags)
    for geometry, entries_log2, bitags in ((0, 10, 16), (2 << 16, 10, 16), (2 << 16 | 4, 0, 16),
                                           (2 << 16 | 4, 10, 0)):
        path = _fake_bar(tmp_path, geometry=geometry, entries_log2=entries_log2, bitags=bitags)
        with pytest.raises(DeviceError, match="reports a geometry no controller has"):
            SyncDevice(MmioTransport(str(path)))


def test_driver_refuses_unknown_major_version(tmp_path):
    t = ModelTransport()
    t.regs.stored[("VERSION", "major")] = 7
    with pytest.raises(DeviceError, match="version 7"):
        asyncio.run(Device.open(t))


def test_ctl_cli(capsys, tmp_path):
    assert cli.main(["ctl", "--transport", "model", "info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "0x43584b56"
    assert cli.main(["ctl", "config", "tau=2000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tau"] == 2000
    assert cli.main(["ctl", "config", "tau=0"]) == 2
    assert "outside" in capsys.readouterr().err
    assert cli.main(["ctl", "--transport", "mmio", "info"]) == 2
    assert "--device" in capsys.readouterr().err
    assert cli.main(["ctl", "--transport", "serial", "info"]) == 2
    assert cli.main(["ctl", "stats"]) == 0
    assert "read_hits" in capsys.readouterr().out
