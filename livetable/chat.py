"""The table chat's rules: what a message may say, and who may say it. Pure: no I/O, no clock.

Why here, apart from where messages are kept (livetable/server/chatroom.py) and sent
(livetable/server/gateway/chat.py): the rules are the part a reader checks and a test
pins, and they are the same whether the last 50 live in memory or in Redis.

- A message is plain text, 1–:data:`MAX_CHARS` characters after trimming. Control
  characters (a newline, a tab, a bidi override) become spaces and runs of spaces one, so
  a message is one line that cannot reorder the text around it. Markup is not refused: it
  is text, and the page inserts it as text (``textContent``), never as HTML.
- A player may send one message per :data:`RATE_WINDOW_MS` (the store holds the window,
  so that it holds across gateways). A muted player may send none.
- An operator's blocked words are refused for that operator's players: a word matches
  where it stands as a whole word, ignoring case and compatibility forms (``ＳＰＡＭ`` is
  ``spam``); a word in a script written without spaces (Thai) matches anywhere in the
  text, since it has no word boundaries to stand between.
- Dealers chat as ``dealer``; the server speaks as ``system``. Neither is rate limited,
  muted or held to an operator's words: the words are the operator's, for its players.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from livetable.protocol import ChatRejectionCode

#: The longest message, in characters (code points) after trimming.
MAX_CHARS = 200
#: A player's messages are at least this far apart (one per 2 s).
RATE_WINDOW_MS = 2_000
#: How many messages a table keeps for the welcome.
RECENT = 50

#: What each rejection says to the player (``chat_rejected.message``).
CHAT_REJECTIONS: dict[ChatRejectionCode, str] = {
    "empty": "a message needs some text",
    "too_long": f"a message is at most {MAX_CHARS} characters",
    "not_a_player": "sign in as a player to chat; viewers read only",
    "muted": "the dealer muted you for a while",
    "blocked_word": "the message has a word this casino does not allow",
    "rate_limited": "one message every 2 seconds",
}

_SPACES = re.compile(r"\s+")
_THAI = re.compile(r"[\u0e00-\u0e7f]")


def clean(text: str) -> str:
    """``text`` as it is shown: control and format characters as spaces, each run of
    whitespace one space, trimmed."""
    shown = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                     for c in text)
    return _SPACES.sub(" ", shown).strip()


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


@dataclass(frozen=True, slots=True)
class BlockedWords:
    """An operator's blocked words, compiled once (an empty list blocks nothing)."""

    pattern: re.Pattern[str] | None

    @classmethod
    def of(cls, words: Iterable[str]) -> BlockedWords:
        parts = []
        for word in sorted({_fold(w).strip() for w in words} - {""}):
            escaped = re.escape(word)
            # a whole word, where words are set apart; anywhere in a script without spaces
            parts.append(escaped if _THAI.search(word) else rf"(?<!\w){escaped}(?!\w)")
        return cls(re.compile("|".join(parts)) if parts else None)

    def found_in(self, text: str) -> bool:
        return self.pattern is not None and self.pattern.search(_fold(text)) is not None


NO_WORDS = BlockedWords(None)


@functools.lru_cache(maxsize=256)
def blocked_words(words: tuple[str, ...]) -> BlockedWords:
    """An operator's list compiled, once per list (a registry reload brings new tuples)."""
    return BlockedWords.of(words)


def judge(text: str, *, role: str, blocked: BlockedWords = NO_WORDS
          ) -> tuple[str, ChatRejectionCode | None]:
    """The message as shown, and why it is refused (None: it may go, if the sender is not
    muted and within the rate — what the store knows). Only players are held to the
    blocked words."""
    shown = clean(text)
    if not shown:
        return shown, "empty"
    if len(shown) > MAX_CHARS:
        return shown, "too_long"
    if role == "player" and blocked.found_in(shown):
        return shown, "blocked_word"
    return shown, None
