"""airlock.providers."""
