"""The money rules of a bet: how a slip is judged and answered (:mod:`livetable.betting.slips`)
and a session's responsible-gaming limits (:mod:`livetable.betting.sessions`), pure and
used the same way for internal and seamless wallets."""
