"""The provably fair shoe (docs/design.md §7) and the engine state sealed at rest.

A real shoe is dealt by the engine and committed to a sealed SQLite store the way the runner
does it; its record (``shoe_view``, what ``GET /api/shoes/{id}`` serves) must pass the
check, and every way of tampering with it must be caught — by :func:`check_shoe` and by
``livetable verify-shoe``, from a file and over HTTP. The expected commitment is computed
here with :mod:`hashlib` from the formula of docs/design.md §7, not with the code under test.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import random
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from livetable import protocol as p
from livetable.bus import MemoryBus
from livetable.cli import main
from livetable.config import Settings, SettingsError
from livetable.engine import Step, TableEngine, Timing
from livetable.host.runner import TableRunner
from livetable.rules.fairness import (
    ShoeRecord,
    chain_heads,
    check_shoe,
    commitment,
    publish_rounds,
)
from livetable.store.sealing import (
    MAGIC,
    SealError,
    StateSeal,
    load_key_ring,
    open_state,
    seal_state,
)
from livetable.store.sqlite import SQLiteStore

T0 = 1_700_000_000_000
KEY = b"unit-test-shoe-key-0123456789abcdef-0123"
#: The cut card 380 cards from the end: the shoe ends within its first three rounds.
SHORT_SHOE = Timing(cut_range=(380, 380), betting_ms=1_000)


def test_commitment_is_designs_formula() -> None:
    salt = "0f" * 32
    order = ["AS", "10D", "KH"]
    text = f"{salt}:35:AS,10D,KH"
    assert commitment(salt, 35, order) == hashlib.sha256(text.encode()).hexdigest()


# --- a shoe dealt by the engine, kept by a store ------------------------------------------------


async def commit(store: SQLiteStore, engine: TableEngine, step: Step, now: int) -> None:
    frames = [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events]
    await store.commit_step(engine.state.table, engine.to_bytes(), frames, step.effects, now)


async def deal_a_shoe(store: SQLiteStore, cancel_round: int | None = 2) -> tuple[str, str]:
    """Deal shoe t1.1 to its end (round ``cancel_round`` cancelled mid-deal); return its
    commitment as shoe_started announced it and the shoe id."""
    e = TableEngine.new("t1", timing=SHORT_SHOE, rng=random.Random(11))
    now = T0
    announced: dict[str, str | None] = {}
    revealed = False
    for _ in range(2_000):
        due = e.next_deadline()
        now = due if due is not None else now + 1
        step = e.tick(now) if due is not None else e.open_betting(now)
        if (cancel_round is not None and e.state.round_no == cancel_round
                and e.phase in ("betting", "dealing") and len(e.state.round_cards) == 5):
            step.extend(e.cancel_round("camera down", now))
        await commit(store, e, step, now)
        for ev in step.events:
            if isinstance(ev, p.ShoeStarted):
                announced[ev.shoe_id] = ev.commitment
            revealed = revealed or isinstance(ev, p.ShoeRevealed)
        if revealed:
            break
    assert revealed
    seen = announced["t1.1"]
    assert seen is not None
    return seen, "t1.1"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "db.sqlite3", seal=StateSeal(KEY))
    yield s
    await s.close()


@pytest.fixture
async def fair(store: SQLiteStore) -> tuple[ShoeRecord, str]:
    seen, shoe_id = await deal_a_shoe(store)
    record = await store.shoe_view(shoe_id)
    assert record is not None
    return record, seen


async def test_a_dealt_shoe_verifies(fair: tuple[ShoeRecord, str]) -> None:
    record, seen = fair
    assert check_shoe(record, seen_commitment=seen) == []
    assert record.commitment == seen
    expected = hashlib.sha256(
        f"{record.salt}:{record.cut_at}:{','.join(record.order)}".encode()).hexdigest()
    assert record.commitment == expected
    states = [r.state for r in record.rounds]
    assert "settled" in states and states[1] == "cancelled"
    # the cancelled round's dealt cards are published: burn, then P1 … P4
    assert record.rounds[1].dealt == 5
    at = 1 + (record.burned or 0) + record.rounds[0].dealt
    assert record.rounds[1].cards == {
        "P1": [record.order[at + 1]], "P2": [record.order[at + 2]],
        "P3": [record.order[at + 3]], "P4": [record.order[at + 4]], "P5": [], "BANKER": []}
    # The cut card came out in the last round, and the record says which slots it took.
    first = 1 + record.burned if record.burned is not None else 0
    assert first + sum(r.dealt for r in record.rounds[:-1]) <= record.cut_at
    assert record.cut_at < first + sum(r.dealt for r in record.rounds)


def _rehash(shoe: ShoeRecord) -> ShoeRecord:
    """A forger's record: changed, with the commitment recomputed to match."""
    shoe.commitment = commitment(shoe.salt, shoe.cut_at, shoe.order)
    return shoe


def _copy(shoe: ShoeRecord) -> ShoeRecord:
    return msgspec.json.decode(msgspec.json.encode(shoe), type=ShoeRecord)


def _swap_in_first_round(shoe: ShoeRecord) -> ShoeRecord:
    """Swap the P1's first card with a card of a later round, in the order only."""
    start = 1 + (shoe.burned or 0) + 1  # P1's first card: after the round's burn
    later = start + 40
    while shoe.order[later] == shoe.order[start]:
        later += 1
    shoe.order[start], shoe.order[later] = shoe.order[later], shoe.order[start]
    return shoe


TAMPERED: dict[str, Any] = {
    "two cards of the order swapped": (lambda s: _swap_in_first_round(s),
                                       "not the commitment"),
    "the salt changed": (lambda s: (setattr(s, "salt", "00" * 32), s)[1],  # type: ignore[func-returns-value]
                         "not the commitment"),
    "the cut card moved": (lambda s: (setattr(s, "cut_at", s.cut_at + 1), s)[1],  # type: ignore[func-returns-value]
                           "not the commitment"),
    "a round's card re-dealt (hash recomputed)": (
        lambda s: _rehash(_swap_in_first_round(s)), "was revealed as"),
    "a stacked shoe: a ninth ace (hash recomputed)": (
        lambda s: _rehash((s.order.__setitem__(
            len(s.order) - 1, "AS" if s.order[-1] != "AS" else "AH"), s)[1]),
        "not 8 full decks"),
    "the opening burn miscounted": (lambda s: (setattr(s, "burned", (s.burned or 0) + 1), s)[1],  # type: ignore[func-returns-value]
                                    "the rules say"),
    "a cancelled round's cards skipped": (
        lambda s: (setattr(s.rounds[1], "dealt", s.rounds[1].dealt + 1), s)[1],  # type: ignore[func-returns-value]
        "was revealed as"),
    "a round dealt after the cut card": (
        lambda s: (setattr(s, "rounds", [*s.rounds, msgspec.structs.replace(  # type: ignore[func-returns-value]
            s.rounds[0], round_id=f"{s.shoe_id}.{len(s.rounds) + 1}",
            round_no=len(s.rounds) + 1, cards=None, state="cancelled", dealt=0)]), s)[1],
        "after the shoe's last round"),
    # The money path's attack 3 (docs/security.md): a record that leaves slots of the order
    # unaccounted for
    "a settled round's cards set to null": (
        lambda s: (setattr(s.rounds[0], "cards", None), s)[1], "no cards published"),  # type: ignore[func-returns-value]  # setattr's None, then the record
    "a settled round called cancelled, its cards null": (
        lambda s: (setattr(s.rounds[0], "state", "cancelled"),  # type: ignore[func-returns-value]  # setattr's None, then the record
                   setattr(s.rounds[0], "cards", None), s)[2], "no cards published"),  # type: ignore[func-returns-value]  # setattr's None, then the record
    "a cancelled round's cards withheld": (
        lambda s: (setattr(s.rounds[1], "cards", None), s)[1], "no cards published"),  # type: ignore[func-returns-value]  # setattr's None, then the record
    "a cancelled round's published cards changed": (
        lambda s: (s.rounds[1].cards.__setitem__("P1", ["AS"] if s.rounds[1].cards["P1"]
                                                  != ["AS"] else ["AH"]), s)[1],
        "was revealed as"),
    "a round in no ended state": (
        lambda s: (setattr(s.rounds[0], "state", "betting"), s)[1], "settled or cancelled"),  # type: ignore[func-returns-value]  # setattr's None, then the record
    "a hand that does not exist": (
        lambda s: (s.rounds[0].cards.__setitem__("P6", ["AS", "AH"]), s)[1], "no hand"),
    "a salt that is not 32 bytes (hash recomputed)": (
        lambda s: _rehash((setattr(s, "salt", "xyz"), s)[1]), "salt is not 64"),  # type: ignore[func-returns-value]
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
async def test_a_tampered_record_is_caught(fair: tuple[ShoeRecord, str], name: str) -> None:
    record, _ = fair
    tamper, says = TAMPERED[name]
    forged = tamper(_copy(record))
    problems = check_shoe(forged)
    assert problems, name
    assert any(says in problem for problem in problems), problems


async def test_a_recomputed_commitment_is_caught_by_the_one_seen_before_the_bets(
        fair: tuple[ShoeRecord, str]) -> None:
    record, seen = fair
    forged = _rehash(_swap_in_first_round(_copy(record)))
    forged.rounds[0].state = "cancelled"  # pretend the round was cancelled, publish what
    forged.rounds[0].cards = None  # the forged order deals: consistent again
    forged.rounds[0].spots = {}
    publish_rounds(forged.order, forged.rounds)
    forged.chain_head = chain_heads(forged)[-1]  # and its game log recomputed
    assert check_shoe(forged) == []  # consistent in itself…
    problems = check_shoe(forged, seen_commitment=seen)  # …but not the shoe announced
    assert len(problems) == 1 and "not the one published" in problems[0]


async def test_nothing_is_revealed_before_the_shoe_ends(store: SQLiteStore) -> None:
    e = TableEngine.new("t1", rng=random.Random(3))
    step = e.open_betting(T0)
    await commit(store, e, step, T0)
    assert e.state.shoe is not None and e.state.shoe.commitment is not None
    assert await store.shoe_view("t1.1") is None
    rows = store.db.execute("SELECT COUNT(*) FROM shoes").fetchone()[0]
    assert rows == 0


def test_a_manual_shoe_has_no_commitment_and_is_never_revealed() -> None:
    e = TableEngine.new("t1", mode="manual", rng=random.Random(3))
    e.start_shoe(T0)
    step = e.card("3D", T0)
    assert [(type(ev), getattr(ev, "commitment", "-")) for ev in step.events] == [
        (p.ShoeStarted, None)]
    assert json.loads(p.encode(step.events[0]))["commitment"] is None
    step = e.set_mode("auto", T0 + 1)  # the manual shoe is set aside: nothing to reveal
    assert [type(ev) for ev in step.events] == [p.ModeChanged] and step.effects == []


# --- verify-shoe ---------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_verify_shoe_from_a_file(fair: tuple[ShoeRecord, str], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    record, seen = fair
    good = tmp_path / "shoe.json"
    good.write_bytes(msgspec.json.encode(record))
    code, out, err = run(capsys, "verify-shoe", "t1.1", "--file", str(good),
                         "--commitment", seen)
    assert (code, err) == (0, "")
    assert out.startswith("shoe t1.1: verified.")
    bad = tmp_path / "tampered.json"
    bad.write_bytes(msgspec.json.encode(_rehash(_swap_in_first_round(_copy(record)))))
    code, out, err = run(capsys, "verify-shoe", "t1.1", "--file", str(bad))
    assert code == 1 and out == ""
    assert err.startswith("shoe t1.1: NOT VERIFIED\n  - round t1.1.1: P1 was revealed as")
    code, out, _ = run(capsys, "verify-shoe", "t1.1", "--file", str(bad), "--json")
    assert code == 1 and json.loads(out)["ok"] is False
    # The money path's attack 3 (docs/security.md): one round's cards set to null, or the round
    # called cancelled,
    # exited 0 ("verified")
    for how in ("null", "cancelled"):
        forged = _copy(record)
        forged.rounds[0].cards = None
        if how == "cancelled":
            forged.rounds[0].state = "cancelled"
        bad.write_bytes(msgspec.json.encode(forged))
        code, out, err = run(capsys, "verify-shoe", "t1.1", "--file", str(bad),
                             "--commitment", seen)
        assert (code, out) == (1, ""), how
        assert "round t1.1.1: no cards published for the 13 slots" in err, how
    broken = tmp_path / "broken.json"
    broken.write_text('{"shoe_id": "t1.1", "commitment": 5}')
    code, _, err = run(capsys, "verify-shoe", "t1.1", "--file", str(broken))
    assert code == 1 and "does not parse" in err


@pytest.fixture
def shoe_server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A tiny HTTP server answering GET /api/shoes/<id> from a dict (else 404)."""
    records: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = records.get(self.path.removeprefix("/api/shoes/"))
            self.send_response(200 if body is not None else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body if body is not None else b'{"error": {}}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", records
    finally:
        server.shutdown()
        server.server_close()


async def test_verify_shoe_over_http(fair: tuple[ShoeRecord, str],
                                     shoe_server: tuple[str, dict[str, bytes]],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    record, seen = fair
    url, records = shoe_server
    records["t1.1"] = msgspec.json.encode(record)
    code, out, _ = run(capsys, "verify-shoe", "--url", url, "t1.1", "--commitment", seen)
    assert code == 0 and "verified" in out
    code, _, err = run(capsys, "verify-shoe", "--url", url, "t1.1", "--commitment", "ab" * 32)
    assert code == 1 and "not the one published" in err
    tampered = _copy(record)
    tampered.rounds[0].cards = {**(tampered.rounds[0].cards or {}), "BANKER": ["9S", "9H"]}
    records["t1.1"] = msgspec.json.encode(tampered)
    code, _, err = run(capsys, "verify-shoe", "--url", url, "t1.1")
    assert code == 1 and "BANKER was revealed as ['9S', '9H']" in err
    code, _, err = run(capsys, "verify-shoe", "--url", url, "t1.2")
    assert code == 2 and "404" in err and "a shoe is revealed when it ends" in err


# --- sealed at rest ------------------------------------------------------------------------------


def test_a_sealed_state_opens_only_with_its_key_and_table() -> None:
    seal = StateSeal(KEY)
    plain = b'{"table": "t1", "shoe": {"order": ["AS", "KH"]}}'
    sealed = seal.seal("t1", plain)
    assert sealed.startswith(MAGIC) and b"AS" not in sealed and plain not in sealed
    assert seal.open("t1", sealed) == plain
    assert seal.seal("t1", plain) != sealed  # a fresh nonce each time
    with pytest.raises(SealError, match="another key"):
        StateSeal(b"another-key-" + KEY).open("t1", sealed)
    with pytest.raises(SealError, match="does not authenticate"):
        seal.open("t2", sealed)  # moved to another table
    damaged = bytearray(sealed)
    damaged[-1] ^= 1
    with pytest.raises(SealError, match="does not authenticate"):
        seal.open("t1", bytes(damaged))
    # A state stored before sealing (plain JSON) still opens: the migration path.
    assert open_state(seal, "t1", plain) == plain
    with pytest.raises(SealError, match="neither sealed"):
        open_state(seal, "t1", b"garbage")
    with pytest.raises(SealError, match="no state key"):
        open_state(None, "t1", sealed)
    assert seal_state(None, "t1", plain) == plain


def test_the_state_key_comes_from_outside_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    s = Settings(data_dir=data, secret=b"x", shoe_key=b"k" * 32)
    assert load_key_ring(s) == (b"k" * 32 + b"\nx", "LIVETABLE_SHOE_KEY", [])
    key_file = tmp_path / "shoe.key"
    key_file.write_text("f" * 64 + "\n")
    key_file.chmod(0o600)
    s = Settings(data_dir=data, secret=b"x", shoe_key_file=key_file)
    assert load_key_ring(s)[0] == b"f" * 64 + b"\nx" and load_key_ring(s)[2] == []
    inside = data / "shoe.key"
    inside.write_text("f" * 64)
    inside.chmod(0o600)
    assert "inside the data directory" in load_key_ring(Settings(
        data_dir=data, secret=b"x", shoe_key_file=inside))[2][0]
    key_file.chmod(0o644)
    assert "readable by others" in load_key_ring(Settings(
        data_dir=data, secret=b"x", shoe_key_file=key_file))[2][0]
    with pytest.raises(ValueError, match="at least 32"):
        load_key_ring(Settings(data_dir=data, secret=b"x", shoe_key=b"short"))
    with pytest.raises(ValueError, match="LIVETABLE_SHOE_KEY_FILE"):
        load_key_ring(Settings(data_dir=data, secret=b"x", shoe_key_file=tmp_path / "none"))
    with pytest.raises(ValueError, match="signing secret"):
        load_key_ring(Settings(data_dir=data, secret=b"s" * 32, shoe_key=b"s" * 32))


def test_the_shoe_key_is_its_own_generated_apart_from_the_secret_and_the_data(
        tmp_path: Path) -> None:
    """The money path's attack 2 (docs/security.md): the default sealing key was the token secret,
    kept beside the
    database. Now a key of its own is generated on the first start, in a 0700 directory
    beside the data directory, 0600, and the secret cannot open what it seals."""
    data = tmp_path / "data"
    s = Settings(data_dir=data)
    secret = s.load_secret()
    ring, source, warnings = load_key_ring(s)
    path = tmp_path / "data-keys" / "shoe.key"
    assert source == f"the key file {path}" and "generated the shoe key" in warnings[0]
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    shoe_key = path.read_bytes().strip()
    assert len(shoe_key) >= 32 and shoe_key != secret
    assert ring == shoe_key + b"\n" + secret  # the secret only opens (the migration)
    assert load_key_ring(s) == (ring, source, [])  # the second start reads the same key
    sealed = StateSeal(ring).seal("t1", b'{"shoe": "next cards"}')
    with pytest.raises(SealError, match="another key"):
        StateSeal(secret).open("t1", sealed)  # what the attacker held: not enough now


def test_a_rotated_ring_seals_with_the_new_key_and_opens_with_the_old() -> None:
    old, new = b"o" * 32, b"n" * 32
    before = StateSeal(old).seal("t1", b"{}")
    ring = StateSeal(new + b"\n" + old)
    assert ring.open("t1", before) == b"{}"
    after = ring.seal("t1", b"{}")
    assert ring.sealed_with(after) == StateSeal(new).key_id
    assert StateSeal(new).open("t1", after) == b"{}"
    with pytest.raises(SealError, match="another key"):
        StateSeal(old).open("t1", after)


async def test_a_state_sealed_with_the_secret_is_resealed_with_the_shoe_key(
        tmp_path: Path) -> None:
    """A deployment from before the shoe key: its state sealed with the signing secret
    opens on the first start and the runner's first commit reseals it with the shoe key."""
    data = tmp_path / "data"
    settings = Settings(data_dir=data)
    secret = settings.load_secret()
    path = data / "livetable.sqlite3"
    old = SQLiteStore(path, seal=StateSeal(secret))
    e = TableEngine.new("t1", rng=random.Random(5))
    step = e.open_betting(T0)
    await commit(old, e, step, T0)
    await old.close()

    store = SQLiteStore(path, seal=StateSeal(load_key_ring(settings)[0]))
    runner = TableRunner("t1", store, MemoryBus(), clock=lambda: T0 + 10)
    await runner.start()
    await runner.stop()
    stored = bytes(store.db.execute("SELECT state FROM tables").fetchone()[0])
    with pytest.raises(SealError, match="another key"):
        StateSeal(secret).open("t1", stored)
    shoe_key = settings.shoe_key_path.read_bytes().strip()
    assert TableEngine.from_bytes(StateSeal(shoe_key).open("t1", stored)).state.round_no == 1
    await store.close()


async def test_a_plain_state_from_before_sealing_loads_is_sealed_and_its_shoe_retired(
        tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    # An old database: the state in plain form, its auto shoe without a commitment.
    old = SQLiteStore(path)
    e = TableEngine.new("t1", rng=random.Random(5))
    step = e.open_betting(T0)
    while e.phase != "settled":
        step.extend(e.tick(e.next_deadline() or T0))
    assert e.state.shoe is not None
    e.state.shoe.salt = e.state.shoe.commitment = None
    e.state.shoe.round_starts = []
    await commit(old, e, step, T0)
    upcoming = json.dumps(e.state.shoe.order[e.state.shoe.drawn:][:8],
                          separators=(",", ":"))[1:-1].encode()
    assert upcoming in old.db.execute("SELECT state FROM tables").fetchone()[0]
    await old.close()

    store = SQLiteStore(path, seal=StateSeal(KEY))
    clock = [T0 + 100_000]
    runner = TableRunner("t1", store, MemoryBus(), clock=lambda: clock[0])
    await runner.start()
    await runner.stop()
    stored = bytes(store.db.execute("SELECT state FROM tables").fetchone()[0])
    assert stored.startswith(MAGIC) and upcoming not in stored
    assert runner.engine is not None and runner.engine.state.last_round
    step = runner.engine.tick(clock[0] + 10_000_000)  # the next round: a new, committed shoe
    started = [ev for ev in step.events if isinstance(ev, p.ShoeStarted)]
    assert [(ev.shoe_id, ev.commitment is not None) for ev in started] == [("t1.2", True)]
    await store.close()


async def test_a_configured_mode_that_a_stored_table_does_not_have_is_said_at_start(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--mode manual`` for a table already stored in auto mode: the table keeps its mode
    (its shoe went with it), and the start says so instead of ignoring the flag silently;
    ``--help`` says it too."""
    store = SQLiteStore(tmp_path / "db.sqlite3", seal=StateSeal(KEY))
    first = TableRunner("t1", store, MemoryBus(), clock=lambda: T0)
    await first.start()
    await first.stop()
    caplog.set_level("WARNING", logger="livetable.runner")
    again = TableRunner("t1", store, MemoryBus(), mode="manual", clock=lambda: T0 + 1)
    await again.start()
    await again.stop()
    assert again.engine is not None and again.engine.state.mode == "auto"
    said = [r.getMessage() for r in caplog.records if "mode" in r.getMessage()]
    assert said and "kept in auto mode" in said[0] and "new tables only" in said[0], said
    await store.close()
    assert main(["serve", "--help"]) == 0
    assert "a table already in the store keeps its own" in " ".join(capsys.readouterr().out.split())


def test_a_shoe_key_that_cannot_be_created_is_a_clear_settings_error(tmp_path: Path) -> None:
    (tmp_path / "data-keys").write_text("a file where the key's directory would go")
    with pytest.raises(SettingsError, match=r"cannot create the shoe key .*LIVETABLE_SHOE_KEY"):
        load_key_ring(Settings(data_dir=tmp_path / "data", secret=b"x" * 32))
