"""Helpers the tests import: shared servers, probes and Docker checks (conftests hold only
fixtures and hooks; nothing imports from a conftest)."""
