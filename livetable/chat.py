"""The table chat's rules: what a message may say, and who may say it. Pure: no clock, and no
I/O but reading the confusables data once.

Why here, apart from where messages are kept (livetable/server/chatroom.py) and sent
(livetable/server/gateway/chat.py): the rules are the part a reader checks and a test
pins, and they are the same whether the last 50 live in memory or in Redis.

- A message is plain text, 1–:data:`MAX_CHARS` characters after trimming. Control
  characters (a newline, a tab, a bidi override) become spaces and runs of spaces one, and
  the other code points Unicode calls default-ignorable (zero-width characters, variation
  selectors, the Hangul fillers) are removed, so a message is one line that cannot
  reorder the text around it. A line with nothing visible (only fillers such as U+3164 or
  U+2800, or combining marks) is empty, and a character keeps at most
  :data:`MAX_MARKS` combining marks (199 on one letter overflowed the chat). Markup is not
  refused: it is text, and the page inserts it as text (``textContent``), never as HTML.
  A name a launch gives a player is cleaned the same way (:func:`clean`).
- A player may send one message per :data:`RATE_WINDOW_MS` (the store holds the window,
  so that it holds across gateways). A muted player may send none.
- An operator's blocked words are refused for that operator's players: a word matches
  where it stands as a whole word, ignoring case, compatibility forms (``ＳＰＡＭ`` is
  ``spam``), combining marks (``spa\u0301m``), default-ignorable code points
  (``sp\u034fam``) and look-alikes from other scripts (``ѕрам`` in Cyrillic): both the
  words and the text are compared by :func:`folded`, which maps each character to one of
  its look-alikes from Unicode's confusables data (``confusables.txt``, as the
  ``confusable-homoglyphs`` package ships it). A word in a script written without spaces
  (Thai) matches anywhere in the text, since it has no word boundaries to stand between.
- Dealers chat as ``dealer``; the server speaks as ``system``. Neither is rate limited,
  muted or held to an operator's words: the words are the operator's, for its players.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

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

#: The most combining marks a character keeps (Thai and Vietnamese use two, some Indic
#: clusters three); the rest are dropped.
MAX_MARKS = 3

_SPACES = re.compile(r"\s+")
_THAI = re.compile(r"[\u0e00-\u0e7f]")
#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15.1): shown
#: as nothing, so removed — zero-width characters, bidi controls, variation selectors,
#: fillers, tags.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
#: The bidi controls among them: a space instead (a line that shows where one was).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Blank characters that are not whitespace nor ignorable: a line of them shows nothing.
_BLANK = frozenset("\u2800\u3164\uffa0\u115f\u1160")
_MARKS = ("Mn", "Me")


def clean(text: str) -> str:
    """``text`` as it is shown: default-ignorable code points removed, control and format
    characters (bidi controls too) as spaces, at most :data:`MAX_MARKS` combining marks a
    character, each run of whitespace one space, trimmed."""
    shown: list[str] = []
    marks = 0
    for c in _IGNORABLE.sub(lambda m: " " if m.group() in _BIDI else "", text):
        category = unicodedata.category(c)
        if category in _MARKS:
            marks += 1
            if marks > MAX_MARKS:
                continue
        else:
            marks = 0
        shown.append(" " if category in ("Cc", "Cf", "Zl", "Zp") else c)
    return _SPACES.sub(" ", "".join(shown)).strip()


def visible(text: str) -> bool:
    """Whether ``text`` shows anything: not only spaces, blanks and combining marks."""
    return any(not c.isspace() and c not in _BLANK and unicodedata.category(c) not in _MARKS
               for c in text)


@functools.cache
def _look_alikes() -> dict[str, str]:
    """Each character of Unicode's confusables data -> one of its look-alikes, the same
    for all of them: an ASCII capital if there is one, else an ASCII letter or digit, else
    the lowest code point (the data's pairs joined into groups; the package ships them as
    pairs both ways, without their direction)."""
    data = json.loads(resources.files("confusable_homoglyphs").joinpath(
        "confusables.json").read_text(encoding="utf-8"))
    near: dict[str, set[str]] = {}
    for char, alikes in data.items():
        for alike in alikes:
            if len(char) == 1 and len(alike["c"]) == 1:
                near.setdefault(char, set()).add(alike["c"])
                near.setdefault(alike["c"], set()).add(char)
    chosen: dict[str, str] = {}
    for start in near:
        if start in chosen:
            continue
        group, todo = {start}, [start]
        while todo:
            for alike in near[todo.pop()] - group:
                group.add(alike)
                todo.append(alike)
        one = min(group, key=lambda c: (not (c.isascii() and c.isupper()),
                                        not (c.isascii() and c.isalnum()), c))
        chosen.update(dict.fromkeys(group, one))
    return chosen


@functools.lru_cache(maxsize=8192)
def _letter(c: str) -> str:
    """``c`` as compared: its look-alike, of its capital first (Cyrillic ``м`` is like
    ``M``, not ``m``), then capitalised again, until that settles."""
    alikes = _look_alikes()
    for _ in range(4):
        upper = c.upper()
        if len(upper) != 1:
            return upper
        same = alikes.get(upper) or alikes.get(c) or upper
        if same == c:
            break
        c = same
    return c


def folded(text: str) -> str:
    """``text`` as blocked words are compared with it (and presenters' names): its
    compatibility forms, case, combining marks, default-ignorable code points and
    look-alikes all folded to one form."""
    text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text)).casefold()
    return "".join(_letter(c) for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) not in _MARKS)


#: A run of word characters: the words a text is made of, where words are set apart.
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class BlockedWords:
    """An operator's blocked words, compiled once (an empty list blocks nothing).

    A word matches whole where words are set apart, anywhere in a script without spaces
    (Thai). A word of word characters only is looked up in a set, one lookup for each word
    of the text: an alternation of 2,000 such words in one regex took 6 ms a 200-character
    line, on the event loop (docs/benchmarks.md, the current figures). What else there is
    — a phrase, a word with a sign in it, a Thai word — stays in one regex, usually of a
    few."""

    words: frozenset[str]
    pattern: re.Pattern[str] | None

    @classmethod
    def of(cls, words: Iterable[str]) -> BlockedWords:
        plain: set[str] = set()
        parts = []
        for word in sorted({folded(w).strip() for w in words} - {""}):
            escaped = re.escape(word)
            if _THAI.search(word):  # anywhere: the script sets no words apart
                parts.append(escaped)
            elif _WORD.fullmatch(word):  # whole: exactly one of the text's words
                plain.add(word)
            else:  # whole, where words are set apart
                parts.append(rf"(?<!\w){escaped}(?!\w)")
        return cls(frozenset(plain), re.compile("|".join(parts)) if parts else None)

    def found_in(self, text: str) -> bool:
        if not self.words and self.pattern is None:
            return False
        text = folded(text)
        if self.words and not self.words.isdisjoint(_WORD.findall(text)):
            return True
        return self.pattern is not None and self.pattern.search(text) is not None


NO_WORDS = BlockedWords(frozenset(), None)


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
    if not visible(shown):
        return shown, "empty"
    if len(shown) > MAX_CHARS:
        return shown, "too_long"
    if role == "player" and blocked.found_in(shown):
        return shown, "blocked_word"
    return shown, None
