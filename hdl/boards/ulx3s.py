"""Radiona ULX3S with the LFE5U-85F (amaranth-boards ``ULX3S_85F_Platform``).

25 MHz oscillator on G2, FTDI FT231X UART (FPGA rx M1, tx L4), eight LEDs D0..D7,
buttons (F1 = ``button_fire`` 0 resets the design), 32 MB SDRAM (not used yet: the
controller has no memory port; docs/fpga.md).
"""
from cxlkv.hdl.boards import Board

#: Llama-3-8B's geometry (32 layers x 8 KV heads = 256 queues), 8 Ki positions per queue.
#: Today's controller keeps only the format table and the cold list on chip, so this is far
#: from the part's limits; docs/fpga.md tracks the figures as blocks are integrated.
CONTROLLER = {"n_layers": 32, "n_kv_heads": 8, "entries_log2": 13, "bitags": 16}


def _platform():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    return ULX3S_85F_Platform(toolchain="Trellis")


def _leds(platform):
    return [platform.request("led", i, dir="-") for i in range(8)]


BOARD = Board(
    name="ulx3s-85f", description="Radiona ULX3S, LFE5U-85F-6BG381", platform=_platform,
    clock="clk25", clock_mhz=25.0, reset_button=("button_fire", 0), leds=_leds, controller=CONTROLLER,
    program="openFPGALoader -b ulx3s build/fpga/ulx3s-85f/top.bit   (SRAM; add -f to write the flash)")
