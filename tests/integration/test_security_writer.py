"""The money path's attack 1 (docs/security.md), against a real ``livetable serve``: the boundary
to the ledger's
writer process must never hand one call's answer to another caller.

The attack as it was reported: a request the server could not encode for the writer (a
``get_bets`` with a limit of 2^70) left the writer's list of waiting calls one entry off,
and from then on every answer went to the caller before — the attacker's next
``get_bets`` received the victim's Bet Record. The first test is that attack, step by
step; the second sends every frame a client may send, with extreme values (huge and
negative numbers, long strings, wrong types), through the gateway and the writer
process, and checks after each example that nothing another player owns reached the
sender, that the victim still reads exactly its own bets, and that the writer process
never restarted (an answer it cannot place used to kill its reader and the child).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import msgspec
import msgspec.inspect as mi
import pytest
from dealing import Dealer, between_rounds
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from liveserver import TABLE, LiveServer, WireClient

from livetable import protocol as p

VICTIM = "victim-7f3a"
VICTIM_NAME = "Vicky Secretname"
#: In every id of the victim's slips and bets.
MARK = "c0ffee"
#: What only the victim's own answers may hold.
SECRETS = (VICTIM, VICTIM_NAME, MARK)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A manual table (the test opens the round the victim bets in), with rates high
    enough that the limits never answer in the attack's place."""
    server = LiveServer(tmp_path_factory.mktemp("writer-boundary"), mode="manual", env={
        "LIVETABLE_PLAYER_BALANCE": "1000000",
        "LIVETABLE_FRAMES_PER_SECOND": "5000",
        "LIVETABLE_PLAYER_FRAMES_PER_SECOND": "5000",
        "LIVETABLE_BET_RECORD_RATE": "100000/second",
        "LIVETABLE_RATE_STRIKES": "100000",
        "LIVETABLE_CONNECTIONS_PER_ADDRESS": "200",
    })
    server.start()
    try:
        yield server
    finally:
        server.stop()


def writer_pid(server: LiveServer) -> int:
    """The pid of the server's SQLite writer process (its one child running it)."""
    assert server.process is not None
    found = []
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        children: list[str] = []
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            children = (task / "children").read_text().split()
        for child in children:
            with contextlib.suppress(FileNotFoundError):
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                if b"livetable.store.sqlite.writer" in cmdline:
                    found.append(int(child))
    assert len(found) == 1, f"expected one writer process, found {found}"
    return found[0]


async def victim_slip(server: LiveServer, name: str
                      ) -> tuple[WireClient, WireClient, str, set[str]]:
    """The victim, signed in, with a slip accepted in a round left open (betting for a
    minute); the dealer's console (closing it ends nothing); the round; the bet ids."""
    tokens = server.dealer_token(), server.player_token(VICTIM, VICTIM_NAME)  # first: a
    console = await WireClient.connect(server.ws_dealer, "console")  # connection must say
    await console.hello(tokens[0])  # hello in time
    opened = await Dealer(server, console).open_round()
    victim = await WireClient.connect(server.ws, "victim")
    await victim.hello(tokens[1])
    bets = {f"vbet-{MARK}-{name}-1": ("P1", 100), f"vbet-{MARK}-{name}-2": ("P3", 200)}
    answer = await victim.slip(f"vslip-{MARK}-{name}", opened["round_id"],
                               [(b, s, a) for b, (s, a) in bets.items()])
    assert answer["type"] == "slip_accepted", answer
    return victim, console, opened["round_id"], set(bets)


async def own_bets(victim: WireClient) -> set[str]:
    """The bet ids on the first page of the victim's Bet Record."""
    await victim.send({"type": "get_bets", "limit": 5})
    page = await victim.expect("bets", timeout=5)
    return {bet["bet_id"] for bet in page["bets"]}


def assert_nothing_of_the_victim(frames: list[str], who: str) -> None:
    for text in frames:
        leaked = [secret for secret in SECRETS if secret in text]
        assert not leaked, f"{who} received the victim's {leaked}: {text[:300]}"


async def test_an_unencodable_get_bets_shifts_no_answer(server: LiveServer) -> None:
    victim, console, _, placed = await victim_slip(server, "attack")
    pid = writer_pid(server)
    token, _ = server.guest()
    poisoned = await WireClient.connect(server.ws, "attacker poisoned")
    asking = await WireClient.connect(server.ws, "attacker asking")
    try:
        await poisoned.hello(token)
        await asking.hello(token)
        await poisoned.send({"type": "get_bets", "limit": 2**70})
        error = await poisoned.expect("error", timeout=5)
        assert error["code"] == "bad_frame" and "$.limit" in error["message"], error
        await asking.send({"type": "get_bets", "limit": 5})
        await asyncio.sleep(0.3)  # the attacker's call reaches the writer first
        await victim.send({"type": "get_bets", "limit": 5})
        mine = await victim.expect("bets", timeout=5)
        # the victim's own record (with the fuzz test's bets too, when it ran first)
        ids = {b["bet_id"] for b in mine["bets"]}
        assert placed <= ids and all(MARK in bet for bet in ids), mine
        theirs = await asking.expect("bets", timeout=5)
        assert theirs["bets"] == [], theirs
        assert_nothing_of_the_victim(poisoned.texts + asking.texts, "the attacker")
        assert writer_pid(server) == pid, "the writer process restarted"
    finally:
        for client in (poisoned, asking, victim, console):
            await client.close()


async def test_a_table_the_fuzzing_left_in_auto_is_dealt_again(server: LiveServer) -> None:
    """The fuzzing test's dealer frames may switch the table to auto (a ``set_mode``) or
    pause it; a test that runs after it (the order is shuffled) still deals its round."""
    console = await WireClient.connect(server.ws_dealer, "fuzzing console")
    try:
        await console.hello(server.dealer_token())
        await between_rounds(console, server)
        assert (await console.command("set_mode", auto=True))["type"] == "ack"
    finally:
        await console.close()
    victim, console, round_id, _ = await victim_slip(server, "after-auto")
    try:
        table = server.get(f"/api/tables/{TABLE}").json()
        assert (table["mode"], table["round_id"]) == ("manual", round_id), table
    finally:
        for client in (victim, console):
            await client.close()


# --- every client frame, with extreme values --------------------------------------------------

PLAYER_FRAMES = {str(k.__struct_config__.tag): k for k in get_args(p.PlayerCommand)}
DEALER_FRAMES = {str(k.__struct_config__.tag): k for k in get_args(p.DealerCommand)}
#: Stand for the round the victim bet in, and for the sender's own token (known only once
#: the server runs).
THE_ROUND, THE_TOKEN = "<the round>", "<the token>"

#: Whole numbers at and past every bound on the way: the schema's (2^53), msgpack's (2^63,
#: 2^64), SQLite's, and the rules' (a bet's amount).
huge = st.sampled_from([2**70, -(2**70), 2**64, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1,
                        2**53, 2**53 - 1, -(2**53), -1, 0, 10**12 + 1])
extreme = st.one_of(
    huge,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.text(alphabet="x€\x00\"\\", min_size=100, max_size=2000),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
#: A value each field of a client frame takes: a frame of these gets past the schema, to
#: the gateway, the engine and the ledger, which judge it.
plausible: dict[str, st.SearchStrategy[Any]] = {
    "v": st.just(1),
    "table": st.just(TABLE),
    "token": st.just(THE_TOKEN),
    "resume": st.none(),
    "round_id": st.just(THE_ROUND),
    "bet_id": st.text(min_size=1, max_size=40),
    "slip_id": st.text(min_size=1, max_size=40),
    "tip_id": st.text(min_size=1, max_size=70),
    "spot": st.sampled_from(["P1", "P2", "P3_PAIR", "B", "P9"]),
    "amount": st.integers(min_value=-5, max_value=6_000),
    "limit": st.integers(min_value=-5, max_value=300),
    "before": st.sampled_from([None, "1", "999999"]),
    "t": st.integers(min_value=0, max_value=10**6),
    "betting_ms": st.integers(min_value=500, max_value=700_000),
    "card": st.sampled_from(["AS", "10H", "ZZ"]),
    "reason": st.text(max_size=30),
    "auto": st.booleans(),
    "count": st.integers(min_value=0, max_value=14),
    "approval": st.none(),
}


def holds_int(kind: mi.Type) -> bool:
    """Whether a field of this type may be a whole number."""
    if isinstance(kind, mi.UnionType):
        return any(holds_int(k) for k in kind.types)
    return isinstance(kind, mi.IntType)


def value_of(field: mi.Field) -> st.SearchStrategy[Any]:
    """Extreme values for ``field``; half of them huge numbers where it takes a number."""
    return st.one_of(huge, extreme) if holds_int(field.type) else extreme


def fields_of(kind: type[msgspec.Struct]) -> tuple[mi.Field, ...]:
    info = mi.type_info(kind)
    assert isinstance(info, mi.StructType)
    return info.fields


def dict_of(kind: type[msgspec.Struct],
            bad: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A ``kind`` as a client sends it: plausible values, and in half of them some fields
    extreme (or left out)."""
    fields = fields_of(kind)
    good = st.fixed_dictionaries({f.name: plausible.get(f.name, extreme) for f in fields})
    worse = st.fixed_dictionaries({}, optional={f.name: bad.get(f.name, value_of(f))
                                                for f in fields})
    missing = st.sets(st.sampled_from([f.name for f in fields])) if fields else st.just(set())
    return st.builds(lambda g, w, m: {k: v for k, v in {**g, **w}.items() if k not in m},
                     good, st.one_of(st.just({}), worse),
                     st.one_of(st.just(set()), st.just(set()), missing))


plausible["bets"] = st.lists(dict_of(p.SlipBet, {}), min_size=1, max_size=4)
nested: dict[str, st.SearchStrategy[Any]] = {
    "bets": st.one_of(st.lists(dict_of(p.SlipBet, {}), max_size=4), extreme),
    "resume": st.one_of(dict_of(p.ResumePoint, {}), extreme),
}


def frame_of(kind: type[msgspec.Struct]) -> st.SearchStrategy[dict[str, Any]]:
    tag = str(kind.__struct_config__.tag)
    return st.builds(lambda body: {"type": tag, **body}, dict_of(kind, nested))


frames = st.lists(st.one_of(
    *(st.tuples(st.just("player"), frame_of(k)) for k in PLAYER_FRAMES.values()),
    *(st.tuples(st.just("dealer"), frame_of(k)) for k in DEALER_FRAMES.values())),
    min_size=1, max_size=4)


def test_every_client_frame_type_is_fuzzed() -> None:
    """The strategy covers the client unions as they are: a new frame is fuzzed too."""
    assert set(PLAYER_FRAMES) == {"hello", "place_bet", "place_bets", "get_bets", "ping",
                                  "get_balance", "chat_send", "reality_check_ack", "tip"}
    assert set(DEALER_FRAMES) == {"hello", *p.DEALER_COMMANDS}


async def _connect(server: LiveServer, kind: str, token: str,
                   hello: dict[str, Any] | None) -> WireClient:
    """A connection of ``kind``; signed in, unless the example's own hello is sent."""
    url = server.ws if kind == "player" else server.ws_dealer
    client = await WireClient.connect(url, f"fuzzing {kind}")
    if hello is None:
        await client.hello(token)
    else:
        await client.send(json.dumps(hello))
    return client


async def _settle(client: WireClient, signed_in: bool) -> None:
    """Wait until the server has answered what ``client`` sent: a ping answers last on a
    connection signed in; one that sent its own hello gets one answer to it (a welcome,
    or an error), or is closed."""
    with contextlib.suppress(Exception):
        if not signed_in:
            await client.next(timeout=3)
            return
        await client.send({"type": "ping", "t": 424242})
        await client.expect(lambda f: f.get("type") == "pong" and f.get("t") == 424242,
                            timeout=5)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(sent=frames)
@example(sent=[("player", {"type": "get_bets", "limit": 2**70})])  # the attack as reported
async def test_no_client_frame_reaches_another_players_data(
        server: LiveServer, sent: list[tuple[str, dict[str, Any]]]) -> None:
    victim, round_id, placed, pid, tokens = await _fuzz_state(server)
    clients: dict[tuple[str, int], WireClient] = {}
    try:
        for n, (kind, frame) in enumerate(sent):
            stand_ins = {THE_ROUND: round_id, THE_TOKEN: tokens[kind]}
            frame = {k: stand_ins.get(v, v) if isinstance(v, str) else v
                     for k, v in frame.items()}
            if frame["type"] == "hello":  # on a connection of its own, as its first frame
                clients[(kind, n)] = await _connect(server, kind, tokens[kind], frame)
                continue
            client = clients.get((kind, -1))
            if client is None:
                client = clients[(kind, -1)] = await _connect(server, kind, tokens[kind],
                                                              None)
            with contextlib.suppress(Exception):  # the server may have closed it
                await client.send(json.dumps(frame))
        await asyncio.gather(*(_settle(client, n == -1) for (_, n), client in clients.items()))
        for client in clients.values():
            assert_nothing_of_the_victim(client.texts, f"a {client.name}")
        mine = await own_bets(victim)
        assert placed <= mine and all(MARK in bet for bet in mine), mine
        assert writer_pid(server) == pid, "the writer process restarted"
    finally:
        for client in clients.values():
            await client.close()


FuzzState = tuple[WireClient, str, set[str], int, dict[str, str]]
_state: dict[int, asyncio.Task[FuzzState]] = {}


def _fuzz_state(server: LiveServer) -> asyncio.Task[FuzzState]:
    """The victim with its slip and its round, the writer's pid, and the attacker's
    tokens: set up once for all the examples (of an event loop: the test's)."""
    loop = asyncio.get_running_loop()
    if id(loop) not in _state:
        async def setup() -> FuzzState:
            victim, _, round_id, placed = await victim_slip(server, "fuzz")
            token, _ = server.guest()
            return victim, round_id, placed, writer_pid(server), {
                "player": token, "dealer": server.dealer_token()}
        _state[id(loop)] = loop.create_task(setup())
    return _state[id(loop)]
