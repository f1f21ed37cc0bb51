"""Product-detail reads: the product comes from the gateway's catalogue, through the same
resilience layers as payments, with the build's fallbacks keyed by the product.

This is seed 004's read path: when the dependency fails, a ``cached`` fallback
answers with the last good read of the same product (within its TTL), so the
page is still served, stale. What is kept is measured from the answers:
``X-Outcome: fresh`` for an answer the gateway just gave, ``cached`` for one
from the cache, otherwise the error's name (``timeout``, ``not_permitted``,
...), as payments name theirs.

The layers are the payment service's very instances: one breaker, one retry,
one bulkhead per dependency, as Resilience4j keeps one instance per name and
the shop names them after the client (``pgClient``). A sick gateway opens the
breaker for reads and payments alike. The fallbacks are the same instances
too, so their answers count in the same ``shop_fallback_calls_total``; a
read's cache key is ``("product", id)``, never equal to a payment's
idempotency key (a string). Each attempt counts in ``shop_pg_calls_total``
like an approve call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from targets.shop.payments import PaymentService, outcome_of
from targets.shop.pg_client import PgClient, PgRejected
from targets.shop.resilience import FallbackAnswer

Source = Literal["fresh", "cached", "value", "error", "failed"]
"""Where an answer came from: the gateway just now, a fallback of that kind, or nowhere."""


@dataclass(frozen=True)
class DetailResult:
    """One product-detail read, as the shop answers it."""

    product_id: int
    source: Source
    outcome: str
    """``fresh``, ``cached``, or the error's name: the ``X-Outcome`` header."""
    product: dict[str, Any] | None = None
    """The product (fresh or cached); None when no product was served."""
    value: Any = None
    """A ``value`` fallback's fixed answer."""
    reason: str | None = None
    """The error the answer stands in for (a fallback's, or the failure's)."""
    age_s: float | None = None
    """How old a cached answer is."""
    status: int | None = None
    """The gateway's 4xx, when it refused the read."""


def product_key(product_id: int) -> tuple[str, int]:
    """A read's key in the fallbacks' cache."""
    return ("product", product_id)


class CatalogueService:
    """Reads products from the gateway through the payment service's layers."""

    def __init__(self, payments: PaymentService, client: PgClient) -> None:
        self.payments = payments
        self.client = client

    def detail(self, product_id: int, request_id: str | None = None) -> DetailResult:
        """The product, fresh or from a fallback; a miss names the error that was not covered.

        ``request_id`` is passed to the gateway, so each read meets its own fate there.
        """
        chain = self.payments.compose(
            lambda: self.payments.counted(lambda: self.client.product(product_id, request_id)),
            product_key(product_id),
        )
        try:
            answer = chain.get()
        except PgRejected as exc:
            return DetailResult(
                product_id,
                "failed",
                f"pg_{exc.status}",
                reason=f"pg_{exc.status}",
                status=exc.status,
            )
        except Exception as exc:  # noqa: BLE001 - every other failure: not served, named
            reason = outcome_of(exc)
            return DetailResult(product_id, "failed", reason, reason=reason)
        if not isinstance(answer, FallbackAnswer):
            return DetailResult(product_id, "fresh", "fresh", product=answer)
        reason = outcome_of(answer.error)
        if answer.kind == "cached":
            return DetailResult(
                product_id,
                "cached",
                "cached",
                product=answer.value,
                reason=reason,
                age_s=answer.age_s,
            )
        if answer.kind == "value":
            return DetailResult(product_id, "value", reason, value=answer.value, reason=reason)
        return DetailResult(product_id, "error", reason, reason=reason)
