"""Radiona ULX3S with the LFE5U-85F (amaranth-boards ``ULX3S_85F_Platform``).

25 MHz oscillator on G2, FTDI FT231X UART (FPGA rx M1, tx L4), eight LEDs D0..D7,
buttons (F1 = ``button_fire`` 0 resets the design), 32 MB SDRAM (not used yet: the
tracker's memories are on chip; docs/fpga.md).
"""
from cxlkv.hdl.boards import Board

#: The controller on the board: the tracker with its per-position memories in block RAM.
#: 4 layers x 2 KV heads x 2^10 positions = 8 Ki words per region: the harness's default build
#: (so a replay over the UART is the same build as `ctl --transport sim replay`), the geometry of
#: the shipped traces (4 x 2, positions < 512), and ~30 % of the part's DP16KD blocks
#: (docs/fpga.md, "The tracker on the board": the BRAM arithmetic; 16 Ki words is the most that fits).
#: Llama-3-8B's 32 x 8 x 2^13 needs 2 Mi words per region: device DRAM behind the tracker's
#: memory ports (``tracker="external"``), not wired yet.
#: default core clock of the board top: met with margin by the board top with the tracker (36.39 MHz
#: achieved at a 125 MHz constraint, docs/fpga.md); the goal stays 125 MHz (make bench)
CORE_MHZ = 30.0

CONTROLLER = {"n_layers": 4, "n_kv_heads": 2, "entries_log2": 10, "bitags": 16, "tracker": "onchip"}


def _platform():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    return ULX3S_85F_Platform(toolchain="Trellis")


def _leds(platform):
    return [platform.request("led", i, dir="-") for i in range(8)]


BOARD = Board(
    name="ulx3s-85f", description="Radiona ULX3S, LFE5U-85F-6BG381", platform=_platform,
    clock="clk25", clock_mhz=25.0, reset_button=("button_fire", 0), leds=_leds, controller=CONTROLLER,
    # the tracker's sequential engine closes 36 MHz, not the 125 MHz goal (docs/fpga.md): the default
    # bitstream runs at a clock it meets; `--core-mhz` raises it as the pipelined tracker lands
    core_mhz=CORE_MHZ,
    program="openFPGALoader -b ulx3s build/fpga/ulx3s-85f/top.bit   (SRAM; add -f to write the flash)")
