"""Guest templates and their clones: cold start in milliseconds (docs/COLDSTART.md).

``store`` saves a cold-booted guest whose model is loaded (``ensure``,
``load``, ``make``); ``clone`` restores copies of it (``start_clone``,
``Pool``); ``qmp`` is QEMU's monitor they both speak; ``starter`` picks how
each guest of a server starts.
"""
