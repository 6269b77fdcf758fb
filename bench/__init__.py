"""airlock's benchmarks: ``python -m bench`` (see ``bench/run.py``) and the single-topic scripts.

Import-light on purpose: ``bench._common`` and ``bench._peers`` also run in the peers' own
virtualenv (``bench/setup-peers.sh``), where airlock is not installed.
"""
