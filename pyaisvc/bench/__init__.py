"""`pyaisvc bench`: measure model loading time, TTFT and TPOT in the guest.

matrix (cells, deterministic prompts) -> images (kernel, programs, image) ->
runner (boot, run, parse timing lines; service: the kernel AI service) ->
report (CSV, JSON, Markdown) and plots (PNG). docs/MEASURE.md explains the
numbers.
"""
