"""Check that the JSON examples of docs/protocol.md were captured, not invented.

    .venv/bin/python docs/tools/check_examples.py [docs/protocol.md] [docs/tools/frames.json]

Every ```json block of the page, and every line of a ```json or ```jsonc block that is a
JSON object on its own, must equal something in the capture written by capture_frames.py:
a frame sent or received, an HTTP response body, a close or handshake record, or any object
nested in one of those (a snapshot inside a welcome, a bet inside a Bet Record, …).
A shortened block (```jsonc, with ``// …`` comments) is checked as a whole too, leniently:
its objects may lack keys and its arrays items of the captured ones. A string ending in "…"
(a shortened token) matches any captured string it begins.
Exit code 1 lists the examples that were not found.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(json|jsonc)\n(.*?)^```", re.S | re.M)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def all_values(capture: dict[str, Any]) -> list[Any]:
    """Every object and array anywhere in the capture."""
    seen: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict | list):
            seen.append(value)
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)

    for scenario in capture.values():
        for entry in scenario["transcript"]:
            walk(entry)
    return seen


def matches(example: Any, captured: Any, elided: bool = False) -> bool:
    """Equal, except that a string ending in "…" (a shortened token) matches its prefix.

    ``elided``: the example comes from a shortened block, so an object may lack some of the
    captured keys and an array some of the captured items (those that follow stay in order).
    """
    if isinstance(example, str) and example.endswith("…"):
        return isinstance(captured, str) and captured.startswith(example[:-1])
    if isinstance(example, dict):
        if not isinstance(captured, dict):
            return False
        keys_ok = (example.keys() <= captured.keys() if elided
                   else example.keys() == captured.keys())
        return keys_ok and all(matches(v, captured[k], elided) for k, v in example.items())
    if isinstance(example, list):
        if not isinstance(captured, list):
            return False
        if not elided:
            return len(example) == len(captured) and all(
                matches(a, b) for a, b in zip(example, captured, strict=True))
        rest = iter(captured)
        return all(any(matches(a, b, True) for b in rest) for a in example)
    return bool(example == captured and type(example) is type(captured))


def shortened_block(body: str) -> list[Any]:
    """The values of a ```jsonc block, comments and the commas they leave removed."""
    text = re.sub(r"/\*.*?\*/", "", body)
    text = re.sub(r"(^|\s)//.*$", "", text, flags=re.M)
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    decoder = json.JSONDecoder()
    values, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return values
        value, at = decoder.raw_decode(text, at)
        values.append(value)


def examples(page: str) -> list[tuple[int, Any, bool]]:
    """(line number, parsed example, elided?) for every whole block and one-object line."""
    found: list[tuple[int, Any, bool]] = []
    for match in BLOCK.finditer(page):
        kind, body = match.group(1), match.group(2)
        first_line = page.count("\n", 0, match.start(2)) + 1
        if kind == "jsonc":
            found += [(first_line, value, True) for value in shortened_block(body)]
        if kind == "json":
            try:
                found.append((first_line, json.loads(body), False))
                continue
            except json.JSONDecodeError:
                pass  # several objects, one a line: checked below
        for offset, line in enumerate(body.splitlines()):
            text = line.strip().rstrip(",")
            if text.startswith("{") and text.endswith("}"):
                try:
                    found.append((first_line + offset, json.loads(text), False))
                except json.JSONDecodeError:
                    continue  # an elided line (``// …``, ``/* … */``)
    return found


def main() -> int:
    page_path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "protocol.md"
    capture_path = (Path(sys.argv[2]) if len(sys.argv) > 2
                    else ROOT / "docs" / "tools" / "frames.json")
    values = all_values(json.loads(capture_path.read_text()))
    known = {canonical(v) for v in values}
    checked = missing = 0
    for line, value, elided in examples(page_path.read_text()):
        checked += 1
        if canonical(value) not in known and not any(matches(value, v, elided)
                                                     for v in values):
            missing += 1
            print(f"{page_path.name}:{line}: not in the capture: {canonical(value)[:160]}")
    print(f"{checked} examples checked, {missing} not found in {capture_path.name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
