"""A wallet per operator (livetable/operator/wallets.py): a player's calls go to their
operator's wallet, a reload changes the next call and drops none, an operator never
configured is an unknown outcome, never another operator's wallet."""

from __future__ import annotations

from livetable.operator import registry
from livetable.operator.wallets import NoWallet, OperatorWallets

REGISTRY = """\
[operators.acme]
name = "ACME"
wallet_url = "http://127.0.0.1:9/acme/wallet"
wallet_secrets = ["env:ACME_WALLET", "env:ACME_NEXT"]
operator_secrets = ["env:ACME_OP"]

[operators.bet7]
name = "Bet Seven"
wallet_url = "http://127.0.0.1:9/bet7/wallet/"
wallet_secrets = ["env:BET7_WALLET"]
operator_secrets = ["env:BET7_OP"]
"""
ENV = {"ACME_WALLET": "a-1", "ACME_NEXT": "a-2", "ACME_OP": "o", "BET7_WALLET": "b-1",
       "BET7_OP": "o"}


def wallets_of(text: str, wallets: OperatorWallets | None = None) -> OperatorWallets:
    found = registry.parse(text, "ops.toml", ENV, wallets=True)
    wallets = wallets or OperatorWallets(timeout=1.0, connections=8)
    wallets.update(found)
    return wallets


def test_each_player_goes_to_their_operators_wallet_with_its_secret() -> None:
    wallets = wallets_of(REGISTRY)
    acme, bet7 = wallets.of("acme~p-1"), wallets.of("bet7~p-1")
    assert (acme.operator_id, acme.debits.base, acme.debits.secret) == (
        "acme", "http://127.0.0.1:9/acme/wallet/", b"a-1")  # the first secret signs
    assert (bet7.operator_id, bet7.outbox.base, bet7.outbox.secret) == (
        "bet7", "http://127.0.0.1:9/bet7/wallet/", b"b-1")
    assert wallets.of("acme~p-2") is acme  # one wallet per operator, not per player
    # three quarters of each operator's connections for debits, a quarter for the outbox
    assert (acme.debits.connections, acme.outbox.connections) == (6, 2)
    assert wallets.outbox_connections == 4


async def test_an_operator_never_configured_is_an_unknown_outcome_not_another_wallet() -> None:
    wallets = wallets_of(REGISTRY)
    stray = wallets.of("gone~p-1")
    assert isinstance(stray.debits, NoWallet) and isinstance(stray.outbox, NoWallet)
    reply = await stray.outbox.call("credit", b"{}")
    assert reply.status is None and "gone" in reply.text  # kept queued, retried
    # the single-operator deployment's players carry no prefix: "default"'s
    assert wallets.of("alice").operator_id == registry.DEFAULT_OPERATOR


def test_a_reload_changes_the_next_call_and_keeps_every_wallet() -> None:
    wallets = wallets_of(REGISTRY)
    acme = wallets.of("acme~p-1")
    rotated = REGISTRY.replace('["env:ACME_WALLET", "env:ACME_NEXT"]',
                               '["env:ACME_NEXT"]').replace("127.0.0.1:9/acme",
                                                            "127.0.0.1:10/acme")
    without_bet7 = rotated.split("[operators.bet7]")[0]
    wallets_of(without_bet7, wallets)
    # the same clients (a call in flight on them is not dropped), now to the new place
    # with the next secret
    assert wallets.of("acme~p-1") is acme
    assert (acme.debits.base, acme.debits.secret, acme.outbox.secret) == (
        "http://127.0.0.1:10/acme/wallet/", b"a-2", b"a-2")
    # bet7 left the registry: what livetable owes its players still goes to its wallet
    assert wallets.of("bet7~p-1").debits.base == "http://127.0.0.1:9/bet7/wallet/"
    assert wallets.operators == ["acme", "bet7"]
