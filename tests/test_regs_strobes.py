"""The register block's byte enables in Amaranth's simulator, against the register-file model:
every WSTRB pattern, the empty and non-contiguous ones included, which the cocotb bench cannot
send (cocotbext-axi's master makes strobes from an address and a length: contiguous bytes)."""
from amaranth.sim import Simulator

from cxlkv.hdl.regs import RegisterBlock
from cxlkv.models import regmap
from cxlkv.models.regs import RegisterFile

R = regmap.BY_NAME


def test_every_byte_enable_pattern_equals_the_model():
    dut = RegisterBlock()
    bus = dut.s_axil
    model = RegisterFile()
    seen = []

    async def write(ctx, addr, data, strb):
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.wdata, data)
        ctx.set(bus.wstrb, strb)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        ctx.set(bus.bready, 1)
        await ctx.tick().until(bus.awready)                  # AW and W taken together
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        *_, bresp = await ctx.tick().sample(bus.bresp).until(bus.bvalid)     # as taken at the edge
        return bresp

    async def read(ctx, addr):
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.rready, 1)
        await ctx.tick().until(bus.arready)
        ctx.set(bus.arvalid, 0)
        *_, rdata, rresp = await ctx.tick().sample(bus.rdata, bus.rresp).until(bus.rvalid)
        return rdata, rresp

    async def bench(ctx):
        # SCRATCH: free bits; ALPHA: a ranged field (bytes checked alone can be refused);
        # ID: read only; IRQ_STATUS: write-1-to-clear bits (set one first)
        targets = [(R["SCRATCH"].offset, 0xA5C3_5A3C), (R["ALPHA"].offset, 0x0000_8001),
                   (R["ID"].offset, 0xFFFF_FFFF), (R["IRQ_STATUS"].offset, 0xFFFF_FFFF)]
        sticky = next(f for f in R["IRQ_STATUS"].fields if f.woclr and hasattr(dut, f"irq_status_{f.name}_set"))
        port = getattr(dut, f"irq_status_{sticky.name}_set")
        for addr, value in targets:
            for strb in range(16):
                if addr == R["IRQ_STATUS"].offset:
                    ctx.set(port, 1)
                    await ctx.tick()
                    ctx.set(port, 0)
                    model.hw_set("IRQ_STATUS", sticky.name)
                data = value ^ (strb * 0x0101_0101)            # a different value per pattern
                got = await write(ctx, addr, data, strb)
                want = model.write(addr, data, strb)
                assert got == want, f"write {addr:#05x} strb {strb:#x}: BRESP {got}, model {want}"
                got = await read(ctx, addr)
                want = model.read(addr)
                assert got == want, f"read {addr:#05x} after strb {strb:#x}: {got}, model {want}"
                seen.append(strb)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert sorted(set(seen)) == list(range(16))
