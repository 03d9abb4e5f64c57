#!/usr/bin/env python3
"""clang's thread-safety analysis over the translation units that use
common/mutex.h's annotations (SWEPT_GUARDED_BY, SWEPT_REQUIRES, ...).

The project builds with g++, where the annotations are empty. This check
re-parses, with clang++ -fsyntax-only, every C++ source that includes
common/mutex.h directly or through a project header, with the flags CMake
recorded for it in compile_commands.json, and fails on any -Wthread-safety
warning. Parsing only (no code generation) keeps it to seconds per file.

Usage: thread_safety.py BUILD_DIR [SOURCE_DIR]
Exit codes: 0 clean; 1 a thread-safety warning (or clang error); 2 bad use
(no compile_commands.json, no clang++).
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

HEADER = "common/mutex.h"
# g++-only options clang does not take; the analysis does not need them.
DROP_PREFIXES = ("-fno-semantic-interposition", "-fcf-protection", "-fmodules-ts", "-fconcepts-diagnostics-depth",
                 "-Werror", "-fdiagnostics-color")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def users_of(source_dir):
    """Project files (relative paths) that include HEADER, directly or not."""
    texts = {}
    for root, dirs, files in os.walk(source_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build") and d not in ("data",)]
        for f in files:
            if f.endswith((".h", ".cpp", ".cc")):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, source_dir)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    texts[rel] = set(INCLUDE_RE.findall(fh.read()))
    users = {HEADER}
    changed = True
    while changed:
        changed = False
        for rel, includes in texts.items():
            if rel not in users and includes & users:
                users.add(rel)
                changed = True
    return {u for u in users if u.endswith((".cpp", ".cc"))}


def clang_command(entry, clang):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clang]
    skip_next = False
    for i, a in enumerate(args):
        if i == 0:
            continue
        if skip_next:
            skip_next = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip_next = True
            continue
        # CMake's precompiled header (cmake/SweptBuildSpeed.cmake): "-include
        # .../cmake_pch.hxx" makes clang load the .gch beside it, which is
        # GCC's and not clang's format. Every unit includes what it uses, so
        # the header is dropped, not replaced.
        if a == "-include" and i + 1 < len(args) and args[i + 1].endswith("cmake_pch.hxx"):
            skip_next = True
            continue
        if a == "-Winvalid-pch":
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith(DROP_PREFIXES):
            continue
        out.append(a)
    out += ["-fsyntax-only", "-Wno-unknown-warning-option", "-Wthread-safety", "-Werror=thread-safety"]
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build = sys.argv[1]
    source = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(db_path):
        print(f"thread_safety: {db_path} not found: configure the build with CMake first", file=sys.stderr)
        return 2
    clang = shutil.which("clang++")
    if not clang:
        print("thread_safety: clang++ not found: apt-get install clang (scripts/install-deps.sh does)", file=sys.stderr)
        return 2
    wanted = users_of(source)
    with open(db_path, encoding="utf-8") as fh:
        entries = json.load(fh)
    jobs = []
    seen = set()
    for e in entries:
        rel = os.path.relpath(os.path.join(e["directory"], e["file"]), source)
        if rel in wanted and rel not in seen:
            seen.add(rel)
            jobs.append((rel, e))
    if not jobs:
        print(f"thread_safety: no translation unit of {db_path} uses {HEADER}", file=sys.stderr)
        return 1

    def check(job):
        rel, e = job
        r = subprocess.run(clang_command(e, clang), cwd=e["directory"], capture_output=True, text=True)
        return rel, r.returncode, r.stderr

    failed = 0
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for rel, rc, err in pool.map(check, sorted(jobs)):
            if rc != 0:
                failed += 1
                print(f"FAIL {rel}\n{err}", file=sys.stderr)
            else:
                print(f"ok   {rel}")
    print(f"thread_safety: {len(jobs) - failed}/{len(jobs)} translation units clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
