"""Host software: the `cxlkv` command line, the driver and its transports."""
