"""The controller top in the Verilator harness against its golden model, through the host driver."""
import asyncio
import random

import pytest

from cxlkv.models import regmap
from cxlkv.sw.driver import ConfigError, SyncDevice
from cxlkv.sw.transport import BusError, ModelTransport, SimTransport

R = regmap.BY_NAME
PARAMS = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 10}


@pytest.fixture()
def sim():
    """A fresh harness per test (the build is cached; starting takes a fraction of a second)."""
    t = SimTransport(**PARAMS)
    yield t
    asyncio.run(t.close())


def _access(t, op, addr, value=0):
    """(status, value) of one access; BusError becomes its response code."""
    async def go():
        try:
            if op == "r":
                return 0, await t.read32(addr)
            await t.write32(addr, value)
            return 0, 0
        except BusError as exc:
            return exc.resp, 0
    return asyncio.run(go())


def _random_ops(rng, n):
    addrs = [r.offset + 4 * w for r in regmap.REGISTERS for w in range(r.words)]
    addrs += [regmap.MEMORIES[0].offset + 4 * i for i in range(0, 128, 7)] + [0x018, 0x3FC, 0xFFC]
    for _ in range(n):
        addr = rng.choice(addrs)
        if rng.random() < 0.5:
            yield "r", addr, 0
        elif addr == R["FMT_SEL"].offset:
            yield "w", addr, rng.randrange(10)
        else:
            yield "w", addr, rng.choice((0, 1, 2, 5, 1000, 0xFFFF, 1 << 20, (1 << 20) + 1, rng.getrandbits(32)))


def test_sim_equals_model_on_random_register_traffic(sim):
    model = ModelTransport(**PARAMS)
    rng = random.Random(11)
    mismatches = []
    for i, (op, addr, value) in enumerate(_random_ops(rng, 3000)):
        got, exp = _access(sim, op, addr, value), _access(model, op, addr, value)
        if got != exp:
            mismatches.append((i, op, hex(addr), value, got, exp))
    assert not mismatches, mismatches[:5]


def test_the_comparison_can_fail(sim):
    """Negative test: a model with another geometry must disagree with the harness."""
    wrong = ModelTransport(n_layers=5, n_kv_heads=2, entries_log2=10)
    assert _access(sim, "r", R["GEOMETRY"].offset) != _access(wrong, "r", R["GEOMETRY"].offset)


def test_driver_same_answers_over_sim_and_model(sim):
    results = []
    for t in (sim, ModelTransport(**PARAMS)):
        dev = SyncDevice.__new__(SyncDevice)
        dev._loop = asyncio.new_event_loop()
        from cxlkv.sw.driver import Device
        dev._dev = dev._loop.run_until_complete(Device.open(t))
        info = dev.info()
        info.pop("transport")
        dev.configure(alpha=0x3000, tau=777, queue_budget=512)
        with pytest.raises(ConfigError):
            dev.configure(queue_budget=0)
        dev.set_format(7, 1)
        results.append((info, dev.config(), dev.status(), dev.get_format(7), dev.counters()))
        dev._loop.close()
    assert results[0] == results[1]
    assert results[0][0]["queues"] == 8


def test_full_geometry_elaborates():
    from cxlkv.hdl.controller import Controller
    from cxlkv.tb.runner import generate_verilog
    assert "module controller" in generate_verilog(Controller(n_layers=80, n_kv_heads=8, entries_log2=17),
                                                   "controller")
