"""notebooks/quickstart.ipynb: committed with the outputs of one clean top-to-bottom run (checked with the standard
library, so always), and executed with nbclient when the ``notebook`` extra is installed (skipped otherwise)."""

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


def code_cells(notebook):
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_committed_with_the_outputs_of_a_clean_run():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    cells = code_cells(notebook)
    # Executed once, top to bottom, in a fresh kernel: execution counts 1, 2, 3, ...
    assert [cell["execution_count"] for cell in cells] == list(range(1, len(cells) + 1))
    outputs = [output for cell in cells for output in cell["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"], "the committed run printed warnings or errors"
    assert any("image/png" in o.get("data", {}) for o in outputs), "the plots are missing"
    text = json.dumps(notebook)
    for required in ("eval_set", "train_score_", "validation_score_", "feature_importances_",
                     "HistGradientBoostingRegressor", "GridSearchCV", "ndcg_scorer", "enable_metadata_routing",
                     "save_model", "load_model", "explain_pair", "precision_recall_curve"):
        assert required in text, required


@pytest.mark.slow  # 20 s to a minute: a kernel runs the whole notebook
def test_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    outputs = [output for cell in code_cells(notebook) for output in cell["outputs"]]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any("identical predictions" in o.get("text", "") for o in outputs)
