"""The attacks on the money path (docs/security.md) that a unit can reproduce (the others are in
the integration
tests named in docs/security.md).

* attack 4: a supervisor's approval was their token, a reusable login. An approval is now
  a code over one table, round and count with a nonce, short-lived, under a key of its own:
  it never verifies as a token, a token never verifies as it, and the engine takes its
  nonce once, in its round only;
* attack 7: a token whose ``sub`` is 123, null or true was the player "123", "None" or
  "True"; ``livetable deposit --player g_…`` paid into a guest's id; the SQLite files were
  created 0644 (the data directory 0755).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import random
import time
from pathlib import Path

import pytest

from livetable.auth import (
    APPROVAL_TTL,
    Identity,
    TokenError,
    mint,
    sign_approval,
    verify,
    verify_approval,
)
from livetable.cli import main
from livetable.config import Settings
from livetable.engine import EngineError, TableEngine
from livetable.store.sqlite import SQLiteStore

SECRET = b"s" * 32
SUE = Identity(kind="supervisor", id="sup-1", name="Sue", expires=int(time.time()) + 600,
               tables=("t1",))


def _signed(payload: dict[str, object]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    sig = hmac.new(SECRET, raw, hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{b64(raw)}.{b64(sig)}"


# --- attack 4: approvals ----------------------------------------------------------------------


def test_an_approval_says_what_it_approves_and_is_no_token() -> None:
    code, approval = sign_approval(SECRET, SUE, "t1", "t1.1.3", 2)
    assert verify_approval(SECRET, code) == approval
    assert (approval.table, approval.round_id, approval.count, approval.supervisor) == \
        ("t1", "t1.1.3", 2, "Sue")
    assert approval.expires - time.time() == pytest.approx(APPROVAL_TTL, abs=2)
    with pytest.raises(TokenError):
        verify(SECRET, code)  # it opens no console
    with pytest.raises(TokenError, match="not an approval"):  # and a login approves nothing
        verify_approval(SECRET, mint(SECRET, "supervisor", "sup-1", "Sue", 3600, ["t1"]))
    other, _ = sign_approval(b"another-secret-0123456789abcdef", SUE, "t1", "t1.1.3", 2)
    with pytest.raises(TokenError, match="signature"):
        verify_approval(SECRET, other)
    with pytest.raises(TokenError, match="expired"):
        verify_approval(SECRET, code, now=time.time() + APPROVAL_TTL + 2)
    mark, payload, sig = code.split(".")
    forged = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged["n"] = 13
    raw = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError, match="signature"):
        verify_approval(SECRET, f"{mark}.{raw}.{sig}")


def _dealt(cards: int) -> TableEngine:
    e = TableEngine.new("t1", mode="manual", rng=random.Random(1))
    e.start_shoe(1_000)
    e.card("7D", 1_001)  # the opening card
    e.open_betting(2_000, 60_000)
    for card in ["2C", "9H", "KS", "KS", "5D"][:cards]:
        e.card(card, 2_100)
    return e


def test_the_engine_takes_an_approval_once_and_in_its_round_only() -> None:
    e = _dealt(5)
    round_id = e.state.round_id
    assert round_id is not None
    e.void_cards(1, "Dee", "Sue", 3_000, (round_id, "nonce-1"))
    assert len(e.state.round_cards) == 4
    with pytest.raises(EngineError, match="already used") as replay:
        e.void_cards(1, "Dee", "Sue", 3_001, (round_id, "nonce-1"))
    assert replay.value.code == "bad_approval" and len(e.state.round_cards) == 4
    with pytest.raises(EngineError, match="not the round in play") as other:
        e.void_cards(1, "Dee", "Sue", 3_002, ("t1.1.0", "nonce-2"))
    assert other.value.code == "bad_approval" and len(e.state.round_cards) == 4
    e.void_cards(1, "Dee", "Sue", 3_003, (round_id, "nonce-2"))  # a new approval: taken
    assert len(e.state.round_cards) == 3
    # the nonces used travel with the state (a restarted engine, another gateway)
    again = TableEngine.from_bytes(e.to_bytes())
    with pytest.raises(EngineError, match="already used"):
        again.void_cards(1, "Dee", "Sue", 3_004, (round_id, "nonce-2"))


# --- attack 7: tokens, guest ids, file modes ----------------------------------------------------


@pytest.mark.parametrize("sub", [123, None, True, 1.5, ["alice"], {"id": "alice"}])
def test_a_token_whose_sub_is_not_a_string_is_refused(sub: object) -> None:
    token = _signed({"k": "player", "sub": sub, "name": "x", "exp": time.time() + 60})
    with pytest.raises(TokenError, match="malformed token payload"):
        verify(SECRET, token)
    token = _signed({"k": "player", "sub": "alice", "name": sub, "exp": time.time() + 60})
    with pytest.raises(TokenError, match="malformed token payload"):
        verify(SECRET, token)


def test_a_deposit_into_a_guests_id_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secret").write_bytes(SECRET)
    code = main(["deposit", "--data-dir", str(tmp_path), "--player", "g_abcdef",
                 "--amount", "1000", "--id", "d1"])
    assert code == 2
    assert "player ids starting g_ are demo guests'" in capsys.readouterr().err
    assert not (tmp_path / "livetable.sqlite3").exists()  # refused before any store opened


@pytest.mark.parametrize("kind", [[], ["--dealer", "--all-tables"],
                                  ["--supervisor", "--tables", "t1"]])
def test_no_token_is_minted_for_a_guests_id(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            kind: list[str]) -> None:
    # Guest ids are made by the server only (POST /api/guest); a staff token with one used
    # to be minted, a subject that could pass for a guest's wherever ids are shown.
    (tmp_path / "secret").write_bytes(SECRET)
    code = main(["token", "--data-dir", str(tmp_path), "--player", "g_abcdef", *kind])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert "livetable token: player ids starting g_ are demo guests'" in err


@pytest.mark.parametrize("writer", ["thread", pytest.param("process", marks=pytest.mark.process)])
async def test_the_data_directory_and_the_sqlite_files_are_private(
        tmp_path: Path, writer: str) -> None:
    old = os.umask(0o022)  # what a shell outside systemd usually has: 0644 files
    try:
        data = tmp_path / "data"
        settings = Settings(data_dir=data)
        settings.load_secret()
        store = SQLiteStore(settings.db_path, writer=writer)  # type: ignore[arg-type]
        await store.ensure_player("alice", "Alice", 100, 1)
        await store.deposit("d1", "alice", 5, 2)
        files = sorted(data.glob("livetable.sqlite3*"))
        modes = {f.name: f.stat().st_mode & 0o777 for f in files}
        await store.close()
    finally:
        os.umask(old)
    assert data.stat().st_mode & 0o777 == 0o700
    assert (data / "secret").stat().st_mode & 0o777 == 0o600
    assert "livetable.sqlite3-wal" in modes
    assert modes == dict.fromkeys(modes, 0o600), modes
