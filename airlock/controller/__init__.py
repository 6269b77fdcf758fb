"""airlock.controller."""
