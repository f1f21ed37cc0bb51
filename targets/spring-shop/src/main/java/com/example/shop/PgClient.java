package com.example.shop;

import io.github.resilience4j.circuitbreaker.annotation.CircuitBreaker;
import io.github.resilience4j.retry.annotation.Retry;
import org.springframework.cloud.openfeign.FeignClient;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;

/** The gateway client as seed 000 writes it: Retry and CircuitBreaker on the Feign method. */
@FeignClient(name = "pg", contextId = "pgClient", url = "${pg.base-url}")
public interface PgClient {

    @Retry(name = "pgClient")
    @CircuitBreaker(name = "pgClient")
    @PostMapping("/v1/payments/approve")
    ApprovalResponse approve(
            @RequestHeader("Idempotency-Key") String idempotencyKey,
            @RequestBody ApprovalRequest request);
}
