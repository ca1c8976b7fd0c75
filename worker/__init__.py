"""The nbstream worker: I/O around the nbstream library (Parquet, Kafka, the command line)."""


def main() -> None:
    """The ``worker`` command; says which extra to install when its dependencies are missing.
    BLAS runs on one thread unless the environment says otherwise (``blas_threads``)."""
    from .blas_threads import one_blas_thread_unless_set

    one_blas_thread_unless_set()  # before numpy loads
    try:
        from .cli import main as run
    except ModuleNotFoundError as error:
        import sys

        sys.exit(f"error: the worker needs {error.name!r}; install it with: pip install 'nbstream[worker]'")
    run()
