"""`cxlkv ctl`: talk to a controller through the host driver, over any transport."""

HELP = "talk to a cxlkv controller through the driver (model, sim, mmio, serial)"

TRANSPORTS = ("model", "mmio", "sim", "serial")


def add_arguments(p):
    p.add_argument("--transport", "-t", choices=TRANSPORTS, default="model",
                   help="model: the golden model; sim: the Verilated controller (built on first use); "
                        "mmio: a PCIe BAR resource file or /dev/uioN; serial: the FPGA board's UART bridge (--device /dev/ttyUSB0)")
    p.add_argument("--device", help="mmio: /sys/bus/pci/devices/<bdf>/resourceN, /dev/uioN or a file; "
                                    "serial: the port, e.g. /dev/ttyUSB0")
    p.add_argument("--baud", type=int, default=115200, help="serial: baud rate of the board's UART bridge")
    p.add_argument("--offset", type=lambda s: int(s, 0), default=0, help="mmio: byte offset of the register block")
    sub = p.add_subparsers(dest="ctl_cmd", metavar="ACTION", required=True)
    i = sub.add_parser("info", help="identity, version and geometry read from the device")
    i.add_argument("--json", action="store_true")
    s = sub.add_parser("stats", help="the device's counters and status")
    s.add_argument("--json", action="store_true")
    c = sub.add_parser("config", help="show the configuration, or set NAME=VALUE pairs")
    c.add_argument("settings", nargs="*", metavar="NAME=VALUE")
    c.add_argument("--json", action="store_true")


def _transport(args):
    from cxlkv.errors import CxlkvError
    from cxlkv.sw.transport import MmioTransport, ModelTransport, SimTransport
    if args.transport == "model":
        return ModelTransport()
    if args.transport == "sim":
        return SimTransport()
    if args.transport == "mmio":
        if not args.device:
            raise CxlkvError("--transport mmio needs --device PATH")
        return MmioTransport(args.device, offset=args.offset)
    if args.transport == "serial":
        if not args.device:
            raise CxlkvError("--transport serial needs --device PORT (e.g. /dev/ttyUSB0)")
        from cxlkv.sw.serial_transport import SerialTransport
        return SerialTransport(args.device, baud=args.baud)
    raise CxlkvError(f"unknown transport '{args.transport}'")


def _table(d):
    w = max(len(k) for k in d)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in d.items())


def run(args):
    import json

    from cxlkv.errors import CxlkvError
    from cxlkv.sw.driver import CONFIG_FIELDS, SyncDevice
    with SyncDevice(_transport(args)) as dev:
        if args.ctl_cmd == "info":
            out = dev.info()
        elif args.ctl_cmd == "stats":
            out = {**dev.counters(), **{f"status.{k}": v for k, v in dev.status().items()}}
        else:
            settings = {}
            for item in args.settings:
                name, sep, value = item.partition("=")
                if not sep or name not in CONFIG_FIELDS:
                    raise CxlkvError(f"bad setting {item!r}: use NAME=VALUE with NAME one of {', '.join(CONFIG_FIELDS)}")
                try:
                    settings[name] = int(value, 0)
                except ValueError:
                    raise CxlkvError(f"bad value in {item!r}: an integer is needed") from None
            if settings:
                dev.configure(**settings)
            out = dev.config()
        print(json.dumps(out) if args.json else _table(out))
    return 0
