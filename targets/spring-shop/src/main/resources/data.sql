-- 1000 products, as targets/shop seeds them (standard SQL: H2 and PostgreSQL alike).
INSERT INTO products (id, name, price, stock)
WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000)
SELECT n, CONCAT('product-', n), 1000 + MOD(n, 97) * 100, 100 FROM r
WHERE NOT EXISTS (SELECT 1 FROM products p WHERE p.id = r.n);
