"""pyaisvc: host toolkit for the aisvc RISC-V teaching kernel."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pyaisvc")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+src"
