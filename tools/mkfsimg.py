#!/usr/bin/env python3
"""Build an aisvc file-system image: a thin wrapper over pyaisvc.image.fsimg.

    tools/mkfsimg.py --image build/fs.img [--size 512M] --add NAME=HOST ... --add-dir [T=]DIR

Same options as `pyaisvc fsimg build`; runs from a source tree without the
package installed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyaisvc.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["fsimg", "build", *sys.argv[1:]]))
