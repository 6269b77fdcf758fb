"""One DBOS Transact process for ``bench/replicas.py``'s queue comparison (run as a subprocess:
DBOS is one instance per process).

``python -m bench._dbos_worker setup DSN POLL``: create DBOS's schema in DSN and register the
queue, then exit. ``... work DSN POLL``: the same, then dequeue and run the queue's workflows
(``worker_concurrency`` 4) until stdin closes; prints ``ready`` once launched.

The workflow does nothing (the dequeue is what is measured); DBOS records when each was
dequeued (``workflow_status.started_at_epoch_ms``).
"""

from __future__ import annotations

import sys

QUEUE = "airlock_bench"
WORKFLOW = "bench_job"
WORKER_CONCURRENCY = 4


def main(argv: list[str]) -> int:
    mode, dsn, poll = argv[0], argv[1], float(argv[2])
    from dbos import DBOS

    DBOS(config={"name": "airlock-bench", "system_database_url": dsn, "log_level": "WARNING"})

    @DBOS.workflow(name=WORKFLOW)
    def bench_job(i: int) -> int:
        return i

    if mode == "setup":
        DBOS.listen_queues([])
    DBOS.launch()
    DBOS.register_queue(
        QUEUE, worker_concurrency=WORKER_CONCURRENCY, polling_interval_sec=poll, on_conflict="always_update"
    )
    if mode == "work":
        print("ready", flush=True)
        sys.stdin.read()
    DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
