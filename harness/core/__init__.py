"""Leaf helpers every other package may use: errors, durations, loopback networking, fate,
the time line of phases, strict YAML models, the precise timer. Imports nothing of the harness."""
