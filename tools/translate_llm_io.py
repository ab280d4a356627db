#!/usr/bin/env python3
"""Text <-> token ids for the guest's llmrun programs (same arguments as `pyaisvc translate`).

    tools/translate_llm_io.py encode --model smol --text "The capital of France is"
    tools/translate_llm_io.py decode --model qwen --tokens "760 6511 314 9338 369"
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyaisvc.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["translate", *sys.argv[1:]]))
