"""Ctrl-C during a fit: the fit ends after the round under way and keeps the rounds done, with a warning."""

import signal
import subprocess
import sys
import textwrap

import pytest

_FIT_UNTIL_INTERRUPTED = textwrap.dedent("""
    import signal
    import warnings

    import numpy as np

    from lambdamart import LambdaMARTRanker
    from lambdamart.datasets import make_ranking_data

    # Ctrl-C as in an interactive session, also when the test runs in the background (nohup, `&`), where the shell
    # ignores SIGINT for every process it starts and the fit, rightly, leaves an ignored SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    X, y, qid = make_ranking_data(30, random_state=0)
    model = LambdaMARTRanker(n_estimators=1_000_000, learning_rate=0.01, subsample=0.8, verbose=1,
                             random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y, qid)
    print("ROUNDS", model.n_estimators_, flush=True)
    print("WARNED", any("interrupted" in str(w.message) for w in caught), flush=True)
    print("HANDLER RESTORED", signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
    # The rounds kept are whole rounds: the model is the one a fit of that many rounds grows.
    same = LambdaMARTRanker(n_estimators=model.n_estimators_, learning_rate=0.01, subsample=0.8,
                            random_state=0).fit(X, y, qid)
    print("SAME", bool(np.array_equal(same.predict(X), model.predict(X))), flush=True)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_ctrl_c_ends_the_fit_after_the_round_and_keeps_the_rounds():
    child = subprocess.Popen([sys.executable, "-c", _FIT_UNTIL_INTERRUPTED], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        for line in child.stdout:  # progress lines, one per round
            if line.startswith("[5/"):
                break
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=300)
    finally:
        child.kill()
    assert child.returncode == 0, err
    results = dict(line.rsplit(" ", 1) for line in out.splitlines() if not line.startswith("["))
    assert 5 <= int(results["ROUNDS"]) < 1_000_000
    assert results["WARNED"] == "True" and results["HANDLER RESTORED"] == "True" and results["SAME"] == "True"


@pytest.mark.parametrize("verbose", [0, 1])
def test_early_stopping_without_ctrl_c_gives_no_interruption_warning(verbose, capsys):
    import warnings

    from lambdamart import LambdaMARTRanker
    from lambdamart.datasets import make_ranking_data

    X, y, qid = make_ranking_data(40, random_state=1)
    model = LambdaMARTRanker(n_estimators=500, learning_rate=0.5, n_iter_no_change=2, early_stopping=True,
                             verbose=verbose, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(X, y, qid)
    assert model.n_estimators_ < 500
    assert ("early stopping: best round" in capsys.readouterr().out) == bool(verbose)
