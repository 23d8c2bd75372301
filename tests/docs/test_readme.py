"""The README's Python examples run as written (in one process, in order, from a temp folder)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_examples_run(tmp_path):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    script = tmp_path / "readme_examples.py"  # loop kernels need a real source file
    script.write_text("import numpy as np, polyc as pc\n" + "\n".join(blocks))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is illegal: loop 'k' carries the flow dependence S1 -> S1 on C" in proc.stdout
    assert "0 mismatches" in proc.stdout
