"""The README cannot drift from the code: its two commands come first and CI runs the second verbatim, every
```python block runs, and every ```bash block is either run (the command-line examples) or listed here with the
reason it is not."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INSTALL = ['python -m pip install . && lambdamart demo', 'python -m pip install -e ".[test]" && python -m pytest']

# Sections whose bash blocks are not run here, and why. A bash block in any other section is run as a script.
NOT_RUN = {
    "lambdamart": "the install commands: CI runs the second (.ci/run), the demo is tested in tests/test_cli.py",
    "Benchmarks": "minutes of LightGBM/XGBoost runs; tests/test_benchmarks.py runs compare.py on tiny data",
    "Notebook": "installs packages; tests/test_notebook.py executes the notebook when they are installed",
    "Training on a Dask cluster": "starts a scheduler and workers that run until stopped; the section's python "
                                  "blocks run the same code on a LocalCluster",
}


def blocks():
    """(section heading, language, code) of every fenced block, in README order."""
    section, language, code, found = None, None, None, []
    for line in README.read_text(encoding="utf-8").splitlines(keepends=True):
        if code is None and line.startswith("```"):
            language, code = line[3:].strip(), []
        elif code is not None and line.rstrip() == "```":
            found.append((section, language, "".join(code)))
            code = None
        elif code is not None:
            code.append(line)
        elif line.startswith("#"):
            section = line.lstrip("#").strip()
    assert code is None, "README.md ends inside a code block"
    return found


def test_the_two_commands_come_first_and_ci_runs_the_second():
    text = README.read_text(encoding="utf-8")
    first = blocks()[0]
    assert first == ("lambdamart", "bash", "\n".join(INSTALL) + "\n")
    assert text.startswith("# lambdamart\n\n```bash\n" + "\n".join(INSTALL) + "\n```\n")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert INSTALL[1] in ci


def test_every_block_is_python_or_bash_and_every_bash_block_is_classified():
    sections = {title for title, _, _ in blocks()}
    for name in [*NOT_RUN, *SLOW]:
        assert name in sections, f"NOT_RUN or SLOW names a README section that no longer exists: {name}"
    for section, language, _code in blocks():
        assert language in ("python", "bash"), (section, language)


PYTHON = [(section, code) for section, language, code in blocks() if language == "python"]
# Sections whose python blocks take ~10 s or more: they start a LocalCluster of worker processes.
SLOW = {"Training on a Dask cluster", "Searching hyper-parameters on a cluster"}


@pytest.mark.parametrize("section,code", [pytest.param(s, c, marks=[pytest.mark.slow] if s in SLOW else [])
                                          for s, c in PYTHON], ids=[f"{i}-{s}" for i, (s, _) in enumerate(PYTHON)])
def test_python_block_runs(section, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks may write files (the command-line section writes LETOR files)
    exec(compile(code, f"README.md [{section}]", "exec"), {"__name__": "__main__"})


BASH = [(section, code) for section, language, code in blocks() if language == "bash" and section not in NOT_RUN]


@pytest.mark.slow  # 8 to 16 s: the command-line examples train, predict and evaluate in subprocesses
@pytest.mark.parametrize("section,code", BASH, ids=[f"{i}-{s}" for i, (s, _) in enumerate(BASH)])
def test_bash_block_runs(section, code, tmp_path, monkeypatch):
    """Run the block with ``bash -e`` after the python blocks of its section (which write its input files)."""
    monkeypatch.chdir(tmp_path)
    for block_section, python in PYTHON:
        if block_section == section:
            exec(compile(python, f"README.md [{section}]", "exec"), {"__name__": "__main__"})
    env = dict(os.environ)
    # The console scripts of the interpreter running the tests come first.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr


def test_the_command_line_examples_are_run():
    """The README's command-line examples are among the blocks this file runs."""
    commands = "\n".join(code for _, code in BASH)
    for command in ("lambdamart train", "lambdamart predict", "lambdamart evaluate"):
        assert command in commands
