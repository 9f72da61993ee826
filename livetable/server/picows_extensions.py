"""What the websocket on picows offers the app besides ASGI (:mod:`livetable.server.picows_ws`
is the rest): the scope extensions of :mod:`livetable.server.framed_ws`, with the same
meaning — ``write_frame``, ``abort_after``, the frame sink and the frame budget — and the
direct line's watch (``DIRECT``), offered on picows only: the connection's line (its
transport and its socket's ``send``) is told to the app while a frame may be sent straight
to the socket (accepted, no close frame sent, not disconnected, the transport holding
nothing: it is paused the moment it would hold a byte), None whenever not, at once and on
every change of those flags (:func:`told_of_change`). The gateway's fan-out then sends to it
with no check of its own a socket (``livetable.server.gateway.audience.fan_out``).

The socket object is made over the transport's own descriptor (no ``dup``) and let go of
(``detach``, never closed) when the connection is lost: uvloop closes the descriptor only
after it has told the connection so, so a ``send`` told of here never reaches another
connection's socket, and after the loss it raises."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from livetable.server.framed_ws import (
    DirectWatch,
    FrameBudget,
    FrameSink,
    Line,
    charge_frames,
    spend_frame,
)


def told_of_change(name: str) -> Any:
    """A flag kept in the slot ``name`` whose every change is told to the direct writer's
    watch (:meth:`ScopeExtensions.tell_direct`)."""
    def get(self: ScopeExtensions) -> bool:
        return cast(bool, getattr(self, name))

    def set_(self: ScopeExtensions, value: bool) -> None:
        setattr(self, name, value)
        self.tell_direct()
    return property(get, set_)


class ScopeExtensions:
    """The extensions, as methods of the connection's protocol (a mixin: the state is the
    protocol's, in its slots)."""

    __slots__ = ()
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    direct_watch: DirectWatch | None
    line: Line | None
    _accepted: bool
    _close_sent: bool
    _writable: bool
    disconnected: bool
    sink: FrameSink | None

    accepted = told_of_change("_accepted")
    close_sent = told_of_change("_close_sent")
    writable = told_of_change("_writable")  # False while flow control pauses the transport

    def may_write(self) -> bool:
        """Whether a frame may go straight to the transport now."""
        return (self._accepted and self._writable and not self._close_sent
                and not self.disconnected)

    def tell_direct(self) -> None:
        if self.direct_watch is not None:
            self.direct_watch(self.line if self.may_write() else None)

    def watch_direct(self, told: DirectWatch | None) -> None:
        """``scope["extensions"][DIRECT]``: ``told`` is told now and on each change."""
        self.direct_watch = told  # type: ignore[misc]  # a slot of the protocol's
        self.tell_direct()

    def write_frame(self, frame: bytes) -> bool:
        if not self.may_write() or self.transport.is_closing():
            return False
        self.transport.write(frame)
        return True

    def abort_after(self, seconds: float) -> None:
        def abort() -> None:
            if not self.disconnected:
                self.transport.abort()

        self.loop.call_later(seconds, abort)

    def offer_frames_to(self, take: FrameSink | None) -> None:
        self.sink = take  # type: ignore[misc]  # a slot of the protocol's

    def charge_frames_to(self, spend: FrameBudget | None) -> None:
        charge_frames(self, spend)  # type: ignore[arg-type]  # the protocol: its slots

    def spend(self) -> None:
        spend_frame(self)  # type: ignore[arg-type]
