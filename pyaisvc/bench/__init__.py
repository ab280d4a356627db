"""`pyaisvc bench`: measure model loading time, TTFT and TPOT in the guest.

matrix (cells, deterministic prompts) -> runner (kernel, programs and image
from pyaisvc.guest.llmguest; boot, run, parse timing lines) with service (the
kernel AI service) filling in samples -> report (CSV, JSON, Markdown) and
plots (PNG). docs/MEASURE.md explains the numbers.
"""
