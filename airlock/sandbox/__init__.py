"""airlock.sandbox: where a turn runs — the Sandbox port, the backend registry, the backends."""
