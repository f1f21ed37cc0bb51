package com.example.shop;

import feign.FeignException;
import feign.RetryableException;
import io.github.resilience4j.circuitbreaker.CallNotPermittedException;
import java.net.SocketTimeoutException;

/** Names a failed gateway call for the answer's {@code X-Outcome} and the payment's reason. */
final class Outcomes {

    private Outcomes() {}

    static String of(Throwable t) {
        if (t instanceof CallNotPermittedException) {
            return "not_permitted";
        }
        if (t instanceof RetryableException) {
            // Feign wraps every I/O failure: a timeout (connect or read) or a broken connection.
            return hasCause(t, SocketTimeoutException.class) ? "timeout" : "connection_error";
        }
        if (t instanceof FeignException.FeignServerException) {
            return "server_error";
        }
        if (t instanceof FeignException.FeignClientException) {
            return "rejected";
        }
        if (t instanceof FeignException) {
            return "connection_error"; // a malformed answer
        }
        return "other";
    }

    private static boolean hasCause(Throwable t, Class<? extends Throwable> kind) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (kind.isInstance(c)) {
                return true;
            }
        }
        return false;
    }
}
