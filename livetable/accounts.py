"""The ledger's account namespace: which ids are players' and which are the ledger's own.

Why this exists: the ledger keeps players and its own accounts (``house``, ``external``,
one ``hold:<round id>`` escrow per round) in one id space. Round ids are predictable, so a
player whose id was ``hold:t1.3.12`` would own that round's escrow before the round opened
and receive every other player's stake. Player ids therefore live in a namespace that no
internal account can share: a player id never contains ``:`` (every internal account but
the two fixed ones does) and is never one of the fixed ones. The rule is checked at every
entry — token minting and verification, the guest and operator APIs, the CLI's deposit —
and again by both stores, so a path that forgets it still cannot open such an account.
"""

from __future__ import annotations

import re

#: The ledger's fixed accounts; every other internal account id contains ``:``.
HOUSE = "house"
EXTERNAL = "external"
INTERNAL_ACCOUNTS = frozenset({HOUSE, EXTERNAL})
HOLD_PREFIX = "hold:"
#: The house's tip account: every tip to a dealer is credited here (livetable/betting/tips.py).
#: Its ``:`` keeps it out of the players' namespace, as every internal account's does.
HOUSE_TIPS = "tips:house"
#: Demo guests' ids (``POST /api/guest`` makes them): no operator's player, no deposit.
GUEST_PREFIX = "g_"

MAX_PLAYER_ID = 64
#: Letters, digits and ``_ - . @ +`` (operators' ids are often e-mail-like); no ``:``, no
#: spaces, no control characters.
_PLAYER_ID = re.compile(r"[A-Za-z0-9_.@+\-]{1,64}")
#: A player of a registered operator, in the ledger: ``<operator id>~<its player id>``
#: (livetable/operator/registry.py). ``~`` is in no operator's player id, so the
#: operator's part cannot be forged from inside a player id.
_NAMESPACED = re.compile(r"[a-z0-9-]{1,32}~[A-Za-z0-9_.@+\-]{1,64}")


class AccountError(ValueError):
    """An account id that is not allowed where it was used (the message says why)."""


def is_player_id(candidate: str) -> bool:
    """A player's ledger id: an operator's player id as it sent it (``p-1``), or
    namespaced by a registered operator (``acme~p-1``)."""
    if _NAMESPACED.fullmatch(candidate) is not None:
        return True
    return (_PLAYER_ID.fullmatch(candidate) is not None
            and candidate.lower() not in INTERNAL_ACCOUNTS)


def is_operator_player_id(candidate: str) -> bool:
    """An id an operator may send for its player: never namespaced (no ``~``)."""
    return (_PLAYER_ID.fullmatch(candidate) is not None
            and candidate.lower() not in INTERNAL_ACCOUNTS)


def check_player_id(candidate: str) -> str:
    """``candidate`` if it may name a player, else :class:`AccountError`."""
    if not is_player_id(candidate):
        raise AccountError(
            f"{candidate[:80]!r} is not a valid player id: 1 to {MAX_PLAYER_ID} letters, "
            f"digits or _ - . @ +, and not {' or '.join(sorted(INTERNAL_ACCOUNTS))}")
    return candidate


def check_not_guest(player_id: str) -> str:
    """``player_id`` if it is no demo guest's (``g_…``), else :class:`AccountError`: an
    operator's launch or a deposit must not reach (or squat) a guest's account."""
    if player_id.startswith(GUEST_PREFIX):
        raise AccountError(f"player ids starting {GUEST_PREFIX} are demo guests'")
    return player_id


def hold_account(round_id: str) -> str:
    """The escrow account of a round: every stake of the round sits here until it ends."""
    return HOLD_PREFIX + round_id
