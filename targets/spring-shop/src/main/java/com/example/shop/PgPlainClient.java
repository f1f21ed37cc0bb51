package com.example.shop;

import org.springframework.cloud.openfeign.FeignClient;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;

/** The gateway client without annotations: seed 002 puts them on the calling service method. */
@FeignClient(name = "pg", contextId = "pgPlainClient", url = "${pg.base-url}")
public interface PgPlainClient {

    @PostMapping("/v1/payments/approve")
    ApprovalResponse approve(
            @RequestHeader("Idempotency-Key") String idempotencyKey,
            @RequestBody ApprovalRequest request);
}
