"""The two shapes of every HTTP answer of ours that is not a page: JSON already encoded (by
``protocol.ENCODER`` or msgspec, so nothing is encoded twice), and an error.

An error is always ``{"error": {"code", "message"}}`` with its status, and ``Retry-After``
when trying again later will help (429, 503). One function for it, so that every endpoint, the
rate limit and the store's error handlers answer alike.
"""

from __future__ import annotations

from starlette.responses import JSONResponse, Response


def json_response(data: bytes, status: int = 200) -> Response:
    """JSON the caller encoded already."""
    return Response(data, status_code=status, media_type="application/json")


def error_response(status: int, code: str, message: str, retry_after: int | None = None
                   ) -> JSONResponse:
    headers = None if retry_after is None else {"retry-after": str(retry_after)}
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)
