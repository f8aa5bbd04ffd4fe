#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every ```python block of the docs runs as written (ctest: docs.python_blocks).

    python examples/run_python_blocks.py [REPO_ROOT]

Over README.md, bench/README.md and docs/*.md, each block is run on its own by this Python in a
fresh process (so it must define what it uses; the package and library come from the
environment, as for the Python suite), with the cpu device. Exit status 0 when every block runs;
otherwise each failure is printed as FILE:LINE: the last line of its error.

Each process is forked from this one after it has imported torch (where it can: POSIX), and runs
the block as __main__ in a namespace of its own: importing torch took most of each block's time
(24 blocks: 54 s, about 2 s each), the same work every time. The block's own imports still run
(torch's is then a lookup; infiniop's is not made in advance), and a name it uses without
defining is still an error. Without fork, or with INFINIOP_DOCS_BLOCKS_EXEC=1, each block runs
in a new interpreter, as before.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

DOCS = ["README.md", "bench/README.md", "docs/*.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
TIMEOUT = 300


def run_forked(script, work):
    """Runs script as __main__ in a child forked from this process: (exit status, stderr)."""
    import runpy
    import signal
    import traceback

    err_path = script + ".stderr"
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 0
        try:
            fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            out = os.open(os.devnull, os.O_WRONLY)
            os.dup2(out, 1)
            os.chdir(work)
            sys.argv = [script]
            signal.alarm(TIMEOUT)
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - reported as the block's error
            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wait_status):
        returncode = -os.WTERMSIG(wait_status)
    else:
        returncode = os.WEXITSTATUS(wait_status)
    with open(err_path, encoding="utf-8", errors="replace") as err:
        return returncode, err.read()


def run_exec(script, work):
    """Runs script in a new interpreter: (exit status, stderr)."""
    result = subprocess.run([sys.executable, script], cwd=work, capture_output=True, text=True,
                            timeout=TIMEOUT)
    return result.returncode, result.stderr


def main(root):
    failures = runs = 0
    run = run_exec
    if hasattr(os, "fork") and not os.environ.get("INFINIOP_DOCS_BLOCKS_EXEC"):
        import torch  # noqa: F401 - imported once, for every forked block

        run = run_forked
    with tempfile.TemporaryDirectory() as work:
        for pattern in DOCS:
            for path in sorted(glob.glob(os.path.join(root, pattern))):
                text = open(path, encoding="utf-8").read()
                for match in BLOCK.finditer(text):
                    line = text.count("\n", 0, match.start()) + 1
                    script = os.path.join(work, "block.py")
                    with open(script, "w", encoding="utf-8") as out:
                        out.write(match.group(1))
                    returncode, stderr = run(script, work)
                    runs += 1
                    if returncode != 0:
                        failures += 1
                        last = (stderr.strip().splitlines() or ["(no message)"])[-1]
                        print(f"{os.path.relpath(path, root)}:{line}: {last}")
    print(f"{runs - failures} of {runs} python blocks ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
