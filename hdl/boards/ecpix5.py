"""LambdaConcept ECPIX-5 with the LFE5UM5G-85F (amaranth-boards ``ECPIX585Platform``).

100 MHz oscillator on K23, FTDI FT2232 channel B as the UART (FPGA rx R26, tx R24),
four RGB LEDs (active low; the platform inverts them), reset button AB1.
"""
from cxlkv.hdl.boards import Board
from cxlkv.hdl.boards.ulx3s import CONTROLLER

#: default core clock: the goal's. The default build is the bench's (`fpga.ecpix5_85f.*`, built at 125 MHz
#: with nextpnr's default seed): 151.24 MHz on a042c29's netlist, met (docs/fpga.md, "Figures")
CORE_MHZ = 125.0


def _platform():
    from amaranth_boards.ecpix5 import ECPIX585Platform
    return ECPIX585Platform(toolchain="Trellis")


def _leds(platform):
    # eight indicators on four RGB LEDs: green and red of each (blue unused)
    out = []
    for i in range(4):
        rgb = platform.request("rgb_led", i, dir="-")
        out += [rgb.g, rgb.r]
    return out


BOARD = Board(
    name="ecpix5-85f", description="LambdaConcept ECPIX-5, LFE5UM5G-85F-8BG554", platform=_platform,
    clock="clk100", clock_mhz=100.0, reset_button=("rst", 0), leds=_leds, controller=CONTROLLER,
    core_mhz=CORE_MHZ,
    program="openFPGALoader -b ecpix5 build/fpga/ecpix5-85f/top.bit")
