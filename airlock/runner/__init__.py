"""airlock.runner."""
