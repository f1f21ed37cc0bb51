package com.example.shop;

import feign.FeignException;
import org.springframework.stereotype.Service;

/** Records the payment, asks the gateway, and records how it ended (seed 000's flow). */
@Service
public class PaymentService {

    /** How a payment ended: APPROVED, FAILED (declined, or a fallback's stand-in) or TIMEOUT_UNKNOWN. */
    public record PaymentResult(
            String paymentId, String status, String reason, int attempts, boolean fallback) {}

    private final Store store;
    private final PaymentGateway gateway;
    private final AttemptCounter attempts;

    PaymentService(Store store, PaymentGateway gateway, AttemptCounter attempts) {
        this.store = store;
        this.gateway = gateway;
        this.attempts = attempts;
    }

    public PaymentResult pay(String idempotencyKey, long amount) {
        String paymentId = store.createPayment(idempotencyKey, amount);
        attempts.reset();
        String status;
        String reason = null;
        boolean fallback = false;
        try {
            ApprovalResponse answer = gateway.approve(
                    idempotencyKey, new ApprovalRequest(amount, paymentId));
            if (answer != null && answer.fallback()) {
                status = "FAILED"; // the order is compensated (seed 002)
                reason = answer.reason();
                fallback = true;
            } else {
                status = "APPROVED";
            }
        } catch (FeignException e) {
            if (isUserFault(e)) {
                status = "FAILED";
                reason = "pg_" + e.status();
            } else {
                status = "TIMEOUT_UNKNOWN";
                reason = Outcomes.of(e);
            }
        } catch (Exception e) {
            // CallNotPermittedException, exhausted retries, anything else: the outcome is unknown.
            status = "TIMEOUT_UNKNOWN";
            reason = Outcomes.of(e);
        }
        store.finishPayment(paymentId, status, reason);
        return new PaymentResult(paymentId, status, reason, attempts.get(), fallback);
    }

    private static boolean isUserFault(FeignException e) {
        return e.status() >= 400 && e.status() < 500;
    }
}
