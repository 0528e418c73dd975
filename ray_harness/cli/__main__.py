"""``python -m ray_harness.cli``: what the ``ray-harness`` console script runs."""

import sys

from ray_harness.cli._app import main

sys.exit(main())
