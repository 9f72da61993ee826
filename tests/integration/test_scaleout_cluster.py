"""Redis Cluster: one table's keys in one slot, and table events over sharded pub/sub.

A cluster of three masters runs locally (``cluster-enabled`` redis-servers joined by
``redis-cli --cluster create``). Two things are shown:

* every per-table key name the scale-out code uses — the lease's owner/token/counter, the
  dealer command list, the chat and the pub/sub channel — hashes to one slot (CLUSTER
  KEYSLOT, asked of the cluster), and so does every key of the table actually written;
* ``livetable serve --redis <primary> --redis-pubsub-cluster <cluster node>`` (the money in
  PostgreSQL, ``LIVETABLE_POSTGRES_URL``) publishes the
  table's steps with SPUBLISH and its gateway receives them with SSUBSCRIBE on the node that
  owns the slot: a websocket client gets whole rounds, in order, with bets settled by the
  rules. Nothing goes over the primary's classic pub/sub. The subscription's watchdog keeps
  quiet through a betting phase longer than its silence timeout (it pings the shard
  connection, so an idle table is not mistaken for a dead subscription).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest
from deployment import (
    GUEST_BALANCE,
    SCALE_ENV,
    ClusterNode,
    assert_in_order,
    check_settled,
    knows_the_table,
    place,
    redis_cli,
    settlements,
    start_cluster,
    table_events,
    wait_for,
)
from liveserver import TABLE, LiveServer, WireClient, all_joined, close_all, hands_from
from pg_util import fresh_database
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis_util import RedisServer, start_redis

from livetable.bus import TableBatch
from livetable.bus.keys import RedisKeys

pytestmark = [
    pytest.mark.redis,
]

#: The names a deployment with the default prefix uses.
KEYS = RedisKeys()
#: Longer than the bus watchdog's 3 s of silence: an idle subscription must not look dead.
BETTING_SECONDS = 4


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[list[ClusterNode]]:
    nodes = await start_cluster(tmp_path / "cluster")
    try:
        yield nodes
    finally:
        for node in nodes:
            node.kill()


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "primary", appendonly=True)
    try:
        yield server
    finally:
        server.kill()


def _serves(node: ClusterNode, slot: int) -> bool:
    myself = next(line for line in redis_cli(node.port, "cluster", "nodes").splitlines()
                  if "myself" in line)
    for part in myself.split()[8:]:
        low, _, high = part.partition("-")
        if low.isdigit() and int(low) <= slot <= int(high or low):
            return True
    return False


async def test_sharded_pubsub_and_one_slot_per_table(
        tmp_path: Path, cluster: list[ClusterNode], primary: RedisServer) -> None:
    seed = cluster[0]
    env = {**SCALE_ENV, "LIVETABLE_POSTGRES_URL": fresh_database(),
           "LIVETABLE_POSTGRES_REPLICATION": "none"}
    server = LiveServer(tmp_path / "serve", command="serve", env=env,
                        betting_seconds=BETTING_SECONDS,
                        args=["--redis", primary.url,
                              "--redis-pubsub-cluster", f"redis://127.0.0.1:{seed.port}"])
    listener = RedisCluster.from_url(f"redis://127.0.0.1:{seed.port}")
    await listener.initialize()
    pubsub = listener.pubsub()
    await pubsub.ssubscribe(KEYS.steps(TABLE))  # the test listens on the cluster too
    await asyncio.to_thread(server.start)
    clients: list[WireClient] = []
    try:
        # ready, and its gateway knows the table (/readyz is 200 before: a loaded run's
        # hello came first and was closed 4004, unknown table), as Deployment waits
        async def ready() -> bool | None:
            return knows_the_table(server.get("/readyz").json()) or None

        await wait_for(ready, 15, "the gateway to know the table")
        token, _ = server.guest()
        # each connection says hello as soon as it is upgraded (its timeout runs from there)
        (player, _), (viewer, _) = await all_joined((server.ws, "player", token),
                                                    (server.ws, "viewer", None))
        clients += [player, viewer]
        opened = await player.expect("round_opened")
        round_id = opened["round_id"]
        bets = await place(player, round_id, [("P1", 100), ("P4_PAIR", 10), ("P2", 55)])
        await viewer.expect("round_settled", round_id=round_id, timeout=BETTING_SECONDS + 10)
        for bet in bets:
            await player.expect("bet_settled", bet_id=bet["bet_id"])
        following = await viewer.expect(lambda f: f.get("type") == "round_opened"
                                        and f["seq"] > opened["seq"])

        # whole rounds, in order, to both clients
        for client in clients:
            events = table_events(client)
            assert_in_order(events)
            kinds = [f["type"] for f in client.frames if f.get("round_id") == round_id
                     and "seq" in f]
            # the round's news (bet_stats once betting closed, round_winners once settled)
            # comes when the store has answered, between the round's own steps
            news = {"bet_stats", "round_winners"}
            steps = [kind for kind in kinds if kind not in news]
            assert steps == (["round_opened"] + ["card_dealt"] * 12 + ["betting_closed"]
                             + ["hand_revealed"] * 6 + ["round_settled"]), kinds
            assert kinds.count("bet_stats") <= 1 and kinds.count("round_winners") <= 1, kinds
            if "bet_stats" in kinds:
                assert kinds.index("bet_stats") > kinds.index("betting_closed"), kinds
        hands = hands_from(viewer.frames, round_id)
        net = check_settled(bets, settlements(player), hands)
        assert player.of_type("bet_settled")[-1]["balance"] == GUEST_BALANCE + net

        # the steps went out by SPUBLISH on the cluster: the test's own SSUBSCRIBE got them
        seen: set[int] = set()
        async with asyncio.timeout(10):
            while following["seq"] not in seen:
                message = await pubsub.get_sharded_message(timeout=1.0)
                if message and message["type"] == "smessage":
                    batch = msgspec.msgpack.decode(message["data"], type=TableBatch)
                    seen.update(seq for seq, _ in batch.frames)

        # one slot per table, as the cluster computes it
        names = [KEYS.lease_owner(TABLE), KEYS.lease_token(TABLE), KEYS.lease_counter(TABLE),
                 KEYS.commands(TABLE), KEYS.reply(TABLE, "r1"), KEYS.chat(TABLE),
                 KEYS.presenter(TABLE), KEYS.steps(TABLE)]
        slots = {name: int(redis_cli(seed.port, "cluster", "keyslot", name)) for name in names}
        assert len(set(slots.values())) == 1, slots
        slot = slots[KEYS.steps(TABLE)]
        assert slot == key_slot(TABLE.encode())  # the hash tag is the table id
        # ... and every key actually written is the table's: no money in Redis
        direct = Redis.from_url(primary.url)
        written = [k.decode() for k in await direct.keys("*")]  # type: ignore[union-attr]
        await direct.aclose()
        assert KEYS.lease_owner(TABLE) in written, written
        assert {key_slot(k.encode()) for k in written} == {slot}, written

        # the gateway's subscription is a shard subscription on the slot's owner, not a
        # classic one on the primary
        owner = next(n for n in cluster if _serves(n, slot))
        assert redis_cli(owner.port, "pubsub", "shardnumsub", KEYS.steps(TABLE)).split() == [
            KEYS.steps(TABLE), "2"]  # the gateway's and the test's
        assert redis_cli(primary.port, "pubsub", "numsub", KEYS.steps(TABLE)).split() == [
            KEYS.steps(TABLE), "0"]
        assert redis_cli(primary.port, "pubsub", "shardnumsub", KEYS.steps(TABLE)).split() == [
            KEYS.steps(TABLE), "0"]
        # the watchdog did not tear the subscription down in a 4 s betting phase
        metrics = server.get("/metrics").text
        assert "livetable_redis_reconnects_total" not in metrics or \
            "livetable_redis_reconnects_total 0" in metrics, metrics
    finally:
        await close_all(clients)
        await pubsub.aclose()
        await listener.aclose()
        server.kill()
