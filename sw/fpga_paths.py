"""Every failing register endpoint of a routed build, from nextpnr's SDF (docs/fpga.md).

nextpnr's log names one critical path per clock. A design that misses its clock by 25 % fails
at thousands of endpoints, and cutting the one named path only shows the next. This reads the
delays nextpnr back-annotates into ``top.sdf`` (cell arcs and every routed connection, the
slowest corner, as nextpnr's own analysis uses), propagates the latest arrival from every
register's clock-to-output through the combinational arcs, and reports the endpoints whose
arrival plus setup exceeds the period: counted and grouped by the register they end at and by
the register their worst path starts from, with the worst paths spelled out.

    python -m cxlkv.sw.fpga paths build/fpga/ulx3s-85f/top.sdf --period 8 --paths 3

It handles the subset of SDF 3.0 nextpnr-ecp5 writes (one clock, IOPATH, INTERCONNECT,
SETUPHOLD); it is a guide to where the slack goes, not a sign-off: nextpnr's figure is the
figure. On the builds measured it gives nextpnr's worst path to the picosecond.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from cxlkv.errors import CxlkvError

_TOKEN = re.compile(r'\(|\)|"[^"]*"|[^\s()]+')
_TIMESCALE = {"1ps": 1e-3, "10ps": 1e-2, "100ps": 0.1, "1ns": 1.0}
#: register input pins checked at the clock edge (nextpnr lists setup only for some; the rest are 0)
_FF_INPUTS = ("DI", "CE", "LSR", "M")
#: loads from which `paths` reports a net on failing paths (Analysis.wide_nets)
WIDE_NET_LOADS = 64
#: a generated cell's suffix after the signal's name (Yosys and nextpnr naming)
_SUFFIX = re.compile(r"(_TRELLIS_FF_Q(_\d+)?|_DP16KD.*|_MULT18X18D.*)$")


def _tree(text: str, source: str):
    stack = [[]]
    for tok in _TOKEN.findall(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise CxlkvError(f"{source}: not an SDF file: unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok.strip('"'))
    if len(stack) != 1 or not stack[0] or not isinstance(stack[0][0], list) or stack[0][0][:1] != ["DELAYFILE"]:
        raise CxlkvError(f"{source}: not an SDF file (no complete DELAYFILE)")
    return stack[0][0]


def _delay(triple, source: str) -> float:
    """The slowest value of ``(min:typ:max)``, in the file's time unit."""
    text = triple[0] if isinstance(triple, list) and triple else triple
    try:
        values = [float(v) for v in str(text).split(":") if v]
    except ValueError:
        raise CxlkvError(f"{source}: bad delay {text!r}") from None
    return max(values) if values else 0.0


def _pin(item) -> str:
    return item[-1] if isinstance(item, list) else item     # "(posedge CLK)" -> CLK


@dataclass
class TimingGraph:
    edges: dict = field(default_factory=lambda: defaultdict(list))   # pin -> [(pin, ns)]
    launch: dict = field(default_factory=dict)                        # register output pin -> clock-to-out ns
    setup: dict = field(default_factory=dict)                         # register input pin -> setup ns
    wires: set = field(default_factory=set)                           # (pin, pin) arcs that are routing


def load_sdf(path: Path) -> TimingGraph:
    """The timing graph of nextpnr's SDF: pins ``instance/PORT``, delays in ns."""
    path = Path(path)
    if not path.is_file():
        raise CxlkvError(f"{path}: no such file (nextpnr writes it with --sdf; `bitstream` builds do)")
    source = str(path)
    root = _tree(path.read_text().replace("\\", ""), source)
    scale = 1e-3
    g = TimingGraph()
    for item in root[1:]:
        if not isinstance(item, list):
            continue
        if item[0] == "TIMESCALE":
            unit = "".join(item[1:])
            if unit not in _TIMESCALE:
                raise CxlkvError(f"{source}: unknown TIMESCALE {unit!r}")
            scale = _TIMESCALE[unit]
        if item[0] != "CELL":
            continue
        fields = {sub[0]: sub[1:] for sub in item[1:] if isinstance(sub, list) and sub}
        inst = (fields.get("INSTANCE") or [""])[0]           # the top cell's INSTANCE is empty
        if (fields.get("CELLTYPE") or [""])[0] == "TRELLIS_FF":
            for port in _FF_INPUTS:
                g.setup.setdefault(f"{inst}/{port}", 0.0)
        for sub in item[1:]:
            if not isinstance(sub, list) or not sub:
                continue
            if sub[0] == "DELAY":
                for block in sub[1:]:
                    for arc in block[1:]:
                        if arc[0] == "IOPATH" and len(arc) >= 4:
                            src, dst, d = _pin(arc[1]), _pin(arc[2]), _delay(arc[3], source) * scale
                            if src.startswith("CLK") or src == "WCK":      # a register's clock to its output
                                key = f"{inst}/{dst}"
                                g.launch[key] = max(g.launch.get(key, 0.0), d)
                            else:
                                g.edges[f"{inst}/{src}"].append((f"{inst}/{dst}", d))
                        elif arc[0] == "INTERCONNECT" and len(arc) >= 4:
                            g.edges[arc[1]].append((arc[2], _delay(arc[3], source) * scale))
                            g.wires.add((arc[1], arc[2]))
            elif sub[0] == "TIMINGCHECK":
                for check in sub[1:]:
                    if check[0] in ("SETUPHOLD", "SETUP") and len(check) >= 4:
                        key = f"{inst}/{_pin(check[1])}"
                        g.setup[key] = max(g.setup.get(key, 0.0), _delay(check[3], source) * scale)
    if not g.launch:
        raise CxlkvError(f"{source}: no register in the SDF (not a routed nextpnr design?)")
    return g


def signal_of(pin: str) -> str:
    """The signal a register pin belongs to: ``a.b.snap_mx_TRELLIS_FF_Q_167/DI`` -> ``a.b.snap_mx``."""
    return _SUFFIX.sub("", pin.split("/")[0])


@dataclass
class Analysis:
    period: float
    endpoints: list          # [(arrival + setup ns, pin)], worst first
    arrival: dict
    pred: dict
    wires: set = field(default_factory=set)

    @cached_property
    def failing(self) -> list:
        """The endpoints beyond the period (a prefix of ``endpoints``), worst first."""
        return [e for e in self.endpoints if e[0] > self.period]

    def path(self, pin: str) -> list:
        """[(arrival ns, pin)] from the launching register to ``pin``."""
        out = [(self.arrival[pin], pin)]
        while pin in self.pred:
            pin = self.pred[pin]
            out.append((self.arrival[pin], pin))
        return out[::-1]

    @cached_property
    def total_ns(self) -> float:
        """How far the failing endpoints are beyond the period, summed (ns): the total negative
        slack. Steadier over placements than the worst path, which one route can set."""
        return sum(t - self.period for t, _ in self.failing)

    def by_end(self) -> list:
        """[(signal, failing endpoints, worst ns)], worst first."""
        groups = defaultdict(lambda: [0, 0.0])
        for t, pin in self.failing:
            e = groups[signal_of(pin)]
            e[0] += 1
            e[1] = max(e[1], t)
        return sorted(((k, c, w) for k, (c, w) in groups.items()), key=lambda r: (-r[2], r[0]))

    def levels(self, pin: str) -> int:
        """LUT levels on the worst path to ``pin``: the LUT outputs (``F``) it passes. A PFU mux
        behind its LUT (a wider LUT in one slice) and a carry chain add none."""
        return sum(1 for _, p in self.path(pin)[1:] if p.endswith("/F"))

    def route_ns(self, pin: str) -> float:
        """The routing part of the worst path's delay to ``pin`` (its INTERCONNECT arcs)."""
        path = self.path(pin)
        return sum(t1 - t0 for (t0, p0), (t1, p1) in zip(path, path[1:]) if (p0, p1) in self.wires)

    def by_levels(self) -> list:
        """[(LUT levels, failing endpoints, worst ns, routing's mean share of their delay)], by levels."""
        groups = defaultdict(list)
        for t, pin in self.failing:
            groups[self.levels(pin)].append((t, self.route_ns(pin) / self.arrival[pin]))
        return [(lv, len(v), max(t for t, _ in v), sum(r for _, r in v) / len(v)) for lv, v in sorted(groups.items())]

    @cached_property
    def loads(self) -> Counter:
        """Routed loads per driving pin (its INTERCONNECT arcs)."""
        return Counter(src for src, _ in self.wires)

    def wide_nets(self, min_loads: int = WIDE_NET_LOADS) -> list:
        """[(driving pin, loads, failing endpoints whose worst path passes it, its worst route ns)] for
        the nets of ``min_loads`` loads or more on failing paths, most paths first: the nets whose
        routes a copy per group of loads would shorten."""
        paths, worst = Counter(), {}
        for _, pin in self.failing:
            path = self.path(pin)
            for (t0, p0), (t1, p1) in zip(path, path[1:]):
                if (p0, p1) in self.wires and self.loads[p0] >= min_loads:
                    paths[p0] += 1
                    worst[p0] = max(worst.get(p0, 0.0), t1 - t0)
        return [(p0, self.loads[p0], c, worst[p0]) for p0, c in sorted(paths.items(), key=lambda r: (-r[1], r[0]))]

    def by_start(self) -> list:
        """[(signal, failing endpoints whose worst path starts there)], most first."""
        return sorted(Counter(signal_of(self.path(pin)[0][1]) for _, pin in self.failing).items(),
                      key=lambda r: (-r[1], r[0]))


def analyse(g: TimingGraph, period: float) -> Analysis:
    """Latest arrival at every pin (a topological pass from the registers' outputs)."""
    indeg = Counter(dst for outs in g.edges.values() for dst, _ in outs)
    nodes = set(g.edges) | set(indeg) | set(g.launch)
    arrival = {pin: g.launch[pin] for pin in g.launch}        # pins reached from a register only
    pred = {}
    ready = [pin for pin in nodes if indeg[pin] == 0]
    seen = 0
    while ready:
        pin = ready.pop()
        seen += 1
        for dst, d in g.edges.get(pin, ()):
            if pin in arrival and arrival[pin] + d > arrival.get(dst, -1.0):
                arrival[dst], pred[dst] = arrival[pin] + d, pin
            indeg[dst] -= 1
            if indeg[dst] == 0:
                ready.append(dst)
    if seen != len(nodes):
        raise CxlkvError(f"combinational loop in the SDF: {len(nodes) - seen} pins never settle")
    ends = sorted(((arrival[p] + s, p) for p, s in g.setup.items() if p in arrival), reverse=True)
    return Analysis(period, ends, arrival, pred, g.wires)


def report(path: Path, period: float, groups: int = 25, paths: int = 1) -> str:
    a = analyse(load_sdf(path), period)
    if not a.endpoints:
        raise CxlkvError(f"{path}: no register endpoint is reached from a register")
    lines = [f"{path}: {len(a.endpoints)} register endpoints; worst {a.endpoints[0][0]:.2f} ns "
             f"({1000 / a.endpoints[0][0]:.2f} MHz); {len(a.failing)} fail at {period:g} ns ({1000 / period:.2f} MHz), "
             f"{a.total_ns:.2f} ns beyond it in all"]
    if a.failing:
        lines += ["", "failing endpoints by the register they end at (worst first):",
                  f"{'count':>7} {'worst ns':>8}  signal"]
        lines += [f"{c:7d} {w:8.2f}  {k}" for k, c, w in a.by_end()[:groups]]
        lines += ["", "failing endpoints by the register their worst path starts from:", f"{'count':>7}  signal"]
        lines += [f"{c:7d}  {k}" for k, c in a.by_start()[:groups]]
        lines += ["", "failing endpoints by the LUT levels of their worst path (a PFU mux or carry chain adds none):",
                  f"{'levels':>7} {'count':>7} {'worst ns':>8}  routing's share of the delay (mean)"]
        lines += [f"{lv:7d} {c:7d} {w:8.2f}  {r:.2f}" for lv, c, w, r in a.by_levels()]
        wide = a.wide_nets()
        lines += ["", f"nets of {WIDE_NET_LOADS} loads or more on failing paths: {len(wide)} "
                      "(paths through each, its worst route):",
                  f"{'paths':>7} {'loads':>7} {'route ns':>8}  driving pin"]
        lines += [f"{c:7d} {n:7d} {r:8.2f}  {p0}" for p0, n, c, r in wide[:groups]]
    for t, pin in a.endpoints[:paths]:
        lines += ["", f"path to {pin}: {t:.2f} ns (arrival, ns, at each pin)"]
        lines += [f"  {at:6.2f}  {p}" for at, p in a.path(pin)]
    return "\n".join(lines)
