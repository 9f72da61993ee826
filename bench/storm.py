"""The reconnect storm alone, pinned, and side by side with another checkout.

    .venv/bin/python -m bench.storm [--sizes 5000,10000] [--repeat 2] [--workers 2]
        [--root ../other-checkout] [--kinds livetable,uvicorn,websockets,picows]
        [--no-pin] [--profile DIR]

Each point is :func:`bench.scenarios.reconnect_storm`: livetable's bench server
(``bench.fanout_server --kind livetable``: livetable's app on uvicorn as ``livetable serve``
runs it, a table event every 500 ms), N guest players connected from ``--workers``
load-generator processes; every connection aborted at once, and after 500 ms every client
reconnects with ``hello {resume: {epoch, seq}}``, retrying with backoff until it gets in.

**Pinned.** The server (its main process and its SQLite writer process) runs on core 0,
the load generator's processes on core 1 (``--no-pin`` leaves both free): the server's CPU
and its time are then its own, not shared with the clients'. Other jobs on the machine
still share both cores: the load average is recorded at each point.

**Side by side.** With ``--root DIR`` the server of another checkout (its ``livetable``
package and its ``bench/fanout_server.py``) is measured too, alternating with this one's
in every repeat (the order reversed on every other repeat, so that drift on a shared
machine does not favour one): ``before`` is ``--root``'s, ``after`` this checkout's. With
``--kinds``, bench/transport_servers.py's small app on other transports too (``uvicorn``,
``websockets``, ``picows``: hello → a livetable-sized welcome at the head, no replay, no
gateway): the storm the transport alone would take.

With ``--profile DIR`` the server's event-loop thread is profiled over each storm
(cProfile; ``DIR/<label>-<n>-<repeat>.prof``). Results: one JSON line a point on stdout,
and all of them in bench/results/storm-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench import scenarios
from bench.common import (
    LOADGEN_CORE,
    PYTHON,
    SERVER_CORE,
    ServerProcess,
    free_port,
    loadavg,
    pin,
    process_tree,
    raise_nofile,
    write_json,
)
from bench.loadgen import LoadGen
from bench.scenarios import _fresh, reconnect_storm

ROOT = Path(__file__).resolve().parents[1]


def _pinned_server(root: Path, pinned: bool) -> Any:
    """``scenarios.bench_server``, run from ``root`` (its ``livetable`` and ``bench``
    packages first on the path) and pinned to the server's core."""

    def bench_server(kind: str, work: Path, redis_url: str = "",
                     name: str = "") -> tuple[ServerProcess, int]:
        port = free_port()
        data = _fresh(work / f"data-{name or kind}")
        code = (f"import runpy, sys; sys.path.insert(0, {str(root)!r}); "
                "runpy.run_module('bench.fanout_server', run_name='__main__')")
        server = ServerProcess([PYTHON, "-c", code, "--kind", kind, "--port", str(port),
                                "--data-dir", str(data)],
                               log=work / f"server-{name or kind}.log")
        if pinned:
            pin(process_tree(server.pid), SERVER_CORE)
        return server, port

    return bench_server


def storm_point(label: str, kind: str, root: Path, lg: LoadGen, work: Path, n: int,
                pinned: bool, profile: Path | None, rep: int) -> dict[str, Any]:
    scenarios.bench_server = _pinned_server(root, pinned)
    load0 = loadavg()
    prof = None if profile is None else profile / f"{label}-{n}-{rep}.prof"
    try:
        result = reconnect_storm(lg, work, n, profile_to=prof, kind=kind)
    finally:
        scenarios.bench_server = _ORIGINAL
    result.pop("connect", None)
    return {"label": label, "root": str(root), "repeat": rep, "loadavg_before": load0,
            "loadavg_after": loadavg(), "pinned": pinned, **result}


_ORIGINAL = scenarios.bench_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--root", type=Path, help="another checkout: measured as 'before'")
    parser.add_argument("--kinds", default="livetable")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    raise_nofile()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    work = _fresh(Path("/tmp") / f"bench-storm-{os.getpid()}")
    servers: list[tuple[str, str, Path]] = []
    for kind in args.kinds.split(","):
        if kind != "livetable":
            servers.append((kind, kind, ROOT))
            continue
        if args.root is not None:
            servers.append(("before", kind, args.root.resolve()))
        servers.append(("after", kind, ROOT))
    lg = LoadGen(args.workers)
    if args.pin:
        pin(lg.pids, LOADGEN_CORE)
    points: list[dict[str, Any]] = []
    try:
        for rep in range(args.repeat):
            for n in (int(s) for s in args.sizes.split(",")):
                for label, kind, root in servers if rep % 2 == 0 else servers[::-1]:
                    point = storm_point(label, kind, root, lg, work, n, args.pin,
                                        args.profile, rep)
                    points.append(point)
                    print(json.dumps(point), flush=True)
    finally:
        lg.close()
    out = Path(args.out) / time.strftime("storm-%Y%m%dT%H%M%S.json")
    write_json(out, {"args": {k: str(v) for k, v in vars(args).items()}, "points": points})
    print(f"written {out}")


if __name__ == "__main__":
    main()
