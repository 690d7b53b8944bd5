"""Example Spark jobs over kipling (run with ``python -m pipeline.jobs.<name> --help``)."""
