"""Redis as deployed: users and passwords.

Before, ``deploy/redis.conf`` ran with ``protected-mode no`` and no password: anyone on the
network could ``HINCRBY`` a balance (Redis kept the money then; PostgreSQL does now),
``FLUSHALL`` the bus's and the leases' keys or ``CONFIG SET dir`` their way to the host.
Now the rules live in ONE place, ``deploy/redis-users.acl.template``, rendered by
``deploy/redis-acl.sh`` with password hashes from the environment; compose mounts the
two files and the Kubernetes ConfigMap carries copies (checked equal here).

Here a ``redis-server`` of the test's own starts from ``deploy/redis.conf`` (its ``dir`` and
``aclfile`` pointed at the test's directory: the only lines that name container paths) and
the ACL file rendered by the real script. Then:

* without credentials, with a wrong password or as ``default``, nothing runs;
* the ``livetable`` user runs a gateway and an engine as separate processes (pub/sub bus,
  leases, dealer command queue; the money in PostgreSQL) and the chat room, and Redis' ACL
  log shows no refusal of theirs;
* the same user is refused ``FLUSHALL``, ``CONFIG``, ``KEYS``, ``DEBUG``, ``SHUTDOWN``,
  other keys and channels, and the same commands from inside a Lua script;
* the template allows exactly the Redis commands livetable's code sends (a new one must be
  added; one no longer sent goes).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployment import Deployment, place, settlements
from liveserver import ROOT, TABLE, WireClient, close_all
from redis_util import RedisServer, start_redis

from livetable import protocol as p
from livetable.bus.keys import RedisKeys
from livetable.server.chatroom import RedisChatRoom

pytestmark = [
    pytest.mark.redis,
]

DEPLOY = ROOT / "deploy"
TEMPLATE = DEPLOY / "redis-users.acl.template"
RENDER = DEPLOY / "redis-acl.sh"
PASSWORD = secrets.token_hex(32)
ADMIN_PASSWORD = secrets.token_hex(32)

T0 = 1_700_000_000_000


def render(output: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run deploy/redis-acl.sh as compose and Kubernetes do, with only ``env`` set."""
    return subprocess.run(["sh", str(RENDER), str(TEMPLATE), str(output)],
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
                          capture_output=True, text=True, timeout=30)


def deployed_conf(directory: Path, aclfile: Path) -> Path:
    """deploy/redis.conf with its two container paths (dir, aclfile) moved to ``directory``."""
    lines = []
    for line in (DEPLOY / "redis.conf").read_text().splitlines():
        if line.startswith("dir "):
            line = f"dir {directory}"
        elif line.startswith("aclfile "):
            line = f"aclfile {aclfile}"
        lines.append(line)
    conf = directory / "redis.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def start_deployed_redis(directory: Path) -> RedisServer:
    directory.mkdir(parents=True, exist_ok=True)
    aclfile = directory / "users.acl"
    done = render(aclfile, LIVETABLE_REDIS_PASSWORD=PASSWORD,
                  LIVETABLE_REDIS_ADMIN_PASSWORD=ADMIN_PASSWORD)
    assert done.returncode == 0, done.stderr
    return start_redis(directory, config=deployed_conf(directory, aclfile),
                       auth=("livetable", PASSWORD))


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_deployed_redis(tmp_path_factory.mktemp("redis-acl"))
    try:
        yield server
    finally:
        server.kill()


def client(server: RedisServer, username: str | None = None,
           password: str | None = None, *, retry: bool = True) -> Redis:
    """``retry=False``: a refusal is final (redis-py retries an AuthenticationError with
    backoff by default, about 4 s per refused login)."""
    once: dict[str, Any] = {} if retry else {"retry": Retry(NoBackoff(), 0)}
    return Redis(host="127.0.0.1", port=server.port, username=username, password=password,
                 socket_timeout=5, **once)


@pytest.fixture
async def admin(acl_redis: RedisServer) -> AsyncIterator[Redis]:
    r = client(acl_redis, "admin", ADMIN_PASSWORD)
    await r.acl_log_reset()
    try:
        yield r
    finally:
        await r.aclose()


async def refusals(admin: Redis) -> list[dict[str, Any]]:
    """What the ACL log holds (each refused command, key or channel) apart from redis-py's
    CLIENT SETINFO on connecting (refused on Redis >= 7.2, ignored by redis-py)."""
    return [e for e in await admin.acl_log(count=1000)
            if not str(e.get("object", "")).startswith("client|setinfo")]


# --- the rules, their copies, their rendering ----------------------------------------------


def configmap() -> dict[str, str]:
    docs = yaml.safe_load_all((DEPLOY / "kubernetes" / "redis.yaml").read_text())
    config = next(d for d in docs if d and d["kind"] == "ConfigMap"
                  and d["metadata"]["name"] == "redis-config")
    data: dict[str, str] = config["data"]
    return data


def test_kubernetes_carries_the_same_rules_script_and_acl_settings() -> None:
    data = configmap()
    assert data["users.acl.template"] == TEMPLATE.read_text()
    assert data["redis-acl.sh"] == RENDER.read_text()

    def settings(text: str) -> dict[str, str]:
        pairs = (line.split(None, 1) for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))
        return {k: v for k, v in pairs if k in ("bind", "protected-mode", "aclfile", "port")}

    deployed = settings((DEPLOY / "redis.conf").read_text())
    assert deployed == settings(data["redis.conf"])
    assert deployed["protected-mode"] == "yes"
    assert deployed["aclfile"] == "/run/redis/users.acl"


def test_the_rendered_file_holds_hashes_and_no_password(tmp_path: Path) -> None:
    previous = secrets.token_hex(32)
    done = render(tmp_path / "users.acl", LIVETABLE_REDIS_PASSWORD=PASSWORD,
                  LIVETABLE_REDIS_PASSWORD_PREVIOUS=previous)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "users.acl").read_text()
    assert PASSWORD not in text and previous not in text
    assert all(line.startswith("user ") for line in text.splitlines())
    users = {line.split()[1]: line for line in text.splitlines()}
    assert set(users) == {"default", "livetable", "admin"}
    sha = hashlib.sha256
    assert f"#{sha(PASSWORD.encode()).hexdigest()}" in users["livetable"]
    assert f"#{sha(previous.encode()).hexdigest()}" in users["livetable"]
    assert " off " in users["default"] and "nopass" not in text
    assert " off " in users["admin"] and "#" not in users["admin"]  # no admin password
    assert (tmp_path / "users.acl").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(("env", "why"), [
    ({}, "not set"),
    ({"LIVETABLE_REDIS_PASSWORD": "short"}, "shorter than 32"),
    ({"LIVETABLE_REDIS_PASSWORD": "p@ss/word:" + "x" * 40}, "may hold only"),
    ({"LIVETABLE_REDIS_PASSWORD": PASSWORD, "LIVETABLE_REDIS_ADMIN_PASSWORD": PASSWORD},
     "must differ"),
])
def test_the_render_refuses_a_missing_or_weak_password(tmp_path: Path, env: dict[str, str],
                                                      why: str) -> None:
    done = render(tmp_path / "users.acl", **env)
    assert done.returncode == 1 and why in done.stderr, done
    assert not (tmp_path / "users.acl").exists()


def allowed_commands() -> set[str]:
    line = next(line for line in TEMPLATE.read_text().splitlines()
                if line.startswith("user livetable "))
    return {token[1:].lower() for token in line.split() if token.startswith("+")}


#: Modules that run as Redis' ``admin`` user, never as ``livetable``: ``livetable
#: migrate-store`` reads a retired Redis ledger with SCAN (docs/operations.md §6.8).
RUN_AS_ADMIN = {"redis_ledger.py"}
#: redis-py methods named otherwise than the command they send
ALIASES = {"delete": "del"}
#: redis-py calls that are client plumbing, not commands (``pubsub()`` makes a PubSub object)
CLIENT_METHODS = {"pubsub", "pipeline", "register_script", "initialize", "aclose", "close",
                  "execute", "reset", "get_message", "get_sharded_message"}


def commands_livetable_sends(known: set[str]) -> dict[str, set[str]]:
    """Redis command -> the files of livetable/ that send it: from Lua (``redis.call``) and
    from redis-py calls on a Redis client, pipeline or pubsub in the modules that use redis
    (that import it, or hold a client as ``redis``/``_redis``: the chat room)."""
    used: dict[str, set[str]] = {}

    def add(command: str, where: Path) -> None:
        used.setdefault(command, set()).add(str(where.relative_to(ROOT)))

    for path in sorted((ROOT / "livetable").rglob("*")):
        if path.suffix not in (".py", ".lua") or path.name in RUN_AS_ADMIN:
            continue
        text = path.read_text()
        for name in re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z]+)['\"]", text):
            add(name.lower(), path)
        if path.suffix != ".py" or not re.search(
                r"^\s*(from|import) redis\b|\bself\._?redis\b", text, re.M):
            continue
        text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", text)  # Lua, docstrings
        for name in re.findall(r"execute_command\(\s*['\"]([A-Za-z ]+)['\"]", text):
            add(name.lower().replace(" ", "|"), path)
        for method in re.findall(r"\b(?:_?redis|pipe|pubsub|shard|r)\.([a-z_]+)\(", text):
            if method in CLIENT_METHODS:
                continue
            method = ALIASES.get(method, method)
            method = method.removesuffix("_iter")  # hscan_iter() sends HSCAN, repeatedly
            for name in (method, method.replace("_", "|", 1)):
                if name in known:
                    add(name, path)
                    break
            else:
                raise AssertionError(f"{path}: .{method}() is neither a Redis command nor "
                                     f"known client plumbing (CLIENT_METHODS)")
        if "register_script(" in text:  # Script.__call__: EVALSHA, SCRIPT LOAD on NOSCRIPT,
            for name in ("evalsha", "script|load", "script|exists"):  # pipelines: EXISTS
                add(name, path)
        if "pubsub()" in text:  # redis-py's pubsub sends them itself (a sharded
            for name in ("unsubscribe", "sunsubscribe"):  # subscription follows its slot)
                add(name, path)
        if "pipeline(transaction=True)" in text:
            for name in ("multi", "exec"):
                add(name, path)
    return used


async def test_the_acl_allows_every_command_livetable_sends_and_no_dangerous_one(
    admin: Redis
) -> None:
    known: set[str] = set()
    for name, info in (await admin.command()).items():
        known.add(name.lower())
        for sub in info.get("subcommands") or []:
            subname = sub[0] if isinstance(sub, list) else sub
            known.add((subname.decode() if isinstance(subname, bytes) else subname).lower())
    used = commands_livetable_sends(known)
    # the scan works: the leases' scripts, the chat room, the bus, the commands
    assert {"evalsha", "pexpire", "xdel", "publish", "blpop", "set"} <= set(used)
    allowed = allowed_commands()
    missing = {name: sorted(files) for name, files in used.items() if name not in allowed}
    assert not missing, f"add these to {TEMPLATE.name}'s livetable user: {missing}"
    unused = allowed - set(used)
    assert not unused, f"livetable no longer sends these: take them out of {TEMPLATE.name}"
    dangerous = {"flushall", "flushdb", "config", "keys", "scan", "debug", "shutdown",
                 "monitor", "acl", "client", "eval", "script|flush", "script|kill",
                 "function", "save", "bgsave", "replicaof", "slaveof", "module", "migrate",
                 "restore", "select", "swapdb", "info"}
    assert not allowed & dangerous


# --- who gets in -----------------------------------------------------------------------------


def raw(port: int, *commands: tuple[str, ...]) -> list[bytes]:
    """Each command's reply line, on one plain connection that never authenticates."""
    replies = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock, \
            sock.makefile("rb") as replies_in:
        for args in commands:
            sock.sendall(f"*{len(args)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args))
            replies.append(replies_in.readline().rstrip())
    return replies


async def test_a_client_without_credentials_is_refused(acl_redis: RedisServer,
                                                       admin: Redis) -> None:
    await admin.hset("lt:{ledger}:balances", "alice", 100)
    replies = raw(acl_redis.port, ("PING",), ("FLUSHALL",),
                  ("HINCRBY", "lt:{ledger}:balances", "alice", "1000000"),
                  ("CONFIG", "SET", "dir", "/tmp"), ("AUTH", "default", ""))
    assert all(r.startswith(b"-NOAUTH") for r in replies[:4]), replies
    assert replies[4].startswith(b"-WRONGPASS"), replies
    for username, password in (("livetable", "wrong-" + PASSWORD[6:]), ("default", ""),
                               ("default", PASSWORD), ("admin", PASSWORD),
                               ("nobody", PASSWORD)):
        intruder = client(acl_redis, username, password, retry=False)
        try:
            with pytest.raises(AuthenticationError):
                await intruder.ping()
        finally:
            await intruder.aclose()
    assert await admin.hget("lt:{ledger}:balances", "alice") == b"100"


@pytest.mark.parametrize("command", [
    ("FLUSHALL",), ("FLUSHDB",), ("CONFIG", "SET", "dir", "/tmp"), ("CONFIG", "GET", "*"),
    ("KEYS", "*"), ("SCAN", "0"), ("DEBUG", "SLEEP", "0"), ("SHUTDOWN", "NOSAVE"),
    ("MONITOR",), ("ACL", "SETUSER", "livetable", "+@all"), ("ACL", "LIST"), ("BGSAVE",),
    ("REPLICAOF", "127.0.0.1", "1"), ("MODULE", "LOAD", "/tmp/x.so"), ("SCRIPT", "FLUSH"),
    ("EVAL", "return 1", "0"), ("CLIENT", "KILL", "TYPE", "normal"), ("INFO",),
    ("SELECT", "1"),
    # its own commands on keys and channels that are not livetable's
    ("GET", "other:key"), ("HINCRBY", "sessions", "x", "1"), ("PUBLISH", "other", "x"),
    ("SUBSCRIBE", "__keyspace@0__:lt:{ledger}:balances"),
], ids=lambda c: " ".join(c[:2]))
async def test_the_livetable_user_is_refused_the_rest(acl_redis: RedisServer,
                                                      admin: Redis,
                                                      command: tuple[str, ...]) -> None:
    await admin.set("lt:canary", "alive")
    livetable = client(acl_redis, "livetable", PASSWORD)
    try:
        # DEBUG and MODULE are also refused by enable-debug/module-command (default "no"),
        # before the ACL is asked
        with pytest.raises(ResponseError if command[0] in ("DEBUG", "MODULE")
                           else NoPermissionError):
            await livetable.execute_command(*command)  # type: ignore[no-untyped-call]
        assert await livetable.get("lt:canary") == b"alive"  # still there, still running
    finally:
        await livetable.aclose()
    # the ACL itself refuses it, whatever else might
    verdict = await admin.execute_command("ACL", "DRYRUN", "livetable", *command)  # type: ignore[no-untyped-call]
    assert b"no permissions" in verdict, verdict


async def test_a_lua_script_does_not_widen_the_livetable_user(acl_redis: RedisServer,
                                                              admin: Redis) -> None:
    await admin.set("lt:canary", "alive")
    livetable = client(acl_redis, "livetable", PASSWORD)
    try:
        for body in ("return redis.call('FLUSHALL')",
                     "return redis.call('KEYS', '*')",
                     "return redis.call('SCAN', '0')",
                     "return redis.call('SET', 'elsewhere', '1')",
                     "return redis.call('PUBLISH', 'other', 'x')"):
            sha = await livetable.script_load(body)
            with pytest.raises(ResponseError, match="user executing the script can't"):
                await livetable.evalsha(sha, 0)
        assert await livetable.get("lt:canary") == b"alive"
    finally:
        await livetable.aclose()
    assert await admin.exists("elsewhere") == 0


# --- livetable with nothing more -------------------------------------------------------------


async def test_the_livetable_user_runs_the_chat_room(acl_redis: RedisServer,
                                                    admin: Redis) -> None:
    """Every call of the chat room (a line, its deletion, a mute and its end, the rate
    window, who deals), as the gateways make them, on the deployed ACL."""
    await admin.flushall()
    redis = Redis.from_url(acl_redis.url)
    room = RedisChatRoom(redis, RedisKeys())
    try:
        assert await room.take_turn("alice", T0)
        kept = await room.add(p.ChatMessage(id="", table=TABLE, sender="Alice", role="player",
                                            text="hi", at=T0, player_id="alice"))
        assert [m.text for m in await room.recent(TABLE)] == ["hi"]
        assert await room.delete(TABLE, kept.id)
        await room.mute(TABLE, "alice", 5, T0)
        assert await room.muted(TABLE, "alice", T0)
        await room.mute(TABLE, "alice", 0, T0)
        assert not await room.muted(TABLE, "alice", T0)
        await room.set_presenter(TABLE, p.Presenter(name="Mai"))
        assert await room.presenter(TABLE) == p.Presenter(name="Mai")
    finally:
        await redis.aclose()
    assert await refusals(admin) == []


async def test_a_gateway_and_an_engine_run_on_the_livetable_user(
    tmp_path: Path, acl_redis: RedisServer, admin: Redis
) -> None:
    """Separate processes, so that every way livetable uses Redis is on the wire: the bus
    (PUBLISH/SUBSCRIBE), the lease scripts (SET NX PX, the lease counter), the dealer
    command queue (RPUSH/BLPOP/EXPIRE)."""
    await admin.flushall()
    deployment = Deployment(tmp_path, acl_redis, engines=1, gateways=1)
    clients: list[WireClient] = []
    try:
        await deployment.start()  # the engine holds t1's lease, the gateway is ready
        (engine,), (gateway,) = deployment.engines, deployment.gateways
        for server in (engine, gateway):
            assert (await deployment.readyz(server) or {}).get("ready") is True
        token, _ = await deployment.guest(gateway)
        player = await WireClient.connect(gateway.ws, "player")
        dealer = await WireClient.connect(gateway.ws_dealer, "dealer")
        clients += [player, dealer]
        # every hello at once: each connection's hello timeout runs from its upgrade
        await asyncio.gather(player.hello(token), dealer.hello(gateway.dealer_token()))
        opened = await player.expect("round_opened")
        accepted = await place(player, opened["round_id"], [("P1", 100), ("P2_PAIR", 20)])
        await player.expect("round_settled", round_id=opened["round_id"])
        for _ in accepted:
            await player.expect("bet_settled")
        assert set(settlements(player)) == {b["bet_id"] for b in accepted}
        # a dealer command crosses from the gateway to the engine through Redis
        await player.expect("round_opened")
        paused = await dealer.command("pause", reason="acl test")
        assert paused["type"] == "ack", paused
        await player.expect("table_paused")
        assert (await dealer.command("resume"))["type"] == "ack"
        assert (await deployment.bet_record(gateway, token))  # HTTP API, Bet Record
        report = await deployment.audit()
        assert report.ok, report.problems
    finally:
        await close_all(clients)
        await deployment.close()
    assert await refusals(admin) == []
