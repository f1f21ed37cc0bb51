"""How many times each Idempotency-Key was called: the attempt number a call's fate goes by."""

from __future__ import annotations

from collections import OrderedDict

MAX_KEYS = 1_000_000
"""Idempotency-Keys whose attempt count the gateway keeps: about 180 MB at the cap with the
harness's keys (UUIDs, 36 characters), at most about 400 MB with keys of ``MAX_KEY_CHARS``."""

MAX_KEY_CHARS = 255
"""The longest Idempotency-Key (or a product read's ``X-Request-Id``) a call may give, as at
Stripe; a longer one is answered 400 and never counted. Refused rather than hashed: a real
gateway refuses it too, and the client should learn, not see its key quietly changed."""


class AttemptCounts:
    """How many times each Idempotency-Key was called, for the ``max_keys`` most recent keys.

    A key unused for longest is forgotten first; if it comes back, it counts
    from attempt 1 again (and meets attempt 1's fate). Without a bound, every
    unique key would cost memory for the gateway's whole life.
    """

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self.max_keys = max_keys
        self.forgotten = 0
        """Keys dropped to stay within ``max_keys``."""
        self._counts: OrderedDict[str, int] = OrderedDict()

    def next(self, key: str) -> int:
        """Count one more call of ``key``; return its attempt number (1 for a new key)."""
        counts = self._counts
        attempt = counts.pop(key, 0) + 1
        counts[key] = attempt  # now the most recent
        if len(counts) > self.max_keys:
            counts.popitem(last=False)
            self.forgotten += 1
        return attempt

    def __getitem__(self, key: str) -> int:
        return self._counts.get(key, 0)

    def __len__(self) -> int:
        return len(self._counts)

    def clear(self) -> None:
        self._counts.clear()
