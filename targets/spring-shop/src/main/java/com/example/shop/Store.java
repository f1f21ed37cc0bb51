package com.example.shop;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.dao.DuplicateKeyException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Repository;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Products and payments through the one HikariCP pool. A product read is one statement; a
 * payment two before its gateway call (is the key known? record it PENDING) and one after.
 *
 * <p>{@code shop.db.query-time} makes each statement hold its connection that long, standing in
 * for a real database's query time (H2 in memory answers in microseconds).
 */
@Repository
public class Store {

    private final JdbcTemplate jdbc;
    private final TransactionTemplate tx;
    private final Duration queryTime;

    Store(JdbcTemplate jdbc, TransactionTemplate tx,
            @Value("${shop.db.query-time:0ms}") Duration queryTime) {
        this.jdbc = jdbc;
        this.tx = tx;
        this.queryTime = queryTime;
    }

    public Map<String, Object> product(long id) {
        List<Map<String, Object>> rows = statement(() -> jdbc.queryForList(
                "SELECT id, name, price, stock FROM products WHERE id = ?", id));
        return rows.isEmpty() ? null : rows.get(0);
    }

    /** Insert a PENDING payment, or the existing one's id for a repeated key (the key is UNIQUE). */
    public String createPayment(String key, long amount) {
        String existing = paymentId(key);
        if (existing != null) {
            return existing;
        }
        String id = UUID.randomUUID().toString().replace("-", "");
        try {
            statement(() -> jdbc.update(
                    "INSERT INTO payments (id, idempotency_key, amount, status, created_at, updated_at)"
                            + " VALUES (?, ?, ?, 'PENDING', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
                    id, key, amount));
        } catch (DuplicateKeyException raced) {
            String other = paymentId(key);
            if (other == null) {
                throw raced;
            }
            return other;
        }
        return id;
    }

    public void finishPayment(String id, String status, String reason) {
        statement(() -> jdbc.update(
                "UPDATE payments SET status = ?, reason = ?, updated_at = CURRENT_TIMESTAMP WHERE id = ?",
                status, reason, id));
    }

    private String paymentId(String key) {
        List<String> ids = statement(() -> jdbc.queryForList(
                "SELECT id FROM payments WHERE idempotency_key = ?", String.class, key));
        return ids.isEmpty() ? null : ids.get(0);
    }

    private <T> T statement(Supplier<T> work) {
        if (queryTime.isZero()) {
            return work.get();
        }
        // In a transaction the connection stays bound to this thread while it is held.
        return tx.execute(status -> {
            T result = work.get();
            try {
                Thread.sleep(queryTime.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return result;
        });
    }
}
