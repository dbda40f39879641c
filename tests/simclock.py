"""The simulated clock's starting time in every test: 2026-01-01T00:00:00Z."""
START_MS = 1_767_225_600_000
