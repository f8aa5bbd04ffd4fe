"""Makes `import infiniop` work from a source checkout: the package lives in <repo>/python.

The library itself is found by the package ($INFINIOP_LIBRARY, else <repo>/build*/).
"""

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO_ROOT / "python"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


def pytest_report_header(config):
    import infiniop

    try:
        lib = infiniop.get_library()
    except infiniop.LibraryNotFoundError as error:
        return f"infiniop: library not loaded: {error}"
    return f"infiniop: {lib.infiniop_path} (cpu ISA {infiniop.cpu_isa_name()})"
