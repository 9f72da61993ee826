"""HMAC signatures of operator traffic, both ways.

An operator signs its calls to livetable (``POST /api/operator/sessions``, the session end
and the reconciliation endpoint) with one of its operator secrets; livetable signs every
wallet call to the operator with its wallet secret.

Version 2 (the one livetable sends and the only one its operator endpoints accept):
headers ``X-Livetable-Operator: <operator id>`` (operator → livetable),
``X-Livetable-Timestamp: <unix ms>`` and ``X-Livetable-Signature: sha256=<hex of
HMAC-SHA256(secret, timestamp + "." + raw body)>``. The signature covers the exact bytes
sent and the time they were signed, so the receiver checks it *before* parsing anything
and refuses a timestamp more than :data:`MAX_SKEW_MS` from its clock: a captured request
replays for five minutes at most (and a launch not even then: its ``request_id`` is used
once). Version 1 signed the body alone, so a captured launch was a login for ever; its
header spelling is kept, its meaning is not.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence

HEADER = "X-Livetable-Signature"
TIMESTAMP_HEADER = "X-Livetable-Timestamp"
OPERATOR_HEADER = "X-Livetable-Operator"
_PREFIX = "sha256="
#: How far a signed timestamp may be from the receiver's clock, either way (ms).
MAX_SKEW_MS = 300_000


def sign(secret: bytes, timestamp_ms: int, body: bytes) -> str:
    """The signature header's value for ``body`` signed at ``timestamp_ms``."""
    message = str(timestamp_ms).encode() + b"." + body
    # the one-shot C path (OpenSSL's HMAC in one call): every seamless bet signs one call
    return _PREFIX + hmac.digest(secret, message, "sha256").hex()


def headers(secret: bytes, body: bytes, now_ms: int,
            operator_id: str | None = None) -> dict[str, str]:
    """The headers that sign ``body`` now (with the operator's id, operator → livetable)."""
    signed = {TIMESTAMP_HEADER: str(now_ms), HEADER: sign(secret, now_ms, body)}
    if operator_id is not None:
        signed[OPERATOR_HEADER] = operator_id
    return signed


def check(secrets: Sequence[bytes], body: bytes, received: Mapping[str, str],
          now_ms: int) -> str | None:
    """Why ``received`` (the request's headers) does not sign ``body``, or None if one of
    ``secrets`` signed it within :data:`MAX_SKEW_MS` of ``now_ms``."""
    stamp = received.get(TIMESTAMP_HEADER)
    if stamp is None or not stamp.isascii() or not stamp.isdigit() or len(stamp) > 16:
        return f"{TIMESTAMP_HEADER} must be the signing time in unix milliseconds"
    if abs(int(stamp) - now_ms) > MAX_SKEW_MS:
        return (f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_MS // 1000} s from this "
                f"server's clock ({now_ms})")
    value = received.get(HEADER, "")
    # bytes, not str: compare_digest refuses a str with non-ASCII characters (HTTP 500)
    given = value.strip().lower().encode("utf-8", "replace")
    if not given.startswith(_PREFIX.encode()):
        return f"{HEADER} must be sha256=<hex HMAC-SHA256 of timestamp.body>"
    for secret in secrets:
        if hmac.compare_digest(given, sign(secret, int(stamp), body).encode()):
            return None
    return f"{HEADER} does not match the body signed with this operator's secret"
