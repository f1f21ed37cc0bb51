"""Seed scenarios (scenarios/seeds/): their short CI versions run for real, and mutation checks."""
