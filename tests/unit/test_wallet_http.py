"""The wallet's HTTP client (livetable/operator/client.py) against raw HTTP/1.1 servers on
loopback, each answering as a real server may: keep-alive, chunked, ended by the close,
closing an idle connection, garbage, twice. Every outcome a client of its own must get
right: an answer read whole or an unknown outcome, never a connection reused after an
answer that did not end cleanly, never more connections than allowed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from livetable.operator import signatures
from livetable.operator.client import KEEPALIVE_SECONDS, MAX_ANSWER, WalletClient, _Connection

OK = b'{"status":"ok","balance":500}'


def answer(body: bytes = OK, *, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n"
            + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body)


#: A reply that ends with this is written without it, then the connection is closed.
CLOSE = b"<close>"


class Server:
    """A loopback server: ``reply(n, request)`` gives the bytes to answer the n-th request
    of a connection with (None: close the connection instead; ending with :data:`CLOSE`:
    close it once they are written)."""

    def __init__(self, reply: Callable[[int, bytes], bytes | None]) -> None:
        self.reply = reply
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        self.writers.append(writer)
        try:
            n = 0
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                n += 1
                out = self.reply(n, request)
                if out is None:
                    break
                writer.write(out.removesuffix(CLOSE))
                await writer.drain()
                if out.endswith(CLOSE):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


@contextlib.asynccontextmanager
async def serving(reply: Callable[[int, bytes], bytes | None]) -> AsyncIterator[
        tuple[Server, WalletClient]]:
    server = Server(reply)
    listener = await asyncio.start_server(lambda r, w: server.handle(r, w), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = WalletClient(f"http://127.0.0.1:{port}/op/wallet", b"s" * 32, timeout=5,
                          connections=4)
    try:
        yield server, client
    finally:
        await client.aclose()
        listener.close()
        for writer in server.writers:
            writer.close()


async def test_calls_share_one_kept_alive_connection_and_are_signed() -> None:
    async with serving(lambda n, r: answer()) as (server, client):
        for _ in range(3):
            reply = await client.call("debit", b'{"tx_id":"a"}')
            assert (reply.status, reply.balance) == ("ok", 500)
        assert server.connections == 1
        first = server.requests[0].decode()
        assert first.startswith("POST /op/wallet/debit HTTP/1.1\r\n")
        assert f"Host: 127.0.0.1:{client.target.port}\r\n" in first
        assert f"{signatures.HEADER}: " in first and f"{signatures.TIMESTAMP_HEADER}: " in first
        assert first.endswith('\r\n\r\n{"tx_id":"a"}')


async def test_a_chunked_answer_and_one_ended_by_the_close_are_read_whole() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"10\r\n" + OK[:16] + b"\r\n" + b"%x\r\n" % len(OK[16:]) + OK[16:]
               + b"\r\n0\r\n\r\n")
    async with serving(lambda n, r: chunked) as (server, client):
        assert (await client.call("balance", b"{}")).balance == 500
        assert (await client.call("balance", b"{}")).balance == 500
        assert server.connections == 1  # chunked keeps the connection

    def by_close(n: int, r: bytes) -> bytes | None:
        return b"HTTP/1.0 200 OK\r\n\r\n" + OK + CLOSE

    async with serving(by_close) as (server, client):
        # the close ends the answer; the connection is not kept
        assert (await client.call("balance", b"{}")).balance == 500
        assert (await client.call("balance", b"{}")).balance == 500
        assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_a_failed_call() -> None:
    # the second request on each connection meets a close (a keep-alive timeout that
    # fired as the call was sent): sent again once, on a fresh connection
    async with serving(lambda n, r: answer() if n == 1 else None) as (server, client):
        for _ in range(3):
            assert (await client.call("debit", b"{}")).ok
        assert server.connections == 3


async def test_a_connection_idle_between_two_rounds_is_used_again() -> None:
    """A round's debits come every half minute; a pool that let its connections go after
    4 s idle opened them all again at every close of betting (hundreds of connects, with
    https as many TLS handshakes). Kept 50 s now; past that, a fresh one."""
    now = [1_000.0]
    async with serving(lambda n, r: answer()) as (server, client):
        client.clock = lambda: now[0]
        assert (await client.call("debit", b"{}")).ok
        now[0] += 30  # the next round's close of betting
        assert (await client.call("debit", b"{}")).ok
        assert server.connections == 1
        now[0] += KEEPALIVE_SECONDS + 1
        assert (await client.call("debit", b"{}")).ok
        assert server.connections == 2


async def test_an_answer_cut_short_or_unreadable_is_an_unknown_outcome() -> None:
    async def one(raw: bytes) -> tuple[str | None, str, int]:
        def cut(n: int, r: bytes) -> bytes | None:
            return raw + CLOSE

        async with serving(cut) as (server, client):
            reply = await client.call("debit", b"{}")
            return reply.status, reply.reason, server.connections

    # the headers cut by the close: not sent again (some of an answer came)
    assert await one(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"st") == (
        None, "ConnectionDropped", 1)
    assert (await one(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"))[:2] == (
        None, "HttpParserError")
    status, reason, _ = await one(b"SPDY/9 hello\r\n\r\n")
    assert status is None and reason.startswith("HttpParser")
    # and a cut answer's connection is never used again: the next call opens another
    cuts = [b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{" + CLOSE, answer()]
    async with serving(lambda n, r: cuts.pop(0)) as (server, client):
        assert (await client.call("debit", b"{}")).reason == "ConnectionDropped"
        assert (await client.call("debit", b"{}")).ok
        assert server.connections == 2


async def test_two_answers_to_one_request_end_the_connection() -> None:
    async with serving(lambda n, r: answer() + answer(b'{"status":"ok","balance":1}')) \
            as (server, client):
        assert (await client.call("debit", b"{}")).balance == 500
        assert (await client.call("debit", b"{}")).balance == 500  # not the stray one
        assert server.connections == 2


async def test_the_answer_cap_holds_with_a_length_and_with_chunks() -> None:
    big = b"x" * (MAX_ANSWER + 1)
    async with serving(lambda n, r: answer(big)) as (_, client):
        reply = await client.call("debit", b"{}")
        assert (reply.status, reply.reason) == (None, "answer too large")
    chunks = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + (
        b"400\r\n" + b"y" * 1024 + b"\r\n") * 65 + b"0\r\n\r\n"
    async with serving(lambda n, r: chunks) as (_, client):
        reply = await client.call("debit", b"{}")
        assert (reply.status, reply.reason) == (None, "answer too large")


async def test_never_more_connections_than_allowed() -> None:
    release = asyncio.Event()
    held: list[asyncio.Future[None]] = []

    async with serving(lambda n, r: answer()) as (server, client):
        original = server.handle

        async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            fut = asyncio.get_running_loop().create_future()
            held.append(fut)
            await release.wait()
            await original(reader, writer)

        server.handle = slow  # type: ignore[method-assign]
        calls = [asyncio.create_task(client.call("debit", b"{}")) for _ in range(10)]
        while len(held) < 4:
            await asyncio.sleep(0)
        for _ in range(20):  # more would have connected by now
            await asyncio.sleep(0)
        assert len(held) == 4
        release.set()
        assert all(r.ok for r in await asyncio.gather(*calls))
        assert server.most_open <= 4


async def test_a_new_wallet_url_is_called_from_the_next_call_on() -> None:
    async with serving(lambda n, r: answer()) as (first, client), \
            serving(lambda n, r: answer(b'{"status":"ok","balance":7}')) as (second, other):
        assert (await client.call("debit", b"{}")).balance == 500
        client.point_at(other.base, b"t" * 32)
        assert (await client.call("debit", b"{}")).balance == 7
        assert (first.connections, len(first.requests), len(second.requests)) == (1, 1, 1)


@pytest.mark.parametrize("url", ["ftp://h/w", "http:///w", "http://h/w?x=1", "http://h/a b",
                                 "http://u:p@h/w", "http://h/w\r\nX: 1"])
def test_a_wallet_url_that_cannot_be_called_safely_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        WalletClient(url, b"s", timeout=1, connections=1)



@pytest.mark.sleeps  # waits for two calls' deadlines on the loop's clock
async def test_the_deadline_holds_while_waiting_for_a_place_and_for_the_answer() -> None:
    """One deadline for the whole call: a call that waits for a place in a full pool, and
    one whose answer never comes, each end at their own deadline as an unknown outcome
    ("timeout"); the silent connection is dropped, and the pool's place comes back."""
    async with serving(lambda n, r: answer()) as (server, client):
        held = asyncio.Event()
        original = server.handle

        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.set()
            await asyncio.Event().wait()  # never answers

        server.handle = hold  # type: ignore[method-assign]
        client.connections = 1
        loop = asyncio.get_running_loop()
        first = asyncio.create_task(client.call("debit", b"{}", timeout=1.5))
        await held.wait()
        started = loop.time()
        waiting = await client.call("debit", b"{}", timeout=0.2)  # no place comes free
        assert waiting.status is None and waiting.text == "timeout"
        assert loop.time() - started >= 0.15
        assert not first.done()  # ended at its own deadline, not after the first's
        unanswered = await first  # on the wire, never answered
        assert unanswered.status is None and unanswered.text == "timeout"
        server.handle = original  # type: ignore[method-assign]
        again = await client.call("debit", b"{}", timeout=2)  # a place, a new connection
        assert again.ok, again


async def test_a_burst_opens_few_new_connections_at_once_and_every_call_is_answered() -> None:
    """A burst that finds no idle connection opens at most ``opening`` at once. A server
    queues the connections it has not accepted in its listen backlog (aiohttp's: 128), and
    past it the kernel drops connects, each back only when TCP retries a second later: the
    reference operator's first close of betting had 245 of 10,000 bets wait over a second.
    The calls beyond wait for a connection another call is done with, or a place to open
    one: no connection is opened while none has answered, and every call is answered."""
    answering = asyncio.Event()
    accepted: list[asyncio.StreamWriter] = []
    async with serving(lambda n, r: answer()) as (server, client):
        client.connections, client.opening = 40, 3
        original = server.handle

        async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            await answering.wait()  # accepted, nothing answered until told
            await original(reader, writer)

        server.handle = held  # type: ignore[method-assign]
        calls = [asyncio.create_task(client.call("debit", b"{}")) for _ in range(30)]
        while len(accepted) < 3:
            await asyncio.sleep(0)
        for _ in range(50):  # the other 27 would have connected by now
            await asyncio.sleep(0)
        assert len(accepted) == 3
        answering.set()
        replies = await asyncio.gather(*calls)
        assert all(r.ok for r in replies), replies
        assert len(server.requests) == 30
        assert server.connections < 30  # connections done with were handed on


@pytest.mark.sleeps  # waits for one call's deadline on the loop's clock
async def test_a_call_that_waits_past_its_deadline_for_a_new_connection_takes_no_place() -> None:
    """Waiting for a connection is under the call's one deadline too, and a call that gave
    up holds no place: the calls after it open and reuse connections as before."""
    answering = asyncio.Event()
    async with serving(lambda n, r: answer()) as (server, client):
        client.connections, client.opening = 10, 1
        original = server.handle

        on_the_wire = asyncio.Event()

        async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            on_the_wire.set()
            await answering.wait()
            await original(reader, writer)

        server.handle = held  # type: ignore[method-assign]
        first = asyncio.create_task(client.call("debit", b"{}"))
        await on_the_wire.wait()
        waiting = await client.call("debit", b"{}", timeout=0.2)  # the one place is taken
        assert (waiting.status, waiting.text) == (None, "timeout")
        answering.set()
        assert (await first).ok
        more = await asyncio.gather(*(client.call("debit", b"{}") for _ in range(5)))
        assert all(r.ok for r in more), more
        assert len(server.requests) == 6  # the one that gave up was never sent


async def test_a_connection_or_place_given_as_its_call_gives_up_is_passed_on() -> None:
    """A connection or a place handed to a waiting call in the same turn of the loop as
    that call's cancel (its deadline, its player gone) is passed on, never lost: the
    connection kept for the next call, the place free for the next to open one."""
    client = WalletClient("http://127.0.0.1:9/w", b"s" * 32, timeout=5, connections=4,
                          opening=1)
    loop = asyncio.get_running_loop()
    client._opened = 1  # one new connection on the wire, not answered yet
    handed = _Connection(MAX_ANSWER)
    waiting = asyncio.create_task(client._connection_or_place(loop.time() + 5))
    await asyncio.sleep(0)  # it waits
    client._give_back(handed)  # a call is done with a connection: to the waiting call
    waiting.cancel()  # which gives up before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert list(client._idle) == [handed] and client._opened == 1

    waiting = asyncio.create_task(client._connection_or_place(loop.time() + 5))
    await asyncio.sleep(0)
    client._opened -= 1  # the new connection answered: its place comes free
    client._pass_places()  # and is taken for the waiting call
    assert client._opened == 1
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert client._opened == 0 and not client._waiting
