"""Imported at start-up by every process of a loopback Dask worker, since
tests/host/loopcluster.py puts this folder on its PYTHONPATH (after the
worker's checkout).

The shared virtualenv's editable install resolves every ``pyaisvc.X`` into
the tree it was installed from, even when ``pyaisvc`` itself came from the
worker's checkout; on a machine of its own a worker has only its own
checkout. Dropping that finder makes the worker import all of pyaisvc from
its checkout, so a checkout at an older commit runs its own, older code.
"""

import sys

sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, "__module__", "").startswith("__editable__")]
