#!/usr/bin/env python3
"""The house's shape, checked (issue 24): rooms a newcomer can name.

What it holds to, over the product's sources (tests, fuzz targets, testdata
and benchmarks aside):
  - no source file (C++, CUDA, JavaScript) of 700 lines or more;
  - no C++/CUDA function body longer than 120 lines;
  - every top-level folder has a README.md with a table of its files, one
    line per file (a line of the form "| `name` | what it does |");
  - the trial lifecycle does not name the sweep runner: data flows one way,
    lifecycle -> events -> runner (scheduler/README.md).

Function bodies are found by a small scanner, not a compiler: comments,
string and character literals are blanked, then every '{' at namespace or
class level that follows a ')' (with qualifiers such as const, override,
noexcept or a trailing return type between) opens a function; its matching
'}' closes it. Lambdas and blocks inside a body count toward their
enclosing function, which is what a reader sees.

Usage: house_shape.py [SOURCE_DIR]
Exit codes: 0 the house holds; 1 something does not, each printed as
path[:line]: what, and what to do; 2 bad use.
"""
import os
import re
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120
SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh", ".js")
CXX_EXT = (".cpp", ".h", ".cu", ".cuh")
SKIP_DIRS = {"build", "build-emu", ".git", "testdata", "fuzz", "node_modules", "third_party"}
# Top-level folders that hold the product (each needs its README table).
FOLDERS = ("agent", "bench", "cli", "cmake", "common", "deploy", "docs", "examples", "scheduler", "scripts",
           "store", "sweeps", "tests", "trainer", "web")


def is_test(path):
    base = os.path.basename(path)
    return (base.endswith("_test.cpp") or base.endswith("_test.cu") or "_test_" in base or
            base.startswith("test_") or "/tests/" in "/" + path or "/testing/" in path or
            base in ("test_util.h", "test_support.h", "harness.h") or path.startswith("bench/") or
            "browser_test" in path)


def blank_comments_and_strings(text):
    """The text with comments, strings and char literals replaced by spaces
    (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


QUALIFIER_TAIL = re.compile(r"\)\s*(const|override|final|noexcept|mutable|volatile|&|&&|\s|->\s*[\w:<>,\s*&]+)*$")


def long_functions(path, text):
    """(line, length) of every function body longer than the limit."""
    code = blank_comments_and_strings(text)
    found = []
    # Scopes: 'ns' (namespace, class, struct, enum, extern, initializer) or 'fn'.
    stack = []
    fn_start = None
    i = 0
    line = 1
    last_cut = 0  # where the text before the current '{' starts (after ; { })
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[last_cut:i].strip()
            in_fn = any(kind == "fn" for kind, _ in stack)
            if in_fn:
                stack.append(("block", line))
            elif QUALIFIER_TAIL.search(head) and not re.match(r"^(namespace|class|struct|union|enum)\b", head) \
                    and not head.endswith("=") and "=" not in head.split("(")[0]:
                stack.append(("fn", line))
            elif re.search(r"\)\s*:\s*[\s\S]*\)$", head) or re.search(r"\)\s*:\s*[\s\S]*\}$", head):
                stack.append(("fn", line))  # a constructor with an initializer list
            else:
                stack.append(("ns", line))
            last_cut = i + 1
        elif c == "}":
            if stack:
                kind, start = stack.pop()
                if kind == "fn" and line - start - 1 > MAX_FUNCTION_LINES:
                    found.append((start, line - start - 1))
            last_cut = i + 1
        elif c == ";":
            if not any(kind == "fn" for kind, _ in stack):
                last_cut = i + 1
    return found


def has_file_table(readme_path):
    try:
        with open(readme_path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    return re.search(r"^\|\s*`[^`]+`\s*\|", text, re.M) is not None


def main():
    if len(sys.argv) > 2:
        print("usage: house_shape.py [SOURCE_DIR]", file=sys.stderr)
        return 2
    root = sys.argv[1] if len(sys.argv) == 2 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    if not os.path.isdir(os.path.join(root, "scheduler")):
        print(f"house_shape.py: {root} is not swept's source folder (no scheduler/)", file=sys.stderr)
        return 2
    problems = []
    for top in FOLDERS:
        top_path = os.path.join(root, top)
        if not os.path.isdir(top_path):
            continue
        if not has_file_table(os.path.join(top_path, "README.md")):
            problems.append(f"{top}/README.md: missing, or without a table of the folder's files "
                            "(one line per file: | `name` | what it does |): write it")
        for dirpath, dirnames, filenames in os.walk(top_path):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if not name.endswith(SOURCE_EXT) or is_test(rel):
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                lines = text.count("\n")
                if lines >= MAX_FILE_LINES:
                    problems.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES - 1}): split it along its jobs")
                if name.endswith(CXX_EXT):
                    for start, length in long_functions(rel, text):
                        problems.append(f"{rel}:{start}: a function of {length} lines (limit "
                                        f"{MAX_FUNCTION_LINES}): split it into named steps")
    for name in ("lifecycle.h", "lifecycle.cpp"):
        path = os.path.join(root, "scheduler", name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                code = blank_comments_and_strings(f.read())
            if re.search(r"\bSweepRunner\b|sweep_runner\.h", code):
                problems.append(f"scheduler/{name}: names the SweepRunner: the lifecycle hands events to its "
                                "outbox and the broker passes them on (scheduler/README.md)")
    for p in problems:
        print(p)
    if problems:
        print(f"house_shape.py: {len(problems)} problem(s)")
        return 1
    print("house_shape.py: the house holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
