"""``python -m sparsetir.bench.bundle build|ingest`` (see ``build.py``)."""

import sys

from .build import main

sys.exit(main())
