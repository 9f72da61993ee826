"""Two operators, each with its own wallet, on one platform: the reference operator
playing every operator of a registry file (``livetable operator-demo --operators``) and a
livetable server in seamless mode serving them from a registry of its own (the operators'
side takes acme's next wallet secret beside the old: a rotation)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from liveserver import ROOT, LiveServer, livetable_command
from procutil import free_port, stop
from walletserver import launch_body, signed_post

OPERATORS = """\
[operators.acme]
name = "ACME"
wallet_url = "http://127.0.0.1:{port}/acme/wallet"
wallet_secrets = [{acme_wallet}]
operator_secrets = ["env:ACME_OP"]

[operators.acme.currencies.THB]
chips = [1000, 5000, 10000]
player = [1000, 50000]
pair = [1000, 10000]
round_max = 200000

[operators.acme.currencies.JPY]
chips = [100, 500, 1000]
player = [100, 5000]
pair = [100, 1000]
round_max = 20000

[operators.bet7]
name = "Bet Seven"
wallet_url = "http://127.0.0.1:{port}/bet7/wallet"
wallet_secrets = ["env:BET7_WALLET"]
operator_secrets = ["env:BET7_OP"]
tips = false

[operators.bet7.currencies.INR]
chips = [1000, 5000]
player = [1000, 30000]
pair = [1000, 5000]
round_max = 100000
"""
SECRETS = {"ACME_OP": "acme-op", "BET7_OP": "bet7-op", "ACME_WALLET": "acme-wallet",
           "ACME_WALLET_NEXT": "acme-wallet-next", "BET7_WALLET": "bet7-wallet",
           "WRONG": "not-acme-s-secret"}
INITIAL = 100_000


class Platform:
    def __init__(self, base: Path, **server: Any) -> None:
        self.port = free_port()
        self.registry = base / "livetable.toml"
        self.write('"env:ACME_WALLET"')
        # the operators' side: acme's wallet takes its old and its next secret (a rotation)
        theirs = base / "operator.toml"
        theirs.write_text(OPERATORS.format(port=self.port,
                                           acme_wallet='"env:ACME_WALLET", "env:ACME_WALLET_NEXT"'))
        log = (base / "operator.log").open("ab")
        self.operator = subprocess.Popen(
            [*livetable_command(), "operator-demo", "--port", str(self.port), "--operators",
             str(theirs), "--initial-balance", str(INITIAL)],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT),
            env={**SECRETS, "PATH": "/usr/bin:/bin"})
        self.server = LiveServer(base / "livetable", env={
            **SECRETS, "LIVETABLE_OPERATORS": str(self.registry),
            "LIVETABLE_WALLET": "seamless"}, **server)
        deadline = time.monotonic() + 20
        while self.state_or_none() is None:
            assert self.operator.poll() is None and time.monotonic() < deadline, \
                (base / "operator.log").read_text()
            time.sleep(0.05)
        self.server.start()

    def write(self, acme_wallet: str) -> None:
        self.registry.write_text(OPERATORS.format(port=self.port, acme_wallet=acme_wallet))

    def state_or_none(self) -> dict[str, Any] | None:
        with contextlib.suppress(httpx.HTTPError), httpx.Client(trust_env=False,
                                                                timeout=5) as http:
            return http.get(f"http://127.0.0.1:{self.port}/state").json()  # type: ignore[no-any-return]
        return None

    def state(self) -> dict[str, Any]:
        state = self.state_or_none()
        assert state is not None
        return state

    def launch(self, operator: str, currency: str, player_id: str = "p-1") -> dict[str, Any]:
        answer = signed_post(self.server, "/api/operator/sessions",
                             launch_body(player_id, currency), secret=SECRETS[
                                 f"{operator.upper()}_OP"], operator=operator)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.server.stop()
        stop(self.operator)


