"""TreeSHAP (``predict_contributions``) and the pair explanation (``lambdamart.explain``).

The contributions are checked four ways: rows add up to ``predict``; they equal exact Shapley values enumerated over
all feature subsets on tiny models; they equal shap's TreeExplainer on the same trees; and they equal LightGBM's
``pred_contrib`` on a LightGBM model imported into a ranker, and shap and LightGBM on our models exported to
LightGBM's and XGBoost's formats.
"""

import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from helpers import fit, make_data
from sklearn.exceptions import NotFittedError

from lambdamart import LambdaMARTRanker, import_model
from lambdamart import ranker as ranker_module
from lambdamart._engine.tree import concatenate_trees, split_trees
from lambdamart.explain import PairExplanation, explain_pair

# Tree shapes: stumps, leaf-wise trees with and without a depth limit, deep narrow trees that split the same feature
# again and again (a feature met twice on a path is UNWOUND), wide trees.
SHAPES = {
    "stumps": dict(max_leaf_nodes=2),
    "leafwise": dict(max_leaf_nodes=12),
    "depth-2": dict(max_leaf_nodes=31, max_depth=2),
    "deep": dict(max_leaf_nodes=40, min_samples_leaf=2),
    "one-feature": dict(max_leaf_nodes=20, min_samples_leaf=1),
}


def _model(shape, nan_fraction=0.15, seed=0, n_features=5):
    X, y, qid = make_data(seed, n_queries=30, n_features=n_features, relevance="mixed", nan_fraction=nan_fraction)
    if shape == "one-feature":
        X[:, 1:] = 0.0  # every split is on feature 0
    return fit(X, y, qid, n_estimators=8, **SHAPES[shape]), X


def _with_trees(trees, n_features):
    """A ranker holding the given flat trees, as if fitted."""
    model = LambdaMARTRanker(n_jobs=1)
    model._trees = trees
    model.n_features_in_ = n_features
    model.n_estimators_ = trees["tree_starts"].shape[0]
    return model


def _single_leaf(value, count=50):
    return dict(feature=np.array([-1]), threshold=np.array([np.nan]), missing_left=np.array([False]),
                left=np.array([-1]), right=np.array([-1]), value=np.array([value]), gain=np.array([0.0]),
                count=np.array([count]))


def _stump(feature, threshold, missing_left, values, counts):
    """A one-split tree: ``x[feature] <= threshold`` to ``values[0]``, else ``values[1]``."""
    return dict(feature=np.array([feature, -1, -1]), threshold=np.array([threshold, np.nan, np.nan]),
                missing_left=np.array([missing_left, False, False]), left=np.array([1, -1, -1]),
                right=np.array([2, -1, -1]), value=np.array([0.0, *values]), gain=np.array([1.0, 0.0, 0.0]),
                count=np.array(counts))


# ---------------------------------------------------------------- rows add up to predict


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rows_sum_to_predict(shape):
    model, X = _model(shape)
    contributions = model.predict_contributions(X)
    assert contributions.shape == (X.shape[0], X.shape[1] + 1) and contributions.dtype == np.float64
    np.testing.assert_allclose(contributions.sum(axis=1), model.predict(X), rtol=0, atol=1e-9)
    # The last column is the expected score, one number for all rows; unused features contribute nothing.
    assert np.all(contributions[:, -1] == contributions[0, -1])
    unused = np.setdiff1d(np.arange(X.shape[1]), model._trees["feature"])
    assert np.all(contributions[:, unused] == 0.0)


def test_expected_value_is_the_cover_weighted_mean_score():
    """With counts that add up (as a fit's do), the expected score is Σ leaf value · leaf count / root count."""
    model, X = _model("leafwise")
    t = model._trees
    expected = sum(t["value"][leaves] @ t["count"][leaves] / t["count"][root]
                   for root, leaves in _leaves_per_tree(t))
    assert model.predict_contributions(X[:1])[0, -1] == pytest.approx(expected, rel=1e-12)


def _leaves_per_tree(t):
    stops = np.append(t["tree_starts"][1:], t["feature"].shape[0])
    for start, stop in zip(t["tree_starts"], stops):
        nodes = np.arange(start, stop)
        yield start, nodes[t["left"][nodes] < 0]


def test_single_leaf_trees_are_all_expected_value():
    model, X = _model("leafwise")
    trees = split_trees(model._trees)
    mixed = _with_trees(concatenate_trees([_single_leaf(0.25), *trees[:3], _single_leaf(-0.5), *trees[3:]]),
                        X.shape[1])
    contributions = mixed.predict_contributions(X)
    np.testing.assert_allclose(contributions.sum(axis=1), mixed.predict(X), rtol=0, atol=1e-9)
    np.testing.assert_allclose(contributions[:, :-1], model.predict_contributions(X)[:, :-1], rtol=0, atol=1e-12)
    assert contributions[0, -1] == pytest.approx(model.predict_contributions(X)[0, -1] - 0.25)

    only_leaves = _with_trees(concatenate_trees([_single_leaf(1.5), _single_leaf(2.0)]), X.shape[1])
    np.testing.assert_array_equal(only_leaves.predict_contributions(X[:3]),
                                  np.column_stack([np.zeros((3, X.shape[1])), np.full(3, 3.5)]))


def test_missing_and_infinite_values_go_where_predict_sends_them():
    """NaN follows missing_left; ±inf are values (x <= +inf goes left); a threshold may be +inf."""
    trees = concatenate_trees([_stump(0, 0.5, True, (1.0, -1.0), [10, 4, 6]),
                               _stump(0, 0.5, False, (2.0, 3.0), [10, 7, 3]),
                               _stump(1, np.inf, False, (-1.0, 4.0), [10, 8, 2])])
    model = _with_trees(trees, 2)
    X = np.array([[np.nan, np.inf], [np.inf, -np.inf], [-np.inf, np.nan], [0.5, 0.0], [0.7, np.inf]])
    contributions = model.predict_contributions(X)
    np.testing.assert_allclose(contributions.sum(axis=1), model.predict(X), rtol=0, atol=1e-12)
    # Row 0: feature 0 is NaN, left in the first stump, right in the second.
    e0 = (0.4 * 1.0 + 0.6 * -1.0) + (0.7 * 2.0 + 0.3 * 3.0)
    assert contributions[0, 0] == pytest.approx((1.0 + 3.0) - e0)
    # Feature 1 = +inf is <= +inf: left (-1.0), against an expected 0.8 * -1 + 0.2 * 4.
    assert contributions[0, 1] == pytest.approx(-1.0 - (0.8 * -1.0 + 0.2 * 4.0))
    # NaN in feature 1 goes right at that split (missing_left False).
    assert contributions[2, 1] == pytest.approx(4.0 - (0.8 * -1.0 + 0.2 * 4.0))


def test_float32_input_and_the_parallel_path_give_the_same_values(monkeypatch):
    model, X = _model("deep")
    X = np.vstack([X] * 6)  # several row blocks
    serial = model.predict_contributions(X)
    np.testing.assert_allclose(model.predict_contributions(X.astype(np.float32)).sum(axis=1),
                               model.predict(X.astype(np.float32)), rtol=0, atol=1e-9)
    monkeypatch.setattr(ranker_module, "_SERIAL_CONTRIBUTIONS_WORK", 0)
    model.set_params(n_jobs=2)
    np.testing.assert_array_equal(model.predict_contributions(X), serial)  # per row, trees add in the same order


def test_input_is_validated_as_for_predict():
    model, X = _model("stumps")
    with pytest.raises(NotFittedError):
        LambdaMARTRanker().predict_contributions(X)
    with pytest.raises(ValueError, match="features"):
        model.predict_contributions(X[:, :3])
    assert model.predict_contributions(X[:0]).shape == (0, X.shape[1] + 1)
    np.testing.assert_array_equal(model.predict_contributions(X[:4].tolist()), model.predict_contributions(X[:4]))


def test_a_split_without_cover_is_refused():
    trees = concatenate_trees([_stump(0, 0.0, True, (1.0, 2.0), [0, 0, 0])])
    with pytest.raises(ValueError, match="count"):
        _with_trees(trees, 1).predict_contributions(np.zeros((2, 1)))


def test_a_child_without_cover_adds_nothing_but_its_row_value():
    """count 0 on one side (possible in an imported model): no 0/0, and rows still add up."""
    trees = concatenate_trees([_stump(0, 0.0, True, (1.0, 2.0), [5, 5, 0]), _stump(0, 1.0, False, (3.0, 1.0),
                                                                                   [5, 0, 5])])
    model = _with_trees(trees, 1)
    X = np.array([[-1.0], [0.5], [2.0], [np.nan]])
    contributions = model.predict_contributions(X)
    assert np.isfinite(contributions).all()
    np.testing.assert_allclose(contributions.sum(axis=1), model.predict(X), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- exact Shapley values, by enumeration


def _conditional_score(trees, x, known):
    """The path-dependent expected score given the features in ``known``: the row's branch at their splits, both
    branches weighted by cover elsewhere."""
    def node_value(node):
        if trees["left"][node] < 0:
            return trees["value"][node]
        left, right = trees["left"][node], trees["right"][node]
        f = trees["feature"][node]
        if f in known:
            v = x[f]
            goes_left = v <= trees["threshold"][node] or (np.isnan(v) and trees["missing_left"][node])
            return node_value(left if goes_left else right)
        count = trees["count"]
        return (count[left] * node_value(left) + count[right] * node_value(right)) / count[node]

    return sum(node_value(root) for root in trees["tree_starts"])


def _exact_shapley(trees, x, n_features):
    """Shapley values of the path-dependent game, summed over every subset of the other features."""
    phi = np.zeros(n_features + 1)
    players = range(n_features)
    for i in players:
        others = [j for j in players if j != i]
        for size in range(n_features):
            weight = math.factorial(size) * math.factorial(n_features - size - 1) / math.factorial(n_features)
            for subset in combinations(others, size):
                known = set(subset)
                phi[i] += weight * (_conditional_score(trees, x, known | {i}) - _conditional_score(trees, x, known))
    phi[n_features] = _conditional_score(trees, x, set())
    return phi


@pytest.mark.parametrize("shape", ["leafwise", "one-feature", "depth-2"])
def test_equal_to_shapley_values_enumerated_over_all_subsets(shape):
    model, X = _model(shape, n_features=4)
    model_trees = split_trees(model._trees)
    small = _with_trees(concatenate_trees(model_trees[:4]), X.shape[1])  # a few trees keep the enumeration short
    rows = X[:12]
    contributions = small.predict_contributions(rows)
    expected = np.array([_exact_shapley(small._trees, x, X.shape[1]) for x in rows])
    np.testing.assert_allclose(contributions, expected, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- shap's TreeExplainer


def _shap_model(trees):
    """Our flat trees as shap's custom tree-model dict (one dict per tree, local node indices)."""
    shap_trees = []
    for tree in split_trees(trees):
        leaf = tree["left"] < 0
        # shap sends a missing value (NaN) to children_default and compares x <= threshold otherwise, as we do.
        default = np.where(tree["missing_left"], tree["left"], tree["right"])
        shap_trees.append(dict(
            children_left=tree["left"].astype(np.int32), children_right=tree["right"].astype(np.int32),
            children_default=np.where(leaf, -1, default).astype(np.int32),
            features=np.where(leaf, -1, tree["feature"]).astype(np.int32),
            thresholds=np.where(leaf, 0.0, tree["threshold"]), values=tree["value"].reshape(-1, 1),
            node_sample_weight=tree["count"].astype(np.float64)))
    return dict(trees=shap_trees)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_equal_to_shap_tree_explainer(shape):
    shap = pytest.importorskip("shap")
    model, X = _model(shape)
    X[:5, 0] = np.inf
    X[5:10, 1] = -np.inf
    explainer = shap.TreeExplainer(_shap_model(model._trees), feature_perturbation="tree_path_dependent")
    contributions = model.predict_contributions(X)
    np.testing.assert_allclose(contributions[:, :-1], explainer.shap_values(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(contributions[:, -1], np.ravel(explainer.expected_value)[0], rtol=0, atol=1e-6)


# ---------------------------------------------------------------- LightGBM's pred_contrib


@pytest.mark.parametrize("params", [dict(num_leaves=15, max_depth=-1), dict(num_leaves=31, max_depth=4),
                                    dict(num_leaves=2)], ids=["leafwise", "depth-4", "stumps"])
def test_equal_to_lightgbm_pred_contrib(params):
    lightgbm = pytest.importorskip("lightgbm")
    X, y, qid = make_data(3, n_queries=40, n_features=6, relevance="mixed", nan_fraction=0.1)
    X[:, 5] = np.round(np.nan_to_num(X[:, 5]), 0)  # no NaN in training: LightGBM's missing type "None" here
    booster = lightgbm.LGBMRanker(n_estimators=15, min_child_samples=5, verbose=-1, random_state=0,
                                  **params).fit(X, y, group=np.bincount(qid)).booster_
    model = import_model(booster)
    X_test, _, _ = make_data(4, n_queries=10, n_features=6, nan_fraction=0.2)  # NaN in every feature
    np.testing.assert_allclose(model.predict(X_test), booster.predict(X_test), rtol=0, atol=1e-9)
    np.testing.assert_allclose(model.predict_contributions(X_test), booster.predict(X_test, pred_contrib=True),
                               rtol=0, atol=1e-6)


# ---------------------------------------------------------------- explain_pair


@pytest.fixture(scope="module")
def query():
    X, y, qid = make_data(5, n_queries=25, n_features=4, relevance="mixed", nan_fraction=0.05)
    model = fit(X, y, qid, n_estimators=10, max_leaf_nodes=8)
    return model, X[qid == 3]


def test_pair_defaults_to_the_top_two_documents(query):
    model, X = query
    explanation = explain_pair(model, X)
    assert isinstance(explanation, PairExplanation)
    order = np.argsort(-model.predict(X), kind="stable")
    assert (explanation.upper, explanation.lower) == (order[0], order[1])
    assert explanation.score_difference >= 0
    assert explanation.feature_names == ("x0", "x1", "x2", "x3")


def test_pair_differences_sum_to_the_score_difference(query):
    model, X = query
    scores = model.predict(X)
    contributions = model.predict_contributions(X)
    explanation = explain_pair(model, X, upper=4, lower=1, feature_names=["a", "b", "c", "d"])
    assert explanation.upper_score == scores[4] and explanation.lower_score == scores[1]
    assert explanation.contribution_difference.sum() == pytest.approx(scores[4] - scores[1], abs=1e-9)
    np.testing.assert_array_equal(explanation.contribution_difference, contributions[4, :-1] - contributions[1, :-1])
    top = explanation.top_features(2)
    assert len(top) == 2 and top[0][0] in "abcd"
    assert abs(top[0][1]) == np.abs(explanation.contribution_difference).max()
    assert len(explanation.top_features(10)) == 4
    with pytest.raises(ValueError):
        explanation.contribution_difference[0] = 1.0  # read-only


def test_pair_with_one_side_given_compares_neighbours_in_the_ranking(query):
    model, X = query
    order = list(np.argsort(-model.predict(X), kind="stable"))
    third = int(order[2])
    assert explain_pair(model, X, upper=third).lower == order[3]
    assert explain_pair(model, X, lower=third).upper == order[1]
    with pytest.raises(ValueError, match="last-ranked"):
        explain_pair(model, X, upper=int(order[-1]))
    with pytest.raises(ValueError, match="top-ranked"):
        explain_pair(model, X, lower=int(order[0]))


def test_pair_rejects_bad_input(query):
    model, X = query
    n = X.shape[0]
    with pytest.raises(ValueError, match=f"rows 0 to {n - 1}"):
        explain_pair(model, X, upper=n)
    with pytest.raises(ValueError, match="not a row"):
        explain_pair(model, X, lower=-1)
    with pytest.raises(ValueError, match="an int"):
        explain_pair(model, X, upper=1.5)
    with pytest.raises(ValueError, match="two different"):
        explain_pair(model, X, upper=2, lower=2)
    with pytest.raises(ValueError, match="1 row"):
        explain_pair(model, X[:1])
    with pytest.raises(ValueError, match="2 names"):
        explain_pair(model, X, feature_names=["a", "b"])
    with pytest.raises(TypeError, match="LambdaMARTRanker"):
        explain_pair(object(), X)
    with pytest.raises(NotFittedError):
        explain_pair(LambdaMARTRanker(), X)
    with pytest.raises(ValueError, match="positive integer"):
        explain_pair(model, X).top_features(0)


def test_pair_uses_the_dataframe_column_names():
    pd = pytest.importorskip("pandas")
    X, y, qid = make_data(6, n_queries=15, n_features=3)
    frame = pd.DataFrame(X, columns=["bm25", "pagerank", "clicks"])
    model = fit(frame, y, qid)
    explanation = explain_pair(model, frame[qid == 0])
    assert explanation.feature_names == ("bm25", "pagerank", "clicks")


# ---------------------------------------------------------------- the benchmark script


def test_benchmark_script_runs_and_the_libraries_agree():
    """benchmarks/contributions.py on a tiny model: it runs, reports every library, and their values agree (nothing
    here looks at a timing)."""
    pytest.importorskip("shap")
    pytest.importorskip("lightgbm")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "contributions.py"
    proc = subprocess.run([sys.executable, str(script), "--rows", "100", "--repeat", "1", "--train-queries", "6",
                           "--trees", "3", "--threads", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.startswith("| ")][1:]  # after the header
    names = [cells[1].strip() for cells in rows]
    for name in ("lambdamart predict_contributions, 1 thread(s)", "shap TreeExplainer(tree_path_dependent)"
                 ".shap_values, 1 thread", "lightgbm predict(pred_contrib=True), 1 thread(s)"):
        assert name in names
    differences = [float(cells[5]) for cells in rows if len(cells) > 5 and cells[5].strip()]
    assert len(differences) == 4 and max(differences) < 1e-9


# ---------------------------------------------------------------- our models, explained by the other libraries


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A model with NaN in its data, its training rows as float32 (XGBoost routes float32 values exactly as we do)
    and the model exported to LightGBM's and XGBoost's formats."""
    X, y, qid = make_data(6, n_queries=40, n_features=6, relevance="mixed", nan_fraction=0.15)
    X = X.astype(np.float32)
    model = fit(X, y, qid, n_estimators=30, max_leaf_nodes=10, learning_rate=0.1)
    folder = tmp_path_factory.mktemp("exported")
    model.export_model(folder / "model.txt", format="lightgbm")
    model.export_model(folder / "model.json", format="xgboost")
    return model, X, folder


def test_lightgbm_pred_contrib_on_the_exported_model_equals_ours(exported):
    lightgbm = pytest.importorskip("lightgbm")
    model, X, folder = exported
    booster = lightgbm.Booster(model_file=str(folder / "model.txt"))
    np.testing.assert_allclose(booster.predict(X, pred_contrib=True), model.predict_contributions(X),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("file", ["model.txt", "model.json"])
def test_shap_on_the_exported_model_equals_ours(exported, file):
    shap = pytest.importorskip("shap")
    model, X, folder = exported
    if file == "model.txt":
        booster = pytest.importorskip("lightgbm").Booster(model_file=str(folder / file))
    else:
        booster = pytest.importorskip("xgboost").Booster()
        booster.load_model(str(folder / file))
    explainer = shap.TreeExplainer(booster, feature_perturbation="tree_path_dependent")
    ours = model.predict_contributions(X)
    # XGBoost keeps leaf values and covers in float32; LightGBM in float64.
    tolerance = 1e-6 if file == "model.json" else 1e-9
    np.testing.assert_allclose(explainer.shap_values(X), ours[:, :-1], rtol=0, atol=tolerance)
    np.testing.assert_allclose(np.ravel(explainer.expected_value)[0], ours[0, -1], rtol=0, atol=tolerance)
