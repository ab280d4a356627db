"""Work spread over a Dask cluster: reaching its workers, the fuzzers as tasks."""
