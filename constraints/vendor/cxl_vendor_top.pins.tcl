# Pin-out TEMPLATE for a PCIe/CXL-capable vendor board around hdl/boards/vendor_template.py.
# Not used by any build here (docs/fpga.md). <PIN_...> placeholders come from the board's
# schematic; the PCIe/CXL lanes and their reference clock are placed by the vendor's CXL IP and
# its generated constraints, not by user logic.
#
# What user logic owns: the IP's user clock and reset (internal), the AXI4-Lite CSR window, the
# CXL.mem message channels and the AXI4 memory port (all internal, between IP blocks), and a few
# board pins for bring-up.

# PCIe/CXL reference clock and lanes: assigned by the CXL IP's constraints
#   refclk      -> <PIN_REFCLK_P> / <PIN_REFCLK_N>   (100 MHz PCIe reference clock)
#   tx[15:0]    -> <PINS_TX>                          (x16)
#   rx[15:0]    -> <PINS_RX>
#   perst_n     -> <PIN_PERST_N>                      (PCIe fundamental reset from the slot)

# Device memory (DDR4/DDR5/HBM): assigned by the memory controller IP; CXLVendorTop.m_axi connects
# to the controller's AXI4 user port inside the FPGA.

# Bring-up pins. CXLVendorTop has no LED port: the board wrapper that instantiates it (beside the
# CXL IP) brings its outputs to pins; a heartbeat or the IP's link-up status, if wanted, are the
# wrapper's own logic. Its outputs worth an LED: `irq` (the controller's interrupt) and
# `unsupported` (a 16-bit count: e.g. its bit 0, or "non-zero", toggles with each message the
# template does not handle yet).
set_location_assignment <PIN_LED0> -to irq_led           ;# CXLVendorTop.irq
set_location_assignment <PIN_LED1> -to unsupported_led   ;# CXLVendorTop.unsupported != 0
set_instance_assignment -name IO_STANDARD "<IO_STANDARD, e.g. 1.8 V>" -to irq_led
set_instance_assignment -name IO_STANDARD "<IO_STANDARD, e.g. 1.8 V>" -to unsupported_led
