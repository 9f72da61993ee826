"""A URL as it may be logged or printed: its credentials hidden.

Apart from the settings because it is needed wherever a URL is shown (the CLI's banner, the
logs), and needs nothing of them.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: Query parameters whose value is a credential (``?password=…`` is how some clients take one).
_SECRET_PARAMETERS = frozenset({"password", "pass", "passwd", "pwd", "secret", "token",
                                "auth", "key"})


def masked_url(url: str) -> str:
    """``url`` as it may be logged or printed: a password in its userinfo
    (``redis://user:PASSWORD@host``, ``redis://:PASSWORD@host``) and the value of a
    credential query parameter become ``***``. Every URL a process shows goes through
    here: logs are read and shipped by more people than hold the secrets."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # a user alone may be a token (https://TOKEN@host): hidden too
        netloc = f"{user}:***@{host}" if colon else f"***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if k.lower() in _SECRET_PARAMETERS else v)
                           for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
