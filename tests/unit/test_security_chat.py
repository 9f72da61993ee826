"""The table chat and players' names, attacked with Unicode: blocked words passed with
default-ignorable code points, look-alikes from other scripts or combining marks; lines
of fillers or marks that show nothing; a mark stack that overflows the chat; launch names
carrying bidi overrides, newlines and zero-width characters."""

from __future__ import annotations

import pytest

from livetable.chat import MAX_MARKS, BlockedWords, clean, judge

WORDS = BlockedWords.of(["spam", "scam site"])


@pytest.mark.parametrize("text", [
    "sp\u034fam",  # combining grapheme joiner (default-ignorable)
    "s\ufe0fpam", "spa\ufe00m",  # variation selectors
    "sp\u180bam",  # Mongolian free variation selector
    "sp\u200bam", "sp\u2060am", "s\u00adpam",  # zero width space, word joiner, soft hyphen
    "ѕрам", "ЅРАМ", "ѕpaм",  # Cyrillic look-alikes (dze, er, a, em)
    "spa\u0301m", "s\u0327p\u0308am",  # combining marks
    "ꜱpam", "𝐬𝐩𝐚𝐦",  # a small capital; mathematical bold
    "buy ѕрам now", "a sсam sitе!",  # in a sentence (Cyrillic с, е)
])
def test_a_blocked_word_is_found_through_ignorables_look_alikes_and_marks(text: str) -> None:
    assert judge(text, role="player", blocked=WORDS)[1] == "blocked_word", text


@pytest.mark.parametrize("text", ["spammer", "hello", "a scam", "ไพ่สวย", "Việt"])
def test_other_words_still_pass(text: str) -> None:
    assert judge(text, role="player", blocked=WORDS)[1] is None


@pytest.mark.parametrize("text", [
    "\u3164", "\u3164\u3164 \u3164", "\u2800" * 20, "\uffa0\uffa0", "\u0301" * 5,
    " \u200d\u200b ", "\u2800\u0301 \u3164",
])
def test_a_line_that_shows_nothing_is_empty(text: str) -> None:
    assert judge(text, role="player")[1] == "empty", repr(text)


def test_a_character_keeps_at_most_a_few_combining_marks() -> None:
    shown, why = judge("a" + "\u0301" * 199 + "b" + "\u0300" * 3, role="player")
    assert why is None
    assert shown == "a" + "\u0301" * MAX_MARKS + "b" + "\u0300" * 3
    assert clean("ฟื้นฟู") == "ฟื้นฟู"  # Thai: a vowel and a tone mark on one letter


def test_a_name_is_cleaned_of_overrides_newlines_and_zero_width_characters() -> None:
    assert clean("Mallory\u202e\u2066gnp.exe") == "Mallory gnp.exe"
    assert clean("Eve\nSYSTEM: you won") == "Eve SYSTEM: you won"
    assert clean("B\u200bo\u200db") == "Bob"
