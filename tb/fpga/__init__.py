"""FPGA figures for ``make bench`` (bench.py): nextpnr's fmax and utilisation on the ULX3S 85F.

No cocotb bench here: the board top's pieces are verified in tb/uartbridge and the block benches.
"""
