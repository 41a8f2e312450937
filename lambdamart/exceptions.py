"""Warnings and errors that lambdamart raises beyond Python's and scikit-learn's own."""


class InconsistentVersionWarning(UserWarning):
    """A pickled ranker is loaded by a different lambdamart version than the one that pickled it.

    Parameters
    ----------
    estimator_name : str
        Class of the unpickled estimator.
    original_version : str
        lambdamart version that wrote the pickle (``"unknown"`` for pickles that do not record it).
    current_version : str
        lambdamart version reading it.
    """

    def __init__(self, estimator_name: str, original_version: str, current_version: str) -> None:
        super().__init__(estimator_name, original_version, current_version)
        self.estimator_name = estimator_name
        self.original_version = original_version
        self.current_version = current_version

    def __str__(self) -> str:
        return (f"unpickling a {self.estimator_name} written by lambdamart {self.original_version} with lambdamart "
                f"{self.current_version}: its internals may differ, so it may fail or predict differently. Refit "
                f"it, or move models between versions with save_model() and lambdamart.load_model(), whose file "
                f"format is versioned and checked.")


class WorkerLostError(RuntimeError):
    """A distributed fit lost workers it could not do without, and stopped without a model.

    A fit goes on after losing a worker (on the workers left); it raises this when none is left, or after losing
    workers again and again without completing a round. The message names the worker's address and the stage
    (round) of the fit in which it was lost.
    """


class SchedulerLostError(RuntimeError):
    """The client lost its Dask scheduler during a distributed fit, which stopped without a model.

    With ``checkpoint_dir`` set, the same fit with ``warm_start=True`` on a working cluster continues from the
    newest checkpoint.
    """


__all__ = ["InconsistentVersionWarning", "SchedulerLostError", "WorkerLostError"]
