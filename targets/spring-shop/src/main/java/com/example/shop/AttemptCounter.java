package com.example.shop;

import feign.RequestInterceptor;
import feign.RequestTemplate;
import org.springframework.stereotype.Component;

/** Counts the gateway calls one payment made (every attempt Feign sent; refused ones are not). */
@Component
public class AttemptCounter implements RequestInterceptor {

    private final ThreadLocal<int[]> calls = ThreadLocal.withInitial(() -> new int[1]);

    @Override
    public void apply(RequestTemplate template) {
        calls.get()[0]++;
    }

    void reset() {
        calls.get()[0] = 0;
    }

    int get() {
        return calls.get()[0];
    }
}
