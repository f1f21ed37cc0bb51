"""``python -m harness.pg``: the documented name of the gateway process (see harness.gateway)."""

from harness.gateway.main import main

if __name__ == "__main__":
    main()
