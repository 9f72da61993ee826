"""The reference operator (``livetable operator-demo``) in a subprocess, and what the
seamless-wallet tests need around it: signed launches and the books read back."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from liveserver import ROOT, LiveServer, livetable_command
from procutil import free_port, kill, stop

from livetable.clock import now_ms
from livetable.operator import signatures

WALLET_SECRET = "wallet-secret-for-tests"
OPERATOR_SECRET = "operator-secret-for-tests"


class OperatorServer:
    def __init__(self, data_dir: Path, *, faults: Sequence[str] = (), seed: int = 0,
                 hang: float = 1.5, slow: float = 0.2, initial_balance: int = 100_000) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.args = ["--port", str(self.port), "--secret", WALLET_SECRET, "--seed", str(seed),
                     "--hang", str(hang), "--slow", str(slow),
                     "--initial-balance", str(initial_balance)]
        for fault in faults:
            self.args += ["--fault", fault]
        self.initial_balance = initial_balance
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OperatorServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "operator.log").open("ab")
        self.process = subprocess.Popen([*livetable_command(), "operator-demo", *self.args],
                                        stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
        deadline = time.monotonic() + 20
        with httpx.Client(trust_env=False, timeout=1.0) as http:
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(self.url + "/state").status_code == 200:
                        return self
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError("operator-demo did not start: "
                           + (self.data_dir / "operator.log").read_text()[-2000:])

    def state(self) -> dict[str, Any]:
        with httpx.Client(trust_env=False, timeout=10.0) as http:
            return http.get(self.url + "/state").json()  # type: ignore[no-any-return]

    def kill(self) -> None:
        kill(self.process)

    def stop(self) -> None:
        stop(self.process)


def seamless_env(operator: OperatorServer, **extra: str) -> dict[str, str]:
    return {"LIVETABLE_WALLET": "seamless",
            "LIVETABLE_WALLET_URL": operator.url + "/wallet",
            "LIVETABLE_WALLET_SECRET": WALLET_SECRET,
            "LIVETABLE_OPERATOR_SECRET": OPERATOR_SECRET, **extra}


@contextlib.contextmanager
def seamless_deployment(base: Path, operator: dict[str, Any] | None = None,
                        **server: Any) -> Iterator[tuple[OperatorServer, LiveServer]]:
    """A reference operator (``operator``: its options) and a livetable server in
    seamless mode against it (``server``: LiveServer's options), stopped afterwards."""
    wallet = OperatorServer(base / "operator", **(operator or {})).start()
    live = LiveServer(base / "livetable", env={**seamless_env(wallet), **server.pop("env", {})},
                      **server)
    live.start()
    try:
        yield wallet, live
    finally:
        live.stop()
        wallet.stop()


def signed_post(server: LiveServer, path: str, body: dict[str, Any] | bytes,
                secret: str = OPERATOR_SECRET, operator: str | None = None,
                at: int | None = None) -> httpx.Response:
    """``body`` signed as an operator signs it (v2: its timestamp, ``at`` or now, and the
    body), from ``operator`` (no X-Livetable-Operator header: the ``default`` one)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = signatures.headers(secret.encode(), raw, now_ms() if at is None else at,
                                operator)
    with httpx.Client(trust_env=False, timeout=10.0) as http:
        return http.post(server.http + path, content=raw,
                         headers={**signed, "content-type": "application/json"})


def launch_body(player_id: str, currency: str = "THB", **fields: Any) -> dict[str, Any]:
    """A launch's body with a request id of its own (each launch has one)."""
    return {"request_id": uuid.uuid4().hex, "player_id": player_id,
            "name": player_id.title(), "currency": currency, **fields}


def launch(server: LiveServer, player_id: str, currency: str = "THB",
           **fields: Any) -> dict[str, Any]:
    response = signed_post(server, "/api/operator/sessions",
                           launch_body(player_id, currency, **fields))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def wallet_report(server: LiveServer, **query: Any) -> dict[str, Any]:
    response = signed_post(server, "/api/operator/wallet", query)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]
