"""The ``jar`` build kind: a Spring Boot jar, started with the build's own Spring properties."""
