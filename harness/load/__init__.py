"""Load generation: an open-model plan executed inside Locust, which runs in its own process(es).

The orchestrator never imports Locust (it monkey-patches the whole process
with gevent); it writes a ``plan.json``, starts ``locust -f locustfile.py``
and reads the samples and progress files the locustfile writes.
"""
