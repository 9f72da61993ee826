"""Two operators, each with its own wallet, in seamless mode (livetable/operator/wallets.py),
over real HTTP and websockets: the reference operator plays both from a registry file of
its own, livetable serves them from its own.

``acme`` plays in THB (2 decimals) and JPY (none), ``bet7`` in INR; the same ``p-1`` is a
player of each. Each wallet hears only its own players' calls, with the ids it knows them
by, signed with its own secret; a credit goes to the wallet that took the debit, in the
debit's currency; a session's chips and limits are its operator's for its currency; a
wallet secret is rotated on SIGHUP with no failed call.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from liveserver import WireClient
from operators_platform import INITIAL, Platform


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    running = Platform(tmp_path_factory.mktemp("wallets"))
    try:
        yield running
    finally:
        running.stop()


def calls(state: dict[str, Any], operator: str, currency: str) -> list[dict[str, Any]]:
    books = state["operators"].get(operator, {}).get(currency, {"applied": {}})
    return list(books["applied"].values())


async def _play(platform: Platform) -> dict[str, Any]:
    """acme's p-1 in THB and in JPY, bet7's p-1 in INR: a welcome each, one slip each in
    one round, and a JPY bet over acme's JPY maximum."""
    sessions = {(op, cur): platform.launch(op, cur)
                for op, cur in (("acme", "THB"), ("acme", "JPY"), ("bet7", "INR"))}
    clients = {key: await WireClient.connect(platform.server.ws, "-".join(key))
               for key in sessions}
    try:
        welcomes = {key: await clients[key].hello(sessions[key]["token"]) for key in sessions}
        opened = await clients[("acme", "THB")].expect("round_opened", timeout=30)
        round_id = opened["round_id"]
        slips = {("acme", "THB"): [("thb-1", "P1", 1000)],
                 ("acme", "JPY"): [("jpy-1", "P2", 100)],
                 ("bet7", "INR"): [("inr-1", "P1_PAIR", 1000)]}
        answers = {key: await clients[key].slip(f"{key[1]}-slip", round_id, bets)
                   for key, bets in slips.items()}
        over = await clients[("acme", "JPY")].slip("jpy-over", round_id,
                                                    [("jpy-2", "P3", 5001)])
        # acme's p-1 is one player in two sessions: each connection hears both its
        # settlements; each slip's is told by its bet
        settled = {key: await clients[key].expect("bet_settled", timeout=30,
                                                  bet_id=bets[0][0])
                   for key, bets in slips.items()}
        return {"welcomes": welcomes, "answers": answers, "over": over, "settled": settled,
                "round_id": round_id}
    finally:
        for client in clients.values():
            await client.close()


def test_each_wallet_hears_only_its_own_players_in_their_currencies(
        platform: Platform) -> None:
    played = asyncio.run(_play(platform))
    welcomes = played["welcomes"]
    # the welcome: the operator's balance, and its chips and limits for the currency
    thb, jpy, inr = (welcomes[k]["player"] for k in (("acme", "THB"), ("acme", "JPY"),
                                                     ("bet7", "INR")))
    assert (thb["id"], thb["currency"], thb["balance"]) == ("acme~p-1", "THB", INITIAL)
    assert (inr["id"], inr["currency"], inr["balance"]) == ("bet7~p-1", "INR", INITIAL)
    assert thb["chips"] == [1000, 5000, 10000] and jpy["chips"] == [100, 500, 1000]
    assert jpy["limits"] == {"min": 100, "max": 5000, "pair_min": 100, "pair_max": 1000,
                             "round_max": 20000}
    assert inr["limits"]["max"] == 30000
    for answer in played["answers"].values():
        assert answer["type"] == "slip_accepted", answer
    # over acme's JPY maximum: refused by its limit, before any debit
    over = played["over"]
    assert (over["type"], over["code"], over["bet_id"]) == ("slip_rejected", "above_max",
                                                            "jpy-2")
    assert over["message"].endswith("(maximum 5000 per spot)")

    # every credit delivered: each wallet's books close its own debits
    deadline = time.monotonic() + 30
    while True:
        state = platform.state()
        done = [c for op, cur in (("acme", "THB"), ("acme", "JPY"), ("bet7", "INR"))
                for c in calls(state, op, cur) if c["method"] == "credit"]
        if len(done) == 3:
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.2)
    expected = {("acme", "THB"): ("thb-1", 2000), ("acme", "JPY"): ("jpy-1", 200),
                ("bet7", "INR"): ("inr-1", 1000)}
    for (operator, currency), (bet_id, deducted) in expected.items():
        theirs = calls(state, operator, currency)
        # the id the operator knows, the currency of the session, nothing of the others'
        assert {c["player_id"] for c in theirs} == {"p-1"}
        assert {c["currency"] for c in theirs} == {currency}
        [debit] = [c for c in theirs if c["method"] == "debit"]
        [credit] = [c for c in theirs if c["method"] == "credit"]
        assert [b["bet_id"] for b in debit["bets"]] == [bet_id]
        assert debit["amount"] == deducted
        assert credit["debit_tx_ids"] == [debit["tx_id"]]
        returned = played["settled"][(operator, currency)]["returned"]
        assert credit["amount"] == returned
        books = state["operators"][operator][currency]
        assert books["balances"]["p-1"] == INITIAL - deducted + returned
        assert books["forged"] == 0
    # the over-the-limit slip never reached a wallet; no other operator or currency either
    assert sorted((op, cur) for op, kept in state["operators"].items() for cur in kept) == \
        [("acme", "JPY"), ("acme", "THB"), ("bet7", "INR")]


async def _balance(platform: Platform, token: str) -> int:
    client = await WireClient.connect(platform.server.ws, "balance")
    try:
        await client.hello(token)
        await client.send({"type": "get_balance"})
        return int((await client.expect("balance"))["balance"])
    finally:
        await client.close()


def test_a_wallet_secret_is_rotated_on_sighup_without_a_failed_call(
        platform: Platform) -> None:
    """livetable signs acme's calls with the first of its wallet_secrets: a SIGHUP moves
    it to the next secret (the operator takes both meanwhile), and no call fails. A wrong
    one is taken as promptly — the proof the reload reached the wallet's signature."""
    process = platform.server.process
    assert process is not None
    token = platform.launch("acme", "THB", "p-rotate")["token"]

    def forged() -> int:
        return int(platform.state()["forged"].get("acme", 0))

    assert asyncio.run(_balance(platform, token)) == INITIAL and forged() == 0
    platform.write('"env:WRONG"')
    process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while asyncio.run(_balance(platform, token)) != 0:  # the operator refuses it
        assert time.monotonic() < deadline, "the registry was not reloaded"
        time.sleep(0.1)
    assert forged() >= 1
    before = forged()
    platform.write('"env:ACME_WALLET_NEXT", "env:ACME_WALLET"')  # the rotation
    process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while asyncio.run(_balance(platform, token)) != INITIAL:
        assert time.monotonic() < deadline, "the rotated secret was not taken"
        time.sleep(0.1)
    # from then on every call is signed with the next secret, and taken
    for _ in range(3):
        assert asyncio.run(_balance(platform, token)) == INITIAL
    assert forged() == before
