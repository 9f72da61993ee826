"""Two operators on one platform, over real HTTP and websockets (the internal wallet): each
signs with its own secrets, its players are its own, and a registry change takes effect on
SIGHUP without a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from liveserver import LiveServer, WireClient, livetable_command
from walletserver import launch_body, signed_post

REGISTRY = """\
[operators.acme]
name = "ACME Casino"
operator_secrets = [{acme}]

[operators.acme.currencies.THB]
chips = [1000, 5000]
player = [1000, 500000]
pair = [1000, 100000]
round_max = 2000000

[operators.bet7]
name = "Bet Seven"
operator_secrets = ["env:BET7_OP"]
tables = ["t1"]
"""
SECRETS = {"ACME_OP": "acme-secret", "ACME_OP_NEXT": "acme-next", "BET7_OP": "bet7-secret"}


def write(path: Path, acme: str = '"env:ACME_OP"') -> None:
    path.write_text(REGISTRY.replace("{acme}", acme))


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    base = tmp_path_factory.mktemp("operators")
    registry = base / "operators.toml"
    write(registry)
    server = LiveServer(base / "livetable", env={**SECRETS,
                                                 "LIVETABLE_OPERATORS": str(registry)})
    server.start()
    try:
        yield server, registry
    finally:
        server.stop()


def test_each_operator_launches_with_its_own_secret_only(
        platform: tuple[LiveServer, Path]) -> None:
    server, _ = platform
    body = launch_body("p-1")
    assert signed_post(server, "/api/operator/sessions", body, secret="acme-secret",
                       operator="acme").status_code == 200
    # bet7's secret does not sign for acme, nor acme's for bet7
    for secret, operator in (("bet7-secret", "acme"), ("acme-secret", "bet7")):
        refused = signed_post(server, "/api/operator/sessions", launch_body("p-1"),
                              secret=secret, operator=operator)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "invalid_signature"
    unknown = signed_post(server, "/api/operator/sessions", launch_body("p-1"),
                          secret="acme-secret", operator="nobody")
    assert unknown.json()["error"]["code"] == "unknown_operator"
    # and the registry, not LIVETABLE_OPERATOR_SECRET, is in force: no "default" here
    default = signed_post(server, "/api/operator/sessions", launch_body("p-1"),
                          secret="acme-secret")
    assert default.json()["error"]["code"] == "unknown_operator"
    # an operator's currencies and tables bound its launches
    jpy = signed_post(server, "/api/operator/sessions", launch_body("p-1", "JPY"),
                      secret="acme-secret", operator="acme")
    assert jpy.json()["error"]["code"] == "unknown_currency"
    t2 = signed_post(server, "/api/operator/sessions", launch_body("p-1", table="t2"),
                     secret="bet7-secret", operator="bet7")
    assert t2.status_code == 404


def test_the_same_player_id_under_two_operators_shares_nothing(
        platform: tuple[LiveServer, Path]) -> None:
    server, _ = platform
    sessions = {}
    for operator, secret in (("acme", "acme-secret"), ("bet7", "bet7-secret")):
        answer = signed_post(server, "/api/operator/sessions", launch_body("p-same"),
                             secret=secret, operator=operator)
        assert answer.status_code == 200, answer.text
        sessions[operator] = answer.json()
    # acme moves money in for its p-same: bet7's p-same does not get it
    subprocess.run([*livetable_command(), "deposit", "--data-dir", str(server.data_dir),
                    "--player", "acme~p-same", "--amount", "7000", "--id", "acme-dep-1"],
                   check=True, capture_output=True, env={**os.environ, **server.env})

    async def balances() -> dict[str, tuple[str, int]]:
        seen = {}
        for operator, session in sessions.items():
            client = await WireClient.connect(server.ws, operator)
            try:
                player = (await client.hello(session["token"]))["player"]
                seen[operator] = (player["id"], player["balance"])
            finally:
                await client.close()
        return seen

    assert asyncio.run(balances()) == {"acme": ("acme~p-same", 7000),
                                       "bet7": ("bet7~p-same", 0)}


def test_a_secret_is_rotated_on_sighup_without_a_failed_launch(
        platform: tuple[LiveServer, Path]) -> None:
    server, registry = platform
    assert server.process is not None

    def launches_with(secret: str) -> bool:
        return signed_post(server, "/api/operator/sessions", launch_body("p-rot"),
                           secret=secret, operator="acme").status_code == 200

    def hup_until(condition: bool, secret: str) -> None:
        assert server.process is not None
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while launches_with(secret) != condition:
            assert time.monotonic() < deadline, "the registry was not reloaded"
            time.sleep(0.1)

    assert launches_with("acme-secret") and not launches_with("acme-next")
    try:
        write(registry, '"env:ACME_OP", "env:ACME_OP_NEXT"')  # the next secret beside the old
        hup_until(True, "acme-next")
        assert launches_with("acme-secret")  # both verify while the operator switches
        # a bad file at SIGHUP is refused whole: both secrets still work
        registry.write_text(registry.read_text().replace('name = "Bet Seven"', "name = "))
        refusals = server.log().count("operator registry not reloaded")
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10  # the server says it refused the file: no fixed wait
        while server.log().count("operator registry not reloaded") == refusals:
            assert time.monotonic() < deadline, "the bad registry was not refused"
            time.sleep(0.05)
        assert launches_with("acme-secret") and launches_with("acme-next")
        write(registry, '"env:ACME_OP_NEXT"')  # the old secret retired
        hup_until(False, "acme-secret")
        assert launches_with("acme-next")
    finally:  # the module's registry again: the other tests share this server
        write(registry)
        hup_until(True, "acme-secret")


def test_only_the_operator_that_launched_a_session_ends_it(
        platform: tuple[LiveServer, Path]) -> None:
    server, _ = platform
    acme = "acme-secret"
    launched = signed_post(server, "/api/operator/sessions", launch_body("p-ends"),
                           secret=acme, operator="acme")
    assert launched.status_code == 200, launched.text
    session = launched.json()
    path = f"/api/operator/sessions/{session['session_id']}/end"
    # bet7 signs well, but the session is not its own: unknown to it, and not ended
    theirs = signed_post(server, path, {"reason": "self_exclusion"}, secret="bet7-secret",
                         operator="bet7")
    assert theirs.status_code == 404, theirs.text
    assert theirs.json()["error"]["code"] == "unknown_session"
    assert server.get("/api/bets", session["token"]).status_code == 200
    ours = signed_post(server, path, {"reason": "self_exclusion"}, secret=acme,
                       operator="acme")
    assert ours.status_code == 200, ours.text
    refused = server.get("/api/bets", session["token"])
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "session_ended"


def test_an_operator_removed_on_sighup_has_its_sessions_ended(
        platform: tuple[LiveServer, Path]) -> None:
    """bet7 leaves the registry: its connected player is told ``session_ended``
    (``operator_removed``) and closed 4002 at the reload, not when its token expires."""
    server, registry = platform
    assert server.process is not None
    launched = signed_post(server, "/api/operator/sessions", launch_body("p-gone"),
                           secret="bet7-secret", operator="bet7")
    assert launched.status_code == 200, launched.text
    token = launched.json()["token"]
    kept = registry.read_text()

    async def removed() -> tuple[dict[str, object], int | None]:
        client = await WireClient.connect(server.ws, "bet7 player")
        try:
            await client.hello(token)
            registry.write_text(kept.split("[operators.bet7]")[0])
            assert server.process is not None
            server.process.send_signal(signal.SIGHUP)
            ended = await client.expect("session_ended", timeout=10)
            return ended, await client.wait_closed()
        finally:
            await client.close()

    try:
        assert asyncio.run(removed()) == ({"type": "session_ended",
                                           "reason": "operator_removed"}, 4002)
        refused = server.get("/api/bets", token)  # its Bet Record as its hello: refused
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "session_ended"
    finally:
        registry.write_text(kept)
        server.process.send_signal(signal.SIGHUP)
