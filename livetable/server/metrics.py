"""Prometheus metrics, without a client library: a few counters, gauges and histograms
rendered in the text exposition format at ``GET /metrics``."""

from __future__ import annotations

from collections import defaultdict

_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        self.n += 1
        self.total += seconds
        for i, bound in enumerate(_BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1
                return
        self.counts[-1] += 1

    def render(self, name: str) -> list[str]:
        lines, running = [], 0
        for bound, count in zip(_BUCKETS, self.counts, strict=False):
            running += count
            lines.append(f'{name}_bucket{{le="{bound}"}} {running}')
        lines.append(f'{name}_bucket{{le="+Inf"}} {self.n}')
        lines.append(f"{name}_sum {self.total}")
        lines.append(f"{name}_count {self.n}")
        return lines


class Metrics:
    def __init__(self) -> None:
        self.connections = 0
        self.frames_in = 0
        self.frames_out = 0
        self.counters: dict[str, int] = defaultdict(int)
        self.bets: dict[str, int] = defaultdict(int)
        self.fanout_latency = Histogram()
        self.settlement = Histogram()
        #: series (a name, with labels if any: 'x{table="t1"}') -> value
        self.gauges: dict[str, float] = {}

    def inc(self, name: str, by: int = 1) -> None:
        self.counters[name] += by

    def bet(self, code: str) -> None:
        self.bets[code] += 1

    def fanout(self, frames: int, seconds: float) -> None:
        if frames:
            self.fanout_latency.observe(seconds)

    def settled(self, bets: int, seconds: float) -> None:
        self.settlement.observe(seconds)
        self.counters["livetable_bets_settled_total"] += bets

    def render(self) -> str:
        lines = [
            "# TYPE livetable_connections gauge",
            f"livetable_connections {self.connections}",
            "# TYPE livetable_frames_in_total counter",
            f"livetable_frames_in_total {self.frames_in}",
            "# TYPE livetable_frames_out_total counter",
            f"livetable_frames_out_total {self.frames_out}",
            "# TYPE livetable_bets_total counter",
        ]
        lines += [f'livetable_bets_total{{result="{code}"}} {n}' for code, n in
                  sorted(self.bets.items())]
        for name, value in sorted(self.counters.items()):
            lines += [f"# TYPE {name} counter", f"{name} {value}"]
        typed = set()
        for series, gauge in sorted(self.gauges.items()):
            name = series.split("{", 1)[0]
            if name not in typed:
                typed.add(name)
                lines.append(f"# TYPE {name} gauge")
            lines.append(f"{series} {gauge}")
        lines.append("# TYPE livetable_fanout_seconds histogram")
        lines += self.fanout_latency.render("livetable_fanout_seconds")
        lines.append("# TYPE livetable_settlement_seconds histogram")
        lines += self.settlement.render("livetable_settlement_seconds")
        return "\n".join(lines) + "\n"
