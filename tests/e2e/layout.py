"""Layout checks shared by the phone tests: what is on screen, and what covers what.

A control "is there" when the browser's own hit test finds it at several points inside its
box: that is inside the viewport (``elementFromPoint`` is null outside it) and under no other
element (a toast, the video, the "You win" pill, an overlay).
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

SPOTS = [f"P{n}" for n in range(1, 6)] + [f"P{n}_PAIR" for n in range(1, 6)]

_UNCOVERED = """(ids) => {
  const out = { missing: [], covered: [], outside: [] };
  for (const id of ids) {
    const el = document.querySelector(`[data-testid="${id}"]`);
    if (!el) { out.missing.push(id); continue; }
    const r = el.getBoundingClientRect();
    if (r.left < 0 || r.top < 0 || r.right > innerWidth + 0.5 || r.bottom > innerHeight + 0.5
        || !r.width || !r.height) {
      out.outside.push([id, [r.left, r.top, r.right, r.bottom].map(Math.round)]);
      continue;
    }
    for (const [fx, fy] of [[.5, .5], [.2, .25], [.8, .25], [.2, .75], [.8, .75]]) {
      const hit = document.elementFromPoint(r.left + r.width * fx, r.top + r.height * fy);
      if (!hit || !(hit === el || el.contains(hit))) {
        const what = hit ? (hit.dataset.testid || hit.className || hit.tagName) : null;
        out.covered.push([id, fx, fy, what]);
      }
    }
  }
  return out;
}"""

#: ``(before, over, unders)``: ``before``'s statements run first, in the same task, so that no
#: re-render of the page comes between them and the measure.
_OVERLAPS = """([before, over, unders]) => {
  new Function(before)();
  const a = document.querySelector(`[data-testid="${over}"]`).getBoundingClientRect();
  const hits = [];
  for (const sel of unders) {
    for (const el of document.querySelectorAll(sel)) {
      const b = el.getBoundingClientRect();
      if (!b.width || !b.height) continue;
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
        hits.push(el.dataset.testid || el.dataset.card || el.className);
      }
    }
  }
  return hits;
}"""


def uncovered(page: Page, testids: list[str]) -> dict[str, Any]:
    """Which of ``testids`` are missing, outside the viewport or covered (empty: all fine)."""
    result: dict[str, Any] = page.evaluate(_UNCOVERED, testids)
    return {k: v for k, v in result.items() if v}


def overlaps(page: Page, over: str, selectors: list[str], before: str = "") -> list[str]:
    """The elements matching ``selectors`` whose boxes the ``over`` element's box meets;
    after ``before`` (JavaScript statements), run in the same go."""
    result: list[str] = page.evaluate(_OVERLAPS, [before, over, selectors])
    return result


def show_win(page: Page, text: str) -> None:
    """The "You win" pill as the page shows it after a winning round (its own markup)."""
    page.evaluate("""(text) => {
        const el = document.querySelector('[data-testid=win]');
        el.dataset.kind = 'win';
        el.replaceChildren(Object.assign(document.createElement('strong'),
                                         { className: 'win__amount', textContent: text }));
        el.hidden = false;
    }""", text)
