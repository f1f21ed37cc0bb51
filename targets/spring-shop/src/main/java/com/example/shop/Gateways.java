package com.example.shop;

import feign.FeignException;
import io.github.resilience4j.circuitbreaker.annotation.CircuitBreaker;
import io.github.resilience4j.retry.annotation.Retry;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.stereotype.Component;

/**
 * One {@link PaymentGateway} per variant, chosen by {@code shop.resilience}.
 *
 * <ul>
 *   <li>{@code retry-circuit-breaker} (default): seed 000's client, Retry outside the breaker by
 *       Resilience4j's default aspect order; the breaker outside the retry is this variant with
 *       {@code resilience4j.circuitbreaker.circuit-breaker-aspect-order} below {@code
 *       resilience4j.retry.retry-aspect-order} (lower is outer).
 *   <li>{@code retry-only}: seed 000's "before".
 *   <li>{@code cb-wrong}: seed 002's first try, the fallback on the inner CircuitBreaker.
 *   <li>{@code cb-correct}: seed 002's fix, the fallback on the outer Retry.
 * </ul>
 */
@Configuration
public class Gateways {

    @Bean
    @ConditionalOnProperty(name = "shop.resilience", havingValue = "retry-circuit-breaker",
            matchIfMissing = true)
    PaymentGateway retryCircuitBreaker(PgClient client) {
        return client::approve;
    }

    @Bean
    @ConditionalOnProperty(name = "shop.resilience", havingValue = "retry-only")
    PaymentGateway retryOnly(PgRetryOnlyClient client) {
        return client::approve;
    }

    /** Seed 002's cb-wrong: the breaker's fallback answers, so the outer Retry sees success. */
    @Component
    @ConditionalOnProperty(name = "shop.resilience", havingValue = "cb-wrong")
    static class CbWrongGateway implements PaymentGateway {

        private final PgPlainClient client;

        CbWrongGateway(PgPlainClient client) {
            this.client = client;
        }

        @Override
        @Retry(name = "pgClient")
        @CircuitBreaker(name = "pgClient", fallbackMethod = "payFallback")
        public ApprovalResponse approve(String idempotencyKey, ApprovalRequest request) {
            return client.approve(idempotencyKey, request);
        }

        ApprovalResponse payFallback(String idempotencyKey, ApprovalRequest request, Throwable t) {
            return fallback(t);
        }
    }

    /** Seed 002's cb-correct: the fallback outermost, so Retry and the breaker both work. */
    @Component
    @ConditionalOnProperty(name = "shop.resilience", havingValue = "cb-correct")
    static class CbCorrectGateway implements PaymentGateway {

        private final PgPlainClient client;

        CbCorrectGateway(PgPlainClient client) {
            this.client = client;
        }

        @Override
        @Retry(name = "pgClient", fallbackMethod = "payFallback")
        @CircuitBreaker(name = "pgClient")
        public ApprovalResponse approve(String idempotencyKey, ApprovalRequest request) {
            return client.approve(idempotencyKey, request);
        }

        ApprovalResponse payFallback(String idempotencyKey, ApprovalRequest request, Throwable t) {
            return fallback(t);
        }
    }

    /** A decline (4xx) is an answer already: the fallback stands in for every other failure. */
    static ApprovalResponse fallback(Throwable t) {
        if (t instanceof FeignException.FeignClientException declined) {
            throw declined;
        }
        return ApprovalResponse.circuitOpen(t);
    }
}
