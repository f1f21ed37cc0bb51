"""A call's fate: a uniform number fixed by (seed, key, attempt, salt).

Why a hash and not a random generator: the *before* and *after* builds (and a
rerun with the same seed) must meet the same failures for the same payments
or connections, whatever order the calls arrive in. The gateway draws every
probabilistic fault from it, the proxy which connections a toxic hits.
"""

from __future__ import annotations

import hashlib


def fate(seed: int, key: str, attempt: int, salt: str = "") -> float:
    """A uniform number in [0, 1) fixed by (seed, key, attempt, salt): the call's fate."""
    text = f"{seed}\x1f{key}\x1f{attempt}\x1f{salt}"
    # surrogatepass: a key from raw header bytes that are not UTF-8 has a fate too.
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64
