package com.example.shop;

/**
 * The gateway's answer, or a fallback's stand-in for it ({@link #circuitOpen}): the payment is
 * then recorded FAILED and the order compensated, as seed 002's {@code PaymentResult.circuitOpen}.
 */
public record ApprovalResponse(String status, boolean fallback, String reason) {

    public static ApprovalResponse circuitOpen(Throwable cause) {
        return new ApprovalResponse("FALLBACK", true, Outcomes.of(cause));
    }
}
