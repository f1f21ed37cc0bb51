package com.example.shop;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * Payments (they call the gateway) and product reads (they never do), on the same Tomcat pool.
 *
 * <p>A payment's answer says how it ended: {@code X-Payment-Status} and {@code X-Outcome} (the
 * status when approved, else the reason: {@code pg_402}, {@code timeout}, {@code not_permitted},
 * ...); 200 approved, 402 declined, 503 unknown; a fallback's stand-in is a 200 with {@code
 * X-Fallback: value}.
 */
@RestController
public class ShopController {

    private final PaymentService payments;
    private final Store store;
    private final String resilience;

    ShopController(PaymentService payments, Store store,
            @Value("${shop.resilience:retry-circuit-breaker}") String resilience) {
        this.payments = payments;
        this.store = store;
        this.resilience = resilience;
    }

    @PostMapping("/api/payments")
    public ResponseEntity<Map<String, Object>> pay(
            @RequestHeader(value = "Idempotency-Key", required = false) String idempotencyKey,
            @RequestBody(required = false) Map<String, Object> body) {
        Object amount = body == null ? null : body.get("amount");
        if (!(amount instanceof Integer || amount instanceof Long) || ((Number) amount).longValue() <= 0) {
            return ResponseEntity.badRequest().body(Map.of("error", "amount must be a positive integer"));
        }
        String key = idempotencyKey != null && !idempotencyKey.isEmpty()
                ? idempotencyKey : UUID.randomUUID().toString();
        PaymentService.PaymentResult result = payments.pay(key, ((Number) amount).longValue());
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("paymentId", result.paymentId());
        answer.put("status", result.status());
        answer.put("reason", result.reason());
        answer.put("attempts", result.attempts());
        int code = switch (result.status()) {
            case "APPROVED" -> 200;
            case "FAILED" -> 402;
            default -> 503;
        };
        ResponseEntity.BodyBuilder reply;
        if (result.fallback()) {
            answer.put("fallback", "value");
            answer.put("cached", false);
            answer.put("value", "circuitOpen");
            reply = ResponseEntity.status(200).header("X-Fallback", "value");
        } else {
            reply = ResponseEntity.status(code);
        }
        return reply
                .header("X-Payment-Status", result.status())
                .header("X-Outcome", result.reason() != null ? result.reason() : result.status())
                .body(answer);
    }

    @GetMapping("/api/products/{id}")
    public ResponseEntity<Map<String, Object>> product(@PathVariable long id) {
        Map<String, Object> product = store.product(id);
        if (product == null) {
            return ResponseEntity.status(404).body(Map.of("error", "no such product"));
        }
        return ResponseEntity.ok(product);
    }

    @GetMapping("/health")
    public Map<String, Object> health() {
        return Map.of("status", "UP", "profile", resilience);
    }
}
