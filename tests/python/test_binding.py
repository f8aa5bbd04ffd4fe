"""The binding itself: library loading, prototypes, enums, Handle, TensorDescriptor, the
GeluBackward descriptor class, argument checking, and staging through device memory."""

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

import infiniop
from infiniop import Device, DType, InfiniopError, Status, _library

REPO_ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = REPO_ROOT / "include"


# ----------------------------------------------------------------------------------------------
# Enums and prototypes against the headers

def header_enum(prefix):
    text = (INCLUDE_DIR / "infinicore.h").read_text()
    return {name: int(value) for name, value in re.findall(rf"\b{prefix}_(\w+)\s*=\s*(\d+)", text)}


@pytest.mark.parametrize("enum,prefix", [(Status, "INFINI_STATUS"), (DType, "INFINI_DTYPE"),
                                         (Device, "INFINI_DEVICE")])
def test_enums_match_header(enum, prefix):
    from_header = header_enum(prefix)
    assert from_header, f"no {prefix}_* values found in infinicore.h"
    assert {m.name: m.value for m in enum} == from_header


def declared_functions(headers):
    declared = set()
    for header in headers:
        # `__INFINI_C <return type> name(`, the return type possibly a pointer.
        declared |= set(re.findall(r"__INFINI_C\s+[\w\s\*]*?\b(\w+)\s*\(", header.read_text()))
    return declared


def test_prototypes_match_headers():
    """Every core function has a prototype, every prototype is declared in a header, and an
    operator is bound whole or not at all. (Operators added to the C library later need not be
    bound yet.)"""
    bound = set(_library.EXPORTED_FUNCTIONS)
    core = declared_functions([INCLUDE_DIR / "infinicore.h", *INCLUDE_DIR.glob("infiniop/*.h")])
    assert core, "no __INFINI_C declarations found"
    assert core <= bound
    assert bound <= declared_functions(INCLUDE_DIR.rglob("*.h"))
    assert "infiniopGeluBackward" in bound
    for header in INCLUDE_DIR.glob("infiniop/ops/*.h"):
        functions = declared_functions([header])
        assert not (functions & bound) or functions <= bound, f"{header.name} is partly bound"
