"""What ``livetable dealer`` prints in the terminal: words, not Python's values."""

from __future__ import annotations

import pytest

from livetable.cli.terminal import describe


@pytest.mark.parametrize(("out", "said"), [(False, "cut card not out yet"),
                                           (True, "cut card out")])
def test_the_welcome_says_whether_the_cut_card_is_out_in_words(out: bool, said: str) -> None:
    line = describe({"type": "welcome", "table": {"id": "t1", "mode": "manual",
                                                  "phase": "idle", "cards_left": 312,
                                                  "cut_card_out": out}})
    assert line is not None
    assert line.endswith(said), line
    assert "False" not in line and "True" not in line
