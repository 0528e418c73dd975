"""``python -m ray_harness.cli``: what the ``ray-harness`` console script runs."""

import sys

from ray_harness.cli._app import main

if __name__ == "__main__":  # importing the module (a package walk, the docs build) must not run the CLI
    sys.exit(main())
