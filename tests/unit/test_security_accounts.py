"""The first security round's attack 1 (docs/security.md): a player id in the ledger's own
namespace.

The attack: a signed player whose id is ``hold:<round id>`` (round ids are predictable)
owned that round's escrow before it opened, received the other players' stakes and ended
ahead with nothing of its own. Player ids must be refused at every entry — tokens (minted
and verified), the CLI's token and deposit commands, the stores — and a round must not open
on an escrow account that already exists as something else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

from livetable import protocol as p
from livetable.accounts import AccountError, check_player_id, is_player_id
from livetable.auth import TokenError, mint, verify
from livetable.cli import main
from livetable.engine import OpenRound
from livetable.store.sqlite import SQLiteStore
from livetable.store.sqlite.ledger.core import Transfer

SECRET = b"s" * 32
#: Ids in the ledger's own namespace, or otherwise no player's.
FORBIDDEN = ["hold:t1.1.1", "house", "external", "HOUSE", "a:b", "", "x" * 65, "a b",
             "tab\t", "nul\x00", "ünï"]


def _signed(payload: dict[str, object]) -> str:
    """A token signed with the right secret, built by hand (as an old server, or a careless
    operator, might have minted it)."""
    raw = json.dumps(payload, separators=(",", ":")).encode()
    sig = hmac.new(SECRET, raw, hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{b64(raw)}.{b64(sig)}"


@pytest.mark.parametrize("player_id", FORBIDDEN)
def test_no_player_id_can_name_an_internal_account(player_id: str) -> None:
    assert not is_player_id(player_id)
    with pytest.raises(AccountError):
        check_player_id(player_id)


@pytest.mark.parametrize("player_id", ["alice", "g_Ab3-x_9", "p001", "op.user+7@casino.example"])
def test_ordinary_player_ids_pass(player_id: str) -> None:
    assert check_player_id(player_id) == player_id


@pytest.mark.parametrize("kind", ["player", "guest"])
def test_a_token_for_an_escrow_account_is_never_minted(kind: str) -> None:
    with pytest.raises(AccountError):
        mint(SECRET, kind, "hold:t1.1.2", "Escrow", 3600)  # type: ignore[arg-type]  # kind is a Kind


@pytest.mark.parametrize("player_id", ["hold:t1.1.2", "house", "external"])
def test_a_signed_token_for_an_internal_account_is_refused(player_id: str) -> None:
    token = _signed({"k": "player", "sub": player_id, "name": "x", "exp": time.time() + 60})
    with pytest.raises(TokenError, match="not a valid player id"):
        verify(SECRET, token)


def test_tokens_are_strict_base64url() -> None:
    good = mint(SECRET, "player", "alice", "Alice", 3600)
    assert verify(SECRET, good).id == "alice"
    payload, sig = good.split(".")
    tampered = [
        f"{payload}=.{sig}",            # padding
        f"{payload}.{sig}==",
        f"{payload[:5]}\n{payload[5:]}.{sig}",  # stray characters Python's decoder skips
        f"{payload[:5]}*{payload[5:]}.{sig}",
        f"{payload}.{sig[:-1]}{chr(ord(sig[-1]) ^ 1)}",  # other trailing bits, same bytes?
        f"{payload}.{sig}.x",
    ]
    for token in tampered:
        with pytest.raises(TokenError):
            verify(SECRET, token)


def test_the_cli_refuses_a_token_and_a_deposit_for_an_escrow_account(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secret").write_bytes(SECRET)
    code = main(["token", "--data-dir", str(tmp_path), "--player", "hold:t1.1.2"])
    assert code == 2
    assert "not a valid player id" in capsys.readouterr().err
    code = main(["deposit", "--data-dir", str(tmp_path), "--player", "hold:t1.1.2",
                 "--amount", "1000", "--id", "d1"])
    assert code == 2
    assert "not a valid player id" in capsys.readouterr().err
    code = main(["deposit", "--data-dir", str(tmp_path), "--player", "house",
                 "--amount", "1000", "--id", "d2"])
    assert code == 2


async def test_sqlite_refuses_to_open_a_round_on_a_taken_escrow_account(tmp_path: Path) -> None:
    # A database written before the fix may hold such an account: opening the round must
    # fail loudly, and change nothing.
    store = SQLiteStore(tmp_path / "db.sqlite3")
    try:
        store.db.execute("INSERT INTO accounts (id, kind, balance) VALUES "
                         "('hold:t1.1.1', 'player', 0)")
        with pytest.raises(AccountError, match="escrow"):
            await store.commit_step("t1", b"{}", [], [OpenRound(
                table="t1", round_id="t1.1.1", shoe_id="t1.1", round_no=1, closes_at=10**13,
                limits=p.Limits(min=10, max=100, pair_min=10, pair_max=100, round_max=1000))],
                1)
        assert await store.round_view("t1.1.1") is None
        assert await store.load_table("t1") is None
    finally:
        await store.close()


async def test_sqlite_has_no_transfer_from_an_account_to_itself() -> None:
    store = SQLiteStore(":memory:")
    try:
        await store.ensure_player("alice", "Alice", 500, 1)
        store.db.execute("BEGIN IMMEDIATE")
        with pytest.raises(AccountError, match="same account"):
            assert store.ledger is not None
            store.ledger.transfer(Transfer("t-self", "alice", "alice", 100, "bet", "r", 1))
        store.db.execute("ROLLBACK")
        assert (await store.audit()).ok
    finally:
        await store.close()


def test_a_wildcard_trusted_proxy_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVETABLE_TRUSTED_PROXIES", "*")
    code = main(["serve", "--data-dir", str(tmp_path), "--port", "1"])
    assert code == 2
    assert "LIVETABLE_TRUSTED_PROXIES" in capsys.readouterr().err
