"""Allow `python -m pyaisvc`."""

import sys

from pyaisvc.cli import main

sys.exit(main())
