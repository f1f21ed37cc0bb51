package com.example.shop;

import io.github.resilience4j.retry.annotation.Retry;
import org.springframework.cloud.openfeign.FeignClient;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;

/** Seed 000's "before": the same client with Retry only. */
@FeignClient(name = "pg", contextId = "pgRetryOnlyClient", url = "${pg.base-url}")
public interface PgRetryOnlyClient {

    @Retry(name = "pgClient")
    @PostMapping("/v1/payments/approve")
    ApprovalResponse approve(
            @RequestHeader("Idempotency-Key") String idempotencyKey,
            @RequestBody ApprovalRequest request);
}
