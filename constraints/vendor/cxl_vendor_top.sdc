# Clock and timing constraints TEMPLATE for hdl/boards/vendor_template.py (CXLVendorTop) on a
# PCIe/CXL-capable vendor board. Not used by any build in this repository: building with a
# vendor's tools is out of scope (docs/fpga.md). Values in <angle brackets> come from the board's
# and the CXL IP's documentation; nothing here is a measured or vendor-confirmed figure.
#
# One clock domain: the CXL IP's user-logic clock drives CXLVendorTop's `clk` (Amaranth's sync
# domain). Its frequency is the IP's (the user interface of a x16 link is typically several hundred
# MHz with a 512-bit data path); the policy logic's goal is one event per clock at that rate.

# CXLVendorTop sits inside the FPGA beside the IP, so `clk` is not a device pin: its clock is the
# IP's PLL output, which derive_pll_clocks below creates from the IP's generated constraints. Only
# if the IP documents its user clock as a pin-less net without a generated clock, create it on that
# net (the path is the IP's; `get_ports` would match nothing):
#   create_clock -name cxl_user_clk -period <period of the CXL IP user clock, ns> [get_pins {<ip_instance>|<user_clk_pin>}]

# The IP's own clocks (PCIe reference clock, transceiver clocks) are constrained by the IP's
# generated constraint files; derive what the PLLs produce.
derive_pll_clocks
derive_clock_uncertainty

# Reset: the IP's reset controller synchronises it to the user clock, so CXLVendorTop's `rst` is a
# synchronous signal and is timed like any other path (no false path on it). Only the raw
# asynchronous reset in front of that synchroniser (PCIe PERST#) is cut, by the IP's constraints.

# Board I/O that is not timing-relevant (the bring-up LEDs of the pin template).
set_false_path -to [get_ports {irq_led unsupported_led}]
