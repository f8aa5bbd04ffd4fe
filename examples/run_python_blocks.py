#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every ```python block of the docs runs as written (ctest: docs.python_blocks).

    python examples/run_python_blocks.py [REPO_ROOT]

Over README.md, bench/README.md and docs/*.md, each block is run on its own by this Python in a
fresh process (so it must define what it uses; the package and library come from the
environment, as for the Python suite), with the cpu device. Exit status 0 when every block runs;
otherwise each failure is printed as FILE:LINE: the last line of its error.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

DOCS = ["README.md", "bench/README.md", "docs/*.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def main(root):
    failures = runs = 0
    with tempfile.TemporaryDirectory() as work:
        for pattern in DOCS:
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                text = open(path, encoding="utf-8").read()
                for match in BLOCK.finditer(text):
                    line = text.count("\n", 0, match.start()) + 1
                    script = os.path.join(work, "block.py")
                    with open(script, "w", encoding="utf-8") as out:
                        out.write(match.group(1))
                    result = subprocess.run([sys.executable, script], cwd=work,
                                            capture_output=True, text=True, timeout=300)
                    runs += 1
                    if result.returncode != 0:
                        failures += 1
                        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
                        print(f"{os.path.relpath(path, root)}:{line}: {last}")
    print(f"{runs - failures} of {runs} python blocks ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
