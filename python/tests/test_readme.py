"""The README's Python example runs as written (from the repository root)."""

import os
import re
import subprocess
import sys

from conftest import REPO


def test_readme_python_example():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=dict(os.environ)
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
