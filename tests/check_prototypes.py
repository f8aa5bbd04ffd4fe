# SPDX-License-Identifier: Apache-2.0
"""The Python binding's ctypes prototypes (python/infiniop/_library.py, _PROTOTYPES) against the
C headers (include/infinicore.h, include/infiniop.h, include/infiniop/**/*.h).

Every `__INFINI_C <return type> name(<parameters>);` declaration is read from the headers, each C
type reduced to its kind: an integer of a width and signedness (an enum is a C int), float,
double, bool, char, a struct, or a pointer to one of these (const dropped; a handle or descriptor
typedef is a pointer to a struct). Each ctypes type of _library.py is reduced the same way
(c_void_p: a pointer to anything; c_char_p: a pointer to char; POINTER(T): a pointer to T's kind;
a ctypes.Structure: a struct, its fields checked against the C struct of the same layout). Then:
every declared function must have a prototype and every prototype a declaration, with the same
return kind, the same number of parameters and the same kind for each; the DeviceInfoStruct's
fields must match infiniopDeviceInfo_t's. Prints one line per difference; exit status 1 if any.

_library.py is imported without its package's __init__ (which imports the operators) and without
loading the shared library (it is loaded on first use only), so this needs only the standard
library and the source tree.

Usage: check_prototypes.py <include folder> <path of python/infiniop/_library.py>
"""

import ctypes
import importlib
import re
import sys
import types
from pathlib import Path

# Functions the headers declare that the binding deliberately leaves out, each with its reason.
# (Empty today: the binding declares the whole C API.)
NOT_BOUND = {
}

# The C scalar types the headers use: (kind, size in bytes). Kinds: "int" (signed), "uint",
# "float" (any size: float 4, double 8), "bool", "char", "void".
C_SCALARS = {
    "void": ("void", 0),
    "char": ("char", 1),
    "bool": ("bool", 1),
    "_Bool": ("bool", 1),
    "int": ("int", 4),
    "unsigned": ("uint", 4),
    "int32_t": ("int", 4),
    "uint32_t": ("uint", 4),
    "int64_t": ("int", 8),
    "uint64_t": ("uint", 8),
    "size_t": ("uint", ctypes.sizeof(ctypes.c_size_t)),
    "ptrdiff_t": ("int", ctypes.sizeof(ctypes.c_ssize_t)),
    "float": ("float", 4),
    "double": ("float", 8),
}

# ctypes' type codes (the _type_ of a simple type) to kinds; the size is ctypes.sizeof.
CTYPES_CODES = {
    "b": "int", "h": "int", "i": "int", "l": "int", "q": "int",
    "B": "uint", "H": "uint", "I": "uint", "L": "uint", "Q": "uint",
    "f": "float", "d": "float", "?": "bool", "c": "char",
}


def describe(kind):
    """A kind as a readable C-like string: ('int', 8) -> 'int64', ('ptr', k) -> 'k *'."""
    if kind is None:
        return "void"  # c_void_p: a pointer to anything
    if kind[0] == "ptr":
        return describe(kind[1]) + " *"
    if kind[0] in ("int", "uint"):
        return f"{kind[0]}{8 * kind[1]}"
    if kind[0] == "float":
        return "float" if kind[1] == 4 else "double"
    if kind[0] == "struct":
        return f"struct {kind[1]}"
    return kind[0]


# --------------------------------------------------------------------------------------------
# The headers

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def read_headers(include):
    """{function: (return type, [parameter types])} as C text, and the typedefs: {name: kind}
    (a struct pointer, an enum, a struct with its field types)."""
    texts = {}
    for path in [include / "infinicore.h", include / "infiniop.h",
                 *sorted((include / "infiniop").rglob("*.h"))]:
        texts[path] = strip_comments(path.read_text())
    typedefs, structs = {}, {}
    for text in texts.values():
        # typedef struct InfiniopHandle *infiniopHandle_t;
        for tag, name in re.findall(r"typedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;", text):
            typedefs[name] = ("ptr", ("struct", tag))
        # typedef enum { ... } infiniDevice_t;  (a C enum has the size of int here)
        for name in re.findall(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;", text):
            typedefs[name] = C_SCALARS["int"]
        # typedef struct { const char *name; int count; ... } infiniopDeviceInfo_t;
        for body, name in re.findall(r"typedef\s+struct\s*\w*\s*\{([^}]*)\}\s*(\w+)\s*;", text):
            typedefs[name] = ("struct", name)
            structs[name] = [field.strip() for field in body.split(";") if field.strip()]
    functions = {}
    declaration = re.compile(r"__INFINI_C\s+([^;{}()]*?)\b(\w+)\s*\(([^)]*)\)\s*;")
    for path, text in texts.items():
        for restype, name, params in declaration.findall(text):
            params = " ".join(params.split())
            params = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
            if name in functions:
                print(f"{path.name}: {name} declared twice")
            functions[name] = (" ".join(restype.split()), params)
    return functions, typedefs, structs


def c_kind(declaration, typedefs, named=True):
    """The kind of a C type, or of a parameter / field declaration when `named` (its last word
    is then the name, unless the declaration is only a type, e.g. `int` or `const void *`)."""
    text = re.sub(r"\bconst\b", " ", declaration)
    stars = text.count("*")
    words = text.replace("*", " ").split()
    if named and len(words) > 1:
        words = words[:-1]  # the parameter's name
    if words == ["unsigned", "int"]:
        words = ["unsigned"]
    if len(words) != 1:
        raise ValueError(f"cannot read the C type of '{declaration}'")
    word = words[0]
    if word in C_SCALARS:
        kind = C_SCALARS[word]
    elif word in typedefs:
        kind = typedefs[word]
    else:
        raise ValueError(f"unknown C type '{word}' in '{declaration}'")
    for _ in range(stars):
        kind = ("ptr", kind)
    return kind


# --------------------------------------------------------------------------------------------
# The binding

def load_binding(library_py):
    """Imports _library.py as infiniop._library, without running the package's __init__.py
    (a bare package module stands for it, so that `from .enums import` finds the real files)."""
    sys.dont_write_bytecode = True  # nothing written into the source tree
    package_dir = Path(library_py).resolve().parent
    package = types.ModuleType(package_dir.name)
    package.__path__ = [str(package_dir)]
    sys.modules[package_dir.name] = package
    return importlib.import_module(f"{package_dir.name}.{Path(library_py).stem}")


def ctypes_kind(ctype, structs_seen):
    """The kind of a ctypes type: c_void_p is a pointer to anything (None)."""
    if ctype is None:
        return ("void", 0)
    if ctype is ctypes.c_void_p:
        return ("ptr", None)
    if ctype is ctypes.c_char_p:
        return ("ptr", ("char", 1))
    if isinstance(ctype, type) and issubclass(ctype, ctypes._Pointer):
        return ("ptr", ctypes_kind(ctype._type_, structs_seen))
    if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
        structs_seen.add(ctype)
        return ("struct", ctype.__name__)
    code = getattr(ctype, "_type_", None)
    if isinstance(code, str) and code in CTYPES_CODES:
        return (CTYPES_CODES[code], ctypes.sizeof(ctype))
    raise ValueError(f"cannot read the ctypes type {ctype!r}")


def same(c, py):
    """Whether a C kind is what a ctypes kind passes: c_void_p passes any pointer, a Structure
    passes the C struct it mirrors (its fields compared separately)."""
    if py is None:
        return True
    if c[0] == "ptr" and py[0] == "ptr":
        return same(c[1], py[1])
    if c[0] == "struct" and py[0] == "struct":
        return True
    return c == py


# --------------------------------------------------------------------------------------------

def compare(include, library_py):
    """The differences, one line each."""
    functions, typedefs, structs = read_headers(include)
    binding = load_binding(library_py)
    prototypes = binding._PROTOTYPES
    problems = []
    if not functions:
        problems.append(f"no __INFINI_C declarations found under {include}")
    for name in sorted(set(functions) - set(prototypes) - set(NOT_BOUND)):
        problems.append(f"{name}: declared in the headers, no prototype in _library.py")
    for name in sorted(set(prototypes) - set(functions)):
        problems.append(f"{name}: a prototype in _library.py, declared in no header")
    for name in sorted(set(NOT_BOUND) & set(prototypes)):
        problems.append(f"{name}: in NOT_BOUND, yet _library.py declares it")
    structs_seen = set()
    for name in sorted(set(functions) & set(prototypes)):
        (c_restype, c_params), (restype, argtypes) = functions[name], prototypes[name]
        c_ret = c_kind(c_restype, typedefs, named=False)
        py_ret = ctypes_kind(restype, structs_seen)
        if not same(c_ret, py_ret):
            problems.append(f"{name}: returns {describe(c_ret)} ({c_restype}), "
                            f"restype is {describe(py_ret)} ({restype.__name__})")
        if len(c_params) != len(argtypes):
            problems.append(f"{name}: {len(c_params)} parameters in the header, "
                            f"{len(argtypes)} argtypes")
            continue
        for index, (c_param, argtype) in enumerate(zip(c_params, argtypes)):
            c, py = c_kind(c_param, typedefs), ctypes_kind(argtype, structs_seen)
            if not same(c, py):
                problems.append(f"{name}: parameter {index} ({c_param}) is {describe(c)}, "
                                f"argtype is {describe(py)} ({argtype.__name__})")
    # The Structures the prototypes pass: their fields against the C struct of the same layout
    # (matched by the parameter they are passed as, e.g. infiniopDeviceInfo_t *info).
    for name in sorted(set(functions) & set(prototypes)):
        for c_param, argtype in zip(functions[name][1], prototypes[name][1]):
            py = ctypes_kind(argtype, set())
            c = c_kind(c_param, typedefs)
            while c[0] == "ptr" and py[0] == "ptr" and c[1] is not None and py[1] is not None:
                c, py, argtype = c[1], py[1], getattr(argtype, "_type_", argtype)
            if c[0] == "struct" and py[0] == "struct" and c[1] in structs:
                fields = structs[c[1]]
                if len(fields) != len(argtype._fields_):
                    problems.append(f"{argtype.__name__}: {len(argtype._fields_)} fields, "
                                    f"{c[1]} has {len(fields)}")
                    continue
                for field, (field_name, field_type) in zip(fields, argtype._fields_):
                    fc, fpy = c_kind(field, typedefs), ctypes_kind(field_type, set())
                    if not same(fc, fpy) or field.split()[-1].lstrip("*") != field_name:
                        problems.append(f"{argtype.__name__}.{field_name} "
                                        f"({describe(fpy)}) against {c[1]}'s '{field}'")
    return problems, len(set(functions) & set(prototypes))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    problems, checked = compare(Path(argv[1]), Path(argv[2]))
    for problem in dict.fromkeys(problems):
        print(problem)
    if problems:
        print(f"{len(problems)} difference(s) between {argv[2]} and the headers in {argv[1]}")
        return 1
    print(f"{checked} prototypes match the headers"
          + (f" ({len(NOT_BOUND)} functions deliberately unbound)" if NOT_BOUND else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
