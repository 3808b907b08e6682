# Clock and timing constraints TEMPLATE for hdl/boards/vendor_template.py (CXLVendorTop) on a
# PCIe/CXL-capable vendor board. Not used by any build in this repository: building with a
# vendor's tools is out of scope (docs/fpga.md). Values in <angle brackets> come from the board's
# and the CXL IP's documentation; nothing here is a measured or vendor-confirmed figure.
#
# One clock domain: the CXL IP's user-logic clock drives CXLVendorTop's `clk` (Amaranth's sync
# domain). Its frequency is the IP's (the user interface of a x16 link is typically several hundred
# MHz with a 512-bit data path); the policy logic's goal is one event per clock at that rate.

set USER_CLK_PERIOD_NS <period of the CXL IP user clock, ns>

create_clock -name cxl_user_clk -period $USER_CLK_PERIOD_NS [get_ports {clk}]

# The IP's own clocks (PCIe reference clock, transceiver clocks) are constrained by the IP's
# generated constraint files; derive what the PLLs produce.
derive_pll_clocks
derive_clock_uncertainty

# Reset: synchronised inside the IP's reset controller; the top sees a synchronous `rst`.
set_false_path -from [get_ports {rst}]

# Board I/O that is not timing-relevant (LEDs, a debug UART if the board adds one).
set_false_path -to [get_ports {led[*]}]
