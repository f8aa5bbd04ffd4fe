#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs' samples and citations stay true (ctest: docs.samples).

    python3 examples/check_docs.py [REPO_ROOT]

Over README.md, bench/README.md and docs/*.md:

1. Every ```c block is a verbatim excerpt of an example (or of a public header): its lines, as
   they are, are consecutive lines of the file under examples/ (or include/) that the text just
   above the block names (the last such path in the 6 lines before the opening fence, e.g.
   "from examples/c/swiglu.c"). The examples are compiled and run by their own tests, so a quoted
   sample compiles and works; a quoted declaration is the header's.
2. Every repository path cited in a link target or in backticks outside code blocks exists:
   links relative to the page (as a renderer resolves them), backticked paths relative to the
   page or to the repository root. A backticked span counts as a path when it contains a '/'
   and either ends in a file extension or starts with one of the repository's top-level names
   (or '..'), or when it is a bare name ending in '.md'. Not checked: URLs, spans with spaces,
   placeholders (<name>), environment or home paths ($X/..., ~/...) and build outputs
   (build/...). A glob (*) must match something.

Exit status 0 when all holds; otherwise each problem is printed as FILE:LINE: message.
"""
import glob
import os
import re
import sys

DOCS = ["README.md", "bench/README.md", "docs/*.md"]
EXTENSION = re.compile(r"\.(md|h|c|cc|cpp|py|sh|cl|json|txt|cmake|map|in|csv|svg|yml|toml)$")
FENCE = re.compile(r"^(\s*)```(.*)$")


def doc_files(root):
    files = []
    for pattern in DOCS:
        files += sorted(glob.glob(os.path.join(root, pattern)))
    return files


def blocks(lines):
    """(language, first line number of the body (1-based), body lines) of each fenced block,
    and the set of line numbers inside fences."""
    found, inside, start, language, body = [], set(), None, None, []
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if start is None and match:
            start, language, body = number, match.group(2).strip(), []
            inside.add(number)
        elif start is not None:
            inside.add(number)
            if line.strip() == "```":
                found.append((language, start + 1, body))
                start = None
            else:
                body.append(line)
    return found, inside


def is_excerpt(body, source_lines):
    """Whether body is a run of consecutive lines of source_lines (trailing blanks ignored)."""
    body = [line.rstrip() for line in body]
    source = [line.rstrip() for line in source_lines]
    if not body:
        return False
    for start in range(len(source) - len(body) + 1):
        if source[start:start + len(body)] == body:
            return True
    return False


def check_samples(root, path, lines, problems):
    found, _ = blocks(lines)
    for language, first, body in found:
        if language != "c":
            continue
        fence = first - 1
        context = "\n".join(lines[max(0, fence - 7):fence - 1])
        named = re.findall(r"(?:examples|include)/[\w./-]+\.(?:c|h|py)\b", context)
        where = f"{os.path.relpath(path, root)}:{fence}"
        if not named:
            problems.append(f"{where}: a C sample must name the example (or header) it quotes "
                            "(e.g. 'from examples/c/gelu.c') in the 6 lines above it")
            continue
        source = os.path.join(root, named[-1])
        if not os.path.isfile(source):
            problems.append(f"{where}: {named[-1]} does not exist")
            continue
        with open(source, encoding="utf-8") as handle:
            if not is_excerpt(body, handle.read().splitlines()):
                problems.append(f"{where}: the sample is not a verbatim excerpt of {named[-1]}")


def cited_paths(lines, inside):
    """(line number, text, is_link) of every link target and backticked span outside fences."""
    for number, line in enumerate(lines, 1):
        if number in inside:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            yield number, target, True
        for span in re.findall(r"`([^`]+)`", line):
            yield number, span, False


def looks_like_path(span, top_level):
    if " " in span or not span or span[0] in "$~<-" or "<" in span or "://" in span:
        return False
    if not re.fullmatch(r"[\w.*/+-]+", span):
        return False
    if span.startswith("build/") or span.startswith("build-"):
        return False
    if "/" not in span:
        return span.endswith(".md")
    first = span.lstrip("./").split("/")[0] if not span.startswith("..") else ".."
    return bool(EXTENSION.search(span.rstrip("/"))) or first in top_level or first == ".."


def exists(candidate):
    return bool(glob.glob(candidate)) if "*" in candidate else os.path.exists(candidate)


def check_paths(root, path, lines, problems):
    _, inside = blocks(lines)
    here = os.path.dirname(path)
    top_level = {name for name in os.listdir(root) if not name.startswith(".git")}
    for number, text, is_link in cited_paths(lines, inside):
        target = text.split("#")[0]
        where = f"{os.path.relpath(path, root)}:{number}"
        if is_link:
            if not target or re.match(r"^[a-z]+:", target):
                continue  # an anchor on this page, or a URL
            if not exists(os.path.normpath(os.path.join(here, target))):
                problems.append(f"{where}: link target {text} does not exist")
            continue
        if not looks_like_path(target, top_level):
            continue
        candidates = [os.path.normpath(os.path.join(here, target)),
                      os.path.normpath(os.path.join(root, target))]
        inside_repo = [c for c in candidates
                       if os.path.commonpath([os.path.abspath(root), os.path.abspath(c)])
                       == os.path.abspath(root)]
        if not any(exists(c) for c in inside_repo):
            problems.append(f"{where}: `{text}` is not a path in this repository")


def main(root):
    problems = []
    files = doc_files(root)
    for path in files:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        check_samples(root, path, lines, problems)
        check_paths(root, path, lines, problems)
    for problem in problems:
        print(problem)
    print(f"{len(files)} documents, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                                  os.path.join(os.path.dirname(__file__), ".."))))
