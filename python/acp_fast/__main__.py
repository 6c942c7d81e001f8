"""``python -m acp_fast``: the ``acp-fast`` command line."""

from __future__ import annotations

import sys

from acp_fast.cli import main

if __name__ == "__main__":
    sys.exit(main())
