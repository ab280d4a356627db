"""make test's parallel groups reach pytest-xdist.

conftest.py marks the tests that share a module fixture with one xdist_group,
so that fixture (an export, an image) is built once. Nothing fails when the
marks are ignored: every worker just builds the fixture again. That happened
silently twice (the marks were added after xdist read them, and pytest 9.2's
node ids drop the group), so this test runs a small suite the way make test
does and counts how often its shared fixture was built.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import importlib.util
import sys

sys.path.insert(0, {str(TESTS)!r})  # conftest.py imports tests/host

spec = importlib.util.spec_from_file_location("aisvc_conftest", {str(TESTS / "conftest.py")!r})
ours = sys.modules["aisvc_conftest"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ours)
pytest_collection_modifyitems = ours.pytest_collection_modifyitems
"""

SUITE = """
import os
import time
from pathlib import Path

import pytest

LOG = Path(__file__).parent / "log.txt"


def note(what):
    with LOG.open("a") as f:
        f.write(f"{what} {os.environ.get('PYTEST_XDIST_WORKER')}\\n")


@pytest.fixture(scope="module", params=["a", "b"])
def shared(request):
    note(f"built-{request.param}")
    return request.param


@pytest.mark.parametrize("i", range(3))
def test_shared(shared, i):
    note(f"used-{shared}")
    time.sleep(0.1)


@pytest.mark.parametrize("i", range(4))
def test_free(i):
    time.sleep(0.1)
"""


def test_tests_sharing_a_module_fixture_share_a_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_toy.py").write_text(SUITE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                           "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (tmp_path / "log.txt").read_text().split("\n")
    for param in "ab":
        built = [line for line in log if line.startswith(f"built-{param} ")]
        workers = {line.split()[1] for line in log if line.startswith(f"used-{param} ")}
        assert len(built) == 1, log  # once, not once per worker or per test
        assert len(workers) == 1, log
