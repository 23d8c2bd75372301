"""Entry point of a local tuning worker process: `python -m polyc.tune.worker` (see `measure`).

The protocol uses this process's original stdout; anything else written to stdout (by Python or
by a compiled kernel) goes to stderr instead, so it cannot corrupt a message."""
from __future__ import annotations

import os
import sys


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from polyc.tune.measure import serve
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
