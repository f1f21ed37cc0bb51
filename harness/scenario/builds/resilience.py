"""The shop's resilience layers in a scenario: their settings, fallbacks and composition.

Keys are Resilience4j's Spring Boot properties, kebab-case, under the build's
``resilience4j:`` block (``bulkhead``, ``thread-pool-bulkhead``,
``timelimiter``, ``circuitbreaker``, ``retry``); ``resilience:`` lists the
layers outermost first, by the names of Resilience4j's ``*-aspect-order``
properties::

    resilience: [retry, circuit-breaker]        # Retry ( CircuitBreaker ( call ) )
    resilience4j:
      retry: {max-attempts: 3}
      circuitbreaker: {sliding-window-size: 10, fallback: value}
      fallback: error                           # outermost, around everything

Without ``resilience:``, Resilience4j's default aspect order over the
configured layers: ``Retry ( CircuitBreaker ( TimeLimiter ( Bulkhead ( call )
) ) )`` (a thread-pool bulkhead where the bulkhead is). A ``fallback:`` in a
layer's block sits right outside that layer: on the breaker, it turns
failures into values before the Retry outside sees them (seed 002's cb-wrong);
the block-level ``resilience4j.fallback`` sits outside everything
(cb-correct). The breaker's ``type: naive`` is the hand-written kind (seed
004): ``failure-count`` failures within ``window`` open it for
``open-duration``, with no rate and no half-open.

The shop (``targets/shop``) reads the same names; it cannot import the
harness, so ``LAYERS`` is written in both places (a test keeps them equal).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.core.durations import Duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_DURATION_S, MAX_TIMEOUT_S, MAX_WINDOW, check_json

LAYERS = ("retry", "circuit-breaker", "time-limiter", "bulkhead", "thread-pool-bulkhead")
"""Every layer, in Resilience4j's default aspect order (outermost first; no rate limiter)."""

BLOCK_OF = {
    "retry": "retry",
    "circuit-breaker": "circuitbreaker",
    "time-limiter": "timelimiter",
    "bulkhead": "bulkhead",
    "thread-pool-bulkhead": "thread-pool-bulkhead",
}
"""Layer name (in ``resilience:``) -> its block under ``resilience4j:`` (Spring's prefix)."""

MAX_CONCURRENT_CALLS = 10_000
"""A bulkhead's ``max-concurrent-calls``."""
MAX_POOL_THREADS = 2000
"""A thread-pool bulkhead's threads (as many as the shop's request threads may be)."""
MAX_QUEUE_CAPACITY = 100_000
"""A thread-pool bulkhead's ``queue-capacity``."""

# ---------------------------------------------------------------- fallback


def _fallback_shorthand(value: object) -> object:
    """``fallback: value`` is ``fallback: {kind: value}``."""
    return {"kind": value} if isinstance(value, str) else value


class FallbackSettings(StrictModel):
    """An answer in place of an error, right outside the layer it is attached to."""

    kind: Literal["error", "value", "cached"] = Field(
        description="error: a fast failure answer; value: a fixed answer; cached: the last "
        "good answer for the same key, at most ttl old"
    )
    value: Any = Field(None, description="the fixed answer (kind value), plain JSON")
    ttl: Duration = Field(60.0, gt=0, le=MAX_DURATION_S, description="kind cached")

    @field_validator("value")
    @classmethod
    def _value_is_json(cls, value: Any) -> Any:
        return check_json(value, "value")

    @model_validator(mode="after")
    def _settings_of_its_kind(self) -> FallbackSettings:
        if "value" in self.model_fields_set and self.kind != "value":
            raise ValueError(f"value is the answer of kind value; this fallback is {self.kind}")
        if "ttl" in self.model_fields_set and self.kind != "cached":
            raise ValueError(f"ttl applies to kind cached; this fallback is {self.kind}")
        return self


Fallback = Annotated[FallbackSettings, BeforeValidator(_fallback_shorthand)]
"""``error``, ``value`` or ``cached``, or a mapping with ``kind`` and its settings."""

# ---------------------------------------------------------------- layers


class BulkheadSettings(StrictModel):
    """Resilience4j ``resilience4j.bulkhead.instances.<name>`` (the semaphore bulkhead)."""

    max_concurrent_calls: int = Field(25, ge=1, le=MAX_CONCURRENT_CALLS)
    max_wait_duration: Duration = Field(
        0.0, le=MAX_TIMEOUT_S, description="how long a call waits for a permit; then refused"
    )
    fallback: Fallback | None = None


class ThreadPoolBulkheadSettings(StrictModel):
    """Resilience4j ``resilience4j.thread-pool-bulkhead.instances.<name>``.

    The pool sizes default as Resilience4j's do, to the target machine's processors
    (max: all, core: one fewer, never above an explicit max).
    """

    core_thread_pool_size: int | None = Field(None, ge=1, le=MAX_POOL_THREADS)
    max_thread_pool_size: int | None = Field(None, ge=1, le=MAX_POOL_THREADS)
    queue_capacity: int = Field(100, ge=1, le=MAX_QUEUE_CAPACITY)
    keep_alive_duration: Duration = Field(0.02, le=MAX_TIMEOUT_S)
    fallback: Fallback | None = None

    @model_validator(mode="after")
    def _core_within_max(self) -> ThreadPoolBulkheadSettings:
        core, most = self.core_thread_pool_size, self.max_thread_pool_size
        if core is not None and most is not None and most < core:
            raise ValueError(
                f"max-thread-pool-size ({most}) is smaller than core-thread-pool-size ({core})"
            )
        return self


class TimeLimiterSettings(StrictModel):
    """Resilience4j ``resilience4j.timelimiter.instances.<name>``."""

    timeout_duration: Duration = Field(1.0, gt=0, le=MAX_TIMEOUT_S)
    cancel_running_future: bool = True
    fallback: Fallback | None = None


class BreakerTypeSettings(StrictModel):
    """The breaker's ``type`` and the naive type's settings; ``CircuitBreakerSettings``
    (Resilience4j's properties) extends it."""

    NAIVE_KEYS: ClassVar[frozenset[str]] = frozenset({"failure_count", "window", "open_duration"})

    type: Literal["resilience4j", "naive"] = Field(
        "resilience4j",
        description="resilience4j: rate-based with half-open; naive: failure-count failures "
        "within window open it for open-duration",
    )
    failure_count: int = Field(5, ge=1, le=MAX_WINDOW, description="naive: failures that open it")
    window: Duration = Field(10.0, gt=0, le=MAX_DURATION_S, description="naive: counted within")
    open_duration: Duration = Field(
        30.0, gt=0, le=MAX_DURATION_S, description="naive: then closed again, no half-open"
    )
    fallback: Fallback | None = None

    @model_validator(mode="after")
    def _settings_of_its_type(self) -> BreakerTypeSettings:
        given = self.model_fields_set - {"type", "fallback"}
        if self.type == "naive":
            wrong = sorted(given - self.NAIVE_KEYS)
            if wrong:
                raise ValueError(
                    f"{_keys(wrong)} {'is a setting' if len(wrong) == 1 else 'are settings'} of "
                    "type resilience4j; a naive breaker has failure-count, window and "
                    "open-duration"
                )
        else:
            wrong = sorted(given & self.NAIVE_KEYS)
            if wrong:
                raise ValueError(f"{_keys(wrong)}: set type: naive to use the naive breaker")
        return self


def _keys(names: list[str]) -> str:
    return ", ".join(name.replace("_", "-") for name in names)


class LayerBlocks(StrictModel):
    """Base of the ``resilience4j:`` block (``Resilience4j``): a block written under its
    layer's name (``time-limiter:``) is told its name (``timelimiter:``)."""

    @model_validator(mode="before")
    @classmethod
    def _block_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for layer, block in BLOCK_OF.items():
                if layer != block and layer in data:
                    raise ValueError(
                        f"{layer}: the block is named {block}, as Resilience4j's properties "
                        f"(resilience4j.{block}); {layer} is the layer's name in resilience:"
                    )
        return data


# ---------------------------------------------------------------- composition


_LAYER_OF_BLOCK = {block: layer for layer, block in BLOCK_OF.items() if block != layer}


def _known_layer(name: str) -> str:
    if name not in LAYERS:
        hint = ""
        if name == "fallback":
            hint = (
                " (a fallback is not a layer: put fallback: in a layer's block, or "
                "resilience4j.fallback for the outermost one)"
            )
        elif name in _LAYER_OF_BLOCK:
            hint = f" (did you mean {_LAYER_OF_BLOCK[name]}? resilience4j.{name} is its block)"
        raise ValueError(f"unknown layer {name!r}; layers: {', '.join(LAYERS)}{hint}")
    return name


def configured_layers(profile: str, blocks: object) -> dict[str, object]:
    """Layer -> its settings, for the layers a build configures (Retry always: it has
    defaults; the breaker with profile retry-circuit-breaker)."""
    found: dict[str, object] = {"retry": getattr(blocks, "retry", None)}
    if profile == "retry-circuit-breaker":
        found["circuit-breaker"] = getattr(blocks, "circuitbreaker", None)
    for layer in ("time-limiter", "bulkhead", "thread-pool-bulkhead"):
        settings = getattr(blocks, BLOCK_OF[layer].replace("-", "_"), None)
        if settings is not None:
            found[layer] = settings
    return found


def composition_problems(order: list[str], profile: str, blocks: object) -> list[str]:
    """What is wrong with ``resilience: order`` given the build's profile and blocks."""
    problems: list[str] = []
    configured = configured_layers(profile, blocks)
    seen: set[str] = set()
    for layer in order:
        if layer in seen:
            problems.append(f"{layer} is listed twice; each layer wraps the call once")
        seen.add(layer)
        if layer in configured:
            continue
        if layer == "circuit-breaker":
            problems.append(
                f"circuit-breaker is listed but profile {profile} has no breaker: use profile "
                "retry-circuit-breaker"
            )
        else:
            problems.append(
                f"{layer} is listed but not configured: add resilience4j.{BLOCK_OF[layer]} "
                f"({BLOCK_OF[layer]}: {{}} takes Resilience4j's defaults)"
            )
    for layer, settings in configured.items():
        if layer in seen:
            continue
        block = f"resilience4j.{BLOCK_OF[layer]}"
        if layer == "retry":
            problems.append(
                f"retry is not in resilience {order}, but profile {profile} composes a Retry: "
                "list it (max-attempts: 1 makes a single attempt)"
            )
        elif layer == "circuit-breaker":
            problems.append(
                f"circuit-breaker is not in resilience {order}, but profile {profile} "
                "composes one: list it"
            )
        elif getattr(settings, "fallback", None) is not None:
            problems.append(
                f"{block}.fallback is attached to {layer}, which is not in resilience {order}"
            )
        else:
            problems.append(
                f"{block} is configured but {layer} is not in resilience {order}: list it, or "
                "remove the block"
            )
    return problems


def _check_composition(order: list[str] | None, info: ValidationInfo) -> list[str] | None:
    """Check ``resilience:`` against the build's profile and blocks (validated before it)."""
    if order is None:
        return None
    profile, blocks = info.data.get("profile"), info.data.get("resilience4j")
    if profile is None or blocks is None:
        return order  # their own errors are reported where they are
    problems = composition_problems(order, profile, blocks)
    if problems:
        raise ValueError("; ".join(problems))
    return order


Composition = Annotated[
    list[Annotated[str, AfterValidator(_known_layer)]] | None,
    AfterValidator(_check_composition),
]
"""``resilience:``: the layers outermost first; omitted, Resilience4j's default order.
Declared after ``profile`` and ``resilience4j`` in the build, which it is checked against."""
