"""The websocket close codes of protocol v1, and what each tells a client to do."""

CLOSE_SERVICE_RESTART = 1012  # graceful stop: reconnect (elsewhere) and resume
CLOSE_INTERNAL_ERROR = 1011  # a bug, logged: not an outage to retry into
CLOSE_TRY_AGAIN_LATER = 1013  # the store is unreachable: reconnect with backoff
CLOSE_PROTOCOL = 4000  # hello asked for a protocol version this server does not speak
CLOSE_UNAUTHORIZED = 4001  # a bad, forged or expired token; or the wrong kind of token
CLOSE_FORBIDDEN = 4003  # a valid staff token for another table
CLOSE_HELLO_TIMEOUT = 4002  # no hello within the time allowed
#: The operator's session ended (after ``session_ended``): the same code as a hello
#: timeout, as the wire contract fixes it; the frame before it tells them apart, and a
#: client that got ``session_ended`` does not reconnect with that token.
CLOSE_SESSION_ENDED = 4002
CLOSE_UNKNOWN_TABLE = 4004
CLOSE_TOO_SLOW = 4008  # the send queue overflowed: resume to catch up
CLOSE_RESYNC = 4011  # this gateway lost events of the table: resume to catch up
CLOSE_RATE_LIMITED = 4029  # kept sending past its frame rate: back off, then reconnect
#: Refusals answered with ``rate_limited`` in one streak; past these the frames are dropped
#: unanswered (answering each would cost what the flood costs), then the socket is closed.
ANSWERED_STRIKES = 3
