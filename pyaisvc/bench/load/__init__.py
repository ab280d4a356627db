"""`pyaisvc bench --mode load`: the scheduling policies under a seeded mixed
workload, replayed over HTTP against `pyaisvc serve`."""
