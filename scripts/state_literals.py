#!/usr/bin/env python3
"""No state name spelled as a literal outside common/states.h (issue 17).

The states of trials, sweeps and agents have their names in one table each,
common/states.h's X-macro lists SWEPT_TRIAL_STATES, SWEPT_SWEEP_STATES and
SWEPT_AGENT_STATES. Code names a state through the enum (name(TrialState::
kRunning), a bound TrialState), the database takes its CHECK lists from the
tables (store/state_checks.h), and the dashboard takes names and tones from
GET /api/info. This check reads the names from the tables and fails on any
of them written as a literal in the product's code:
  - C++, JavaScript, SQL, shell and Python: the name in quotes, 'lost' or
    "lost" (a SQL string, a JSON key, a JS comparison);
  - CSS: a class or custom property named after a state (.lost, --lost).
Comment lines are not code and are skipped, and so are tests (they check
behaviour and may spell names), testdata, docs and common/states.* itself.

Some JSON keys of the wire protocol and the HTTP API only happen to equal a
state's name (REGISTER's "running" list, a count of "completed" trials). Each
such line is listed in scripts/state_literals.allow, with why; an entry that
no longer matches a line fails the check too, so the list stays true.

Usage: state_literals.py [SOURCE_DIR]
Exit codes: 0 clean; 1 a literal state name (or a stale allow-list entry),
each printed as path:line with what to do; 2 bad use (no common/states.h).
"""
import os
import re
import sys

TABLES = ("SWEPT_TRIAL_STATES", "SWEPT_SWEEP_STATES", "SWEPT_AGENT_STATES")
CODE_EXTS = (".cpp", ".h", ".hpp", ".cc", ".in", ".js", ".mjs", ".sql", ".sh", ".py", ".html")
CSS_EXTS = (".css",)
SKIP_DIRS = {".git", "node_modules", "data", "testdata", "tests", "browser_test", "docs", "third_party"}
SKIP_FILES = {"common/states.h", "common/states.cpp", "scripts/state_literals.py"}
ALLOW = "scripts/state_literals.allow"


def state_names(states_h):
    """Every name in the three state tables of common/states.h."""
    names = set()
    lines = states_h.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"#define (\w+)\(X\)", line)
        if not m or m.group(1) not in TABLES:
            continue
        j = i
        while lines[j].rstrip().endswith("\\"):
            j += 1
            names.update(re.findall(r'X\(k\w+,\s*"([^"]+)"', lines[j]))
    return names


def is_test(rel):
    base = os.path.basename(rel)
    return re.search(r"_test\.[a-z]+$", base) or base.startswith("test_") or base == "test_support.h"


def is_comment(line, ext):
    s = line.lstrip()
    if ext in (".sh", ".py"):
        return s.startswith("#") and not s.startswith("#!")
    if ext == ".sql":
        return s.startswith("--")
    if ext == ".css":
        return s.startswith("/*") or s.startswith("*")
    return s.startswith("//") or s.startswith("/*") or s.startswith("* ") or s == "*"


def strip_css_comments(text):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def main():
    src = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    try:
        with open(os.path.join(src, "common/states.h"), encoding="utf-8") as f:
            names = state_names(f.read())
    except OSError as e:
        print(f"state_literals: cannot read common/states.h under {src}: {e}", file=sys.stderr)
        return 2
    if not names:
        print("state_literals: no state names found in common/states.h (has its table format changed?)",
              file=sys.stderr)
        return 2
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    quoted = re.compile(r"""(["'])(%s)\1""" % alt)
    css_name = re.compile(r"(?:\.|--)(%s)(?![\w-])" % alt)

    allowed = {}  # (path, stripped line) -> used?
    try:
        with open(os.path.join(src, ALLOW), encoding="utf-8") as f:
            for raw in f:
                raw = raw.rstrip("\n")
                if not raw.strip() or raw.lstrip().startswith("#"):
                    continue
                path, _, text = raw.partition("|")
                allowed[(path.strip(), text.strip())] = False
    except OSError:
        pass

    findings = []
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            rel = os.path.normpath(os.path.join(rel_root, name))
            ext = os.path.splitext(name)[1]
            if ext not in CODE_EXTS + CSS_EXTS or rel in SKIP_FILES or is_test(rel) or name.endswith(".min.js"):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                continue
            if ext in CSS_EXTS:
                text = strip_css_comments(text)
            pattern = css_name if ext in CSS_EXTS else quoted
            for n, line in enumerate(text.splitlines(), 1):
                if is_comment(line, ext):
                    continue
                hits = pattern.findall(line)
                if not hits:
                    continue
                key = (rel, line.strip())
                if key in allowed:
                    allowed[key] = True
                    continue
                spelled = sorted({h[1] if isinstance(h, tuple) else h for h in hits})
                findings.append(f"{rel}:{n}: state name {', '.join(spelled)} spelled as a literal: {line.strip()}")

    for (path, text), used in sorted(allowed.items()):
        if not used:
            findings.append(f"{ALLOW}: no line of {path} reads '{text}' any more: remove or update the entry")
    if findings:
        print("\n".join(findings))
        print(f"\n{len(findings)} problem(s). Name a state through common/states.h (name(TrialState::kRunning), a bound "
              "state, or /api/info in the dashboard); a JSON key that only happens to equal a state's name goes in "
              f"{ALLOW} with why.", file=sys.stderr)
        return 1
    print(f"state_literals: no state name ({len(names)}: {', '.join(sorted(names))}) spelled outside common/states.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
