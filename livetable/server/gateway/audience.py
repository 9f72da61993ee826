"""A table's audience on this gateway, and the fan-out that writes a step to it.

A table's connections fall in two groups, kept as they change (:class:`Audience`):

* **lines** — the idle connections a frame may go straight to: the server offers it
  (``framed_ws.DIRECT``: on picows, accepted, no close frame sent, not disconnected and the
  transport holding nothing unsent) and the connection has nothing queued or in flight. Each
  is kept with its socket's ``send``.
* **others** — every other connection: its frames take :meth:`Client.send_all` (the queue,
  flow control, the slow client's close).

The fan-out (:func:`fan_out`) writes a step's frame to every line in one pass that runs no
Python bytecode a socket — ``map`` calling each socket's ``send`` with the same bytes — the
least a Python server can do a frame. Measured against picows' own server the Python loop of
the transport's ``write`` a socket was what was left of the difference: see
docs/benchmarks.md, "The fan-out sends in one pass".

Order is kept: a connection is a line only while its transport holds nothing (the picows
connection is paused the moment it would hold a byte, and told so), so a frame sent to the
socket is never ahead of one waiting in the transport; a send the kernel took only in part
(or refused: ``EAGAIN``, a reset) hands the rest to the transport, which then holds it, and
the connection leaves the lines until the transport has drained it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from operator import call

from livetable.metrics import Metrics
from livetable.server.framed_ws import Send
from livetable.server.gateway.client import Client


class Audience:
    """A table's connections on this gateway, as :func:`fan_out` reaches them (see the
    module docstring). A set of :class:`Client` to the rest of the gateway."""

    __slots__ = ("lines", "others")

    def __init__(self) -> None:
        #: The idle connections, each with its socket's ``send``.
        self.lines: dict[Client, Send] = {}
        self.others: set[Client] = set()

    def place(self, client: Client) -> None:
        """Put ``client`` where its :attr:`Client.direct` says (called on each change)."""
        line = client.direct
        if line is None:
            self.lines.pop(client, None)
            self.others.add(client)
        else:
            self.others.discard(client)
            self.lines[client] = line[1]

    def add(self, client: Client) -> None:
        client.audience = self
        self.place(client)

    def discard(self, client: Client) -> None:
        if client.audience is self:
            client.audience = None
        self.lines.pop(client, None)
        self.others.discard(client)

    def clear(self) -> None:
        for client in self:
            client.audience = None
        self.lines.clear()
        self.others.clear()

    def __len__(self) -> int:
        return len(self.lines) + len(self.others)

    def __bool__(self) -> bool:
        return bool(self.lines) or bool(self.others)

    def __iter__(self) -> Iterator[Client]:
        return chain(list(self.lines), list(self.others))

    def __contains__(self, client: object) -> bool:
        return client in self.lines or client in self.others


def send_each(sends: list[Send], wire: bytes) -> list[int]:
    """``send(wire)`` for each of ``sends``, in order, in one ``map`` (no bytecode a
    socket): what each socket took, 0 where a send raised (``EAGAIN``, a reset)."""
    taken: list[int] = []
    rest, again = iter(sends), repeat(wire)
    while True:
        try:
            taken.extend(map(call, rest, again))  # taken keeps what came before a raise
        except OSError:
            taken.append(0)
        else:
            return taken


def fan_out(audience: Audience, framed: list[tuple[str, bytes]], metrics: Metrics) -> None:
    """A step's events (text, websocket frame) to every connection of ``audience``: one
    write of all their framing to each (a round's settlement — the banker's hand, then
    round_settled — to 5,000 connections was 10,000 system calls, not 5,000, before it was
    one). The lines are sent to in one pass (:func:`send_each`); a socket that took less
    than all is handed the rest by its connection (:meth:`Client.write_rest`). The others'
    frames go through :meth:`Client.send_all`, which counts them where they are sent."""
    wire = framed[0][1] if len(framed) == 1 else b"".join(w for _, w in framed)
    # both groups as they are now: a line the kernel refuses leaves the lines for the others
    # on the way (Client.write_rest), and must not be sent the frame again as one of them
    others = list(audience.others)
    lines = audience.lines
    if lines:
        taken = send_each(list(lines.values()), wire)
        size = len(wire)
        if taken.count(size) != len(taken):  # rare: the clients listed only then (the
            # sends ran no Python, so the lines are still in the order they were sent in)
            for client, sent in zip(list(lines), taken, strict=True):
                if sent != size:
                    client.write_rest(wire, sent)
        metrics.frames_out += len(taken) * len(framed)
    if others:
        texts = [text for text, _ in framed]
        for client in others:
            client.send_all(texts, wire)
