"""``python -m bench``: the side-by-side benchmark of ``bench/run.py``."""

from bench.run import main

raise SystemExit(main())
