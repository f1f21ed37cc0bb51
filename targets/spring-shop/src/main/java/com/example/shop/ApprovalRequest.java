package com.example.shop;

/** What the gateway is asked to approve. */
public record ApprovalRequest(long amount, String orderNumber) {}
