"""An operator's blocked words against a chat line, the time it takes on the event loop:

    .venv/bin/python bench/blocked_words.py [--words 2000] [--chars 200]

``livetable.chat.BlockedWords`` (words of word characters looked up in a set, the rest in
one regex) beside the one regex of every word it replaced, on the same random words and
lines. Prints JSON: milliseconds a line for each.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livetable.chat import BlockedWords, folded


def one_regex(words: list[str]) -> re.Pattern[str]:
    """Every word in one alternation, as the blocked words were matched before."""
    return re.compile("|".join(rf"(?<!\w){re.escape(w)}(?!\w)"
                               for w in sorted({folded(w) for w in words})))


def per_line_ms(check: object, lines: list[str], rounds: int = 5) -> float:
    assert callable(check)
    started = time.perf_counter()
    for _ in range(rounds):
        for line in lines:
            check(line)
    return (time.perf_counter() - started) / (rounds * len(lines)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--chars", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(1)

    def word() -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))

    words = [word() for _ in range(args.words)]
    lines = [" ".join(word() for _ in range(args.chars))[:args.chars] for _ in range(100)]
    blocked, before = BlockedWords.of(words), one_regex(words)
    print(json.dumps({
        "words": args.words, "chars": args.chars,
        "set_and_regex_ms": round(per_line_ms(blocked.found_in, lines), 4),
        "one_regex_ms": round(per_line_ms(lambda line: before.search(folded(line)), lines), 4),
    }))


if __name__ == "__main__":
    main()
