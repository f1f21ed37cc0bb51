package com.example.shop;

/** The approve call through the resilience the variant chose ({@code shop.resilience}). */
public interface PaymentGateway {

    ApprovalResponse approve(String idempotencyKey, ApprovalRequest request);
}
