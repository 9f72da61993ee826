"""HMAC signatures of operator traffic (DESIGN §5), both ways.

An operator signs its calls to livetable (``POST /api/operator/sessions`` and the
reconciliation endpoint) with ``LIVETABLE_OPERATOR_SECRET``; livetable signs every wallet
call to the operator with ``LIVETABLE_WALLET_SECRET``. Either way the header is
``X-Livetable-Signature: sha256=<hex of HMAC-SHA256(secret, raw body)>``: the signature
covers the exact bytes sent, so the receiver checks it *before* parsing anything.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Livetable-Signature"
_PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The header value for ``body``."""
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` (constant-time compare)."""
    if not header or not header.startswith(_PREFIX):
        return False
    given = header[len(_PREFIX):].strip().lower()
    if not given.isascii():  # compare_digest raises on non-ASCII text: a 500 before
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(given, expected)
