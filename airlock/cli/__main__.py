"""``python -m airlock.cli``: the ``airlock`` command."""

from airlock.cli import main

if __name__ == "__main__":
    main()
