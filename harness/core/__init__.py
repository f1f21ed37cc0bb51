"""Leaf helpers every other package may use: errors, durations, loopback networking (net), fate,
the time line (phases, fault windows), strict YAML models, the precise timer and the serve loop
(serving). Imports nothing of the harness outside ``harness.core``."""
