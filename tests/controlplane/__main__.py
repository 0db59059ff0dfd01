"""`python -m tests.controlplane` (from the repo root): same as up.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from up import main  # noqa: E402

sys.exit(main())
