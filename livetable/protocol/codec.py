"""The one encoder and the decoders: one reused decoder per endpoint.

The schema is the validator: a decoder over an endpoint's tagged union turns a bad frame
into msgspec's precise message ("Expected `int`, got `float` - at `$.amount`"), which the
gateway answers as ``error {code, message}``. One encoder for every frame, so a frame is
encoded the same way wherever it is sent.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec
from msgspec import Struct

from livetable.protocol.commands import DealerCommand, PlayerCommand, TableCommand

ENCODER = msgspec.json.Encoder()

T = TypeVar("T")


class FrameDecoder(Generic[T]):
    """msgspec's decoder for what clients send, with the one failure msgspec leaves to
    Python turned into a bad frame like any other: JSON nested deeper than the interpreter's
    stack (2,000 brackets fit in one 4 KiB frame) raises ``RecursionError``."""

    def __init__(self, kind: Any) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)

    def decode(self, data: str | bytes) -> T:
        try:
            return self._decoder.decode(data)
        except RecursionError:
            raise msgspec.DecodeError("JSON nested too deeply") from None


PLAYER_DECODER: FrameDecoder[PlayerCommand] = FrameDecoder(PlayerCommand)
DEALER_DECODER: FrameDecoder[DealerCommand] = FrameDecoder(DealerCommand)
#: What an engine takes from its command queue (scale-out): written by gateways only.
TABLE_COMMAND_DECODER = msgspec.json.Decoder(TableCommand)


def encode(message: Struct) -> bytes:
    return ENCODER.encode(message)
