"""The reference service under test: a thread-per-request shop that calls a payment gateway.

Run it with ``python -m targets.shop --config shop.json`` (gunicorn ``gthread``,
one process, a bounded pool of request threads like Tomcat's 200).
"""
