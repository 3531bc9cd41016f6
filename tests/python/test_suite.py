# SPDX-License-Identifier: Apache-2.0
# The test suite's own rule: a test skipped for a missing package fails
# under tools/test (PODFEED_TEST_NO_MISSING=1), and only says so elsewhere.
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def test_a_missing_package_fails_under_tools_test(tmp_path):
    (tmp_path / "test_needs.py").write_text(
        "import pytest\n"
        "pytest.importorskip('podfeed_no_such_package')\n\n"
        "def test_x():\n    pass\n")
    (tmp_path / "test_fine.py").write_text("def test_y():\n    pass\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
           "-p", "conftest", "--rootdir", str(tmp_path), str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), os.environ.get("PYTHONPATH", "")]))
    env.pop("PODFEED_TEST_NO_MISSING", None)
    plain = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "podfeed_no_such_package" in plain.stdout  # -rs says why
    env["PODFEED_TEST_NO_MISSING"] = "1"
    strict = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "skipped for a missing package" in strict.stdout
    assert "test_needs.py" in strict.stdout and "test_fine" not in strict.stdout
