"""Prometheus metrics at ``GET /metrics``, exposed by ``prometheus_client``.

The library owns the exposition format (types, help, label escaping — a table id with a
quote or a newline in it stays one label value). The hot paths keep plain integers
(``frames_out`` is bumped once per frame per connection during a fan-out, where even an
uncontended lock per increment would show): a custom collector reads them at scrape time.
Histograms are the library's own, observed once per fan-out batch or settlement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(self) -> None:
        self.connections = 0
        self.frames_in = 0
        self.frames_out = 0
        self.counters: dict[str, int] = defaultdict(int)
        self.bets: dict[str, int] = defaultdict(int)
        self.tips: dict[str, int] = defaultdict(int)
        #: table -> steps its store refused as out of step (the engine reloaded)
        self.steps_refused: dict[str, int] = defaultdict(int)
        #: gauge name -> label values (as a sorted tuple of pairs) -> value
        self._gauges: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
        self.registry = CollectorRegistry(auto_describe=False)
        self.fanout_latency = Histogram(
            "livetable_fanout_seconds", "Time to hand one table step to every connection",
            buckets=_BUCKETS, registry=self.registry)
        self.settlement = Histogram(
            "livetable_settlement_seconds", "Time from a round's settlement step to its "
            "private results being published", buckets=_BUCKETS, registry=self.registry)
        self.gc_pause = Histogram(
            "livetable_gc_pause_seconds", "Garbage collections timed by the tables: the full "
            "ones, and the young ones held through a close of betting (server/gcpolicy.py)",
            buckets=_BUCKETS, registry=self.registry)
        self.registry.register(_Plain(self))

    def inc(self, name: str, by: int = 1) -> None:
        """Count ``by`` on the counter ``name`` (ending in ``_total``)."""
        self.counters[name] += by

    def set_gauge(self, name: str, value: float, **labels: str) -> None:
        self._gauges[name][tuple(sorted(labels.items()))] = value

    def gauge(self, name: str, **labels: str) -> float | None:
        return self._gauges.get(name, {}).get(tuple(sorted(labels.items())))

    def bet(self, code: str) -> None:
        self.bets[code] += 1

    def tip(self, result: str, amount: int = 0) -> None:
        """A tip to the dealer answered: ``accepted`` (with what it gave) or its code."""
        self.tips[result] += 1
        if amount:
            self.counters["livetable_tip_amount_total"] += amount

    def step_refused(self, table: str) -> None:
        """The store refused a step of ``table`` as out of step: its engine was ahead of
        (or behind) the store, and reloads from it."""
        self.steps_refused[table] += 1

    def fanout(self, frames: int, seconds: float) -> None:
        if frames:
            self.fanout_latency.observe(seconds)

    def settled(self, bets: int, seconds: float) -> None:
        self.settlement.observe(seconds)
        self.counters["livetable_bets_settled_total"] += bets

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Plain(Collector):
    """The plain numbers of :class:`Metrics`, as metric families at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield GaugeMetricFamily("livetable_connections", "Open websocket connections",
                                value=m.connections)
        yield CounterMetricFamily("livetable_frames_in", "Frames received from clients",
                                  value=m.frames_in)
        yield CounterMetricFamily("livetable_frames_out", "Frames sent to clients",
                                  value=m.frames_out)
        bets = CounterMetricFamily("livetable_bets", "Bets answered, by result",
                                   labels=["result"])
        for code, n in sorted(m.bets.items()):
            bets.add_metric([code], n)
        yield bets
        if m.tips:
            tips = CounterMetricFamily("livetable_tips", "Tips to the dealer answered, by "
                                       "result", labels=["result"])
            for code, n in sorted(m.tips.items()):
                tips.add_metric([code], n)
            yield tips
        if m.steps_refused:
            refused = CounterMetricFamily(
                "livetable_steps_refused", "Table steps the store refused as out of step "
                "(the engine reloaded from the store)", labels=["table"])
            for table, n in sorted(m.steps_refused.items()):
                refused.add_metric([table], n)
            yield refused
        for name, value in sorted(m.counters.items()):
            yield CounterMetricFamily(name.removesuffix("_total"), name, value=value)
        for name, series in sorted(m._gauges.items()):
            names = sorted({k for key in series for k, _ in key})
            family = GaugeMetricFamily(name, name, labels=names)
            for key, reading in series.items():
                values = dict(key)
                family.add_metric([values.get(n, "") for n in names], reading)
            yield family
