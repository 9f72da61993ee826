"""The error and rejection codes are one Literal each, and docs/protocol.md §14 lists
exactly those: a code added to the server without its documentation, or
documented and never sent, fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from livetable import protocol as p
from livetable.betting.slips import REJECTIONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def code_reference() -> str:
    text = DOC.read_text()
    start = text.index("## 14. Code reference")
    return text[start:text.index("\n## 15.", start)]


def table_codes(section: str, heading: str) -> set[str]:
    """The codes in the first column of the table under ``heading``."""
    block = section[section.index(heading):]
    rows = re.findall(r"^\| `([a-z_]+)` \|", block.split("\n\n", 2)[1], re.MULTILINE)
    return set(rows)


def test_error_codes_are_the_documented_ones() -> None:
    section = code_reference()
    documented = (table_codes(section, "**`error.code` on `/ws` and `/ws/dealer`**")
                  | table_codes(section, "**Dealer command errors**"))
    assert documented == set(get_args(p.ErrorCode))


def test_rejection_codes_are_the_documented_ones() -> None:
    section = code_reference()
    bets = section[section.index("**`bet_rejected.code`**"):section.index("**`slip_rejected")]
    slips = section[section.index("**`slip_rejected.code`**"):section.index("**HTTP")]
    documented = set(re.findall(r"`([a-z_]+)`", bets + slips)) - {
        "bet_rejected", "slip_rejected", "code"}
    assert documented == set(get_args(p.RejectionCode))
    assert set(REJECTIONS) == set(get_args(p.RejectionCode))  # each with its message


def test_the_structs_take_only_those_codes() -> None:
    import msgspec
    import pytest

    frame = b'{"type": "error", "code": "no_such_code", "message": "x"}'
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(frame, type=p.Error)
    assert msgspec.json.decode(frame.replace(b"no_such_code", b"unavailable"),
                               type=p.Error).code == "unavailable"
