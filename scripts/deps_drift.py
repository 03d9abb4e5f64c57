#!/usr/bin/env python3
"""The one dependency list (scripts/install-deps.sh) against what really uses it.

CTest deps.drift (issue 27). Fails, naming the fix, when:
  build    a find_package / pkg_check_modules / find_path / find_library /
           find_file / find_program of CMake, in a configure with tests off
           (what demo.sh and the Dockerfile configure), found a file whose
           Debian package `install-deps.sh build` does not install (the group
           or what its packages depend on); or a find the check cannot resolve
           to a file (it must learn how: MODULE_EVIDENCE below);
  test     the same for the finds the test build adds, against build + test + cuda;
  runtime  a shared library that bin/swept or bin/swept-train needs (readelf's
           NEEDED, resolved by ldd) is owned by a package not in the runtime
           group, or a runtime package owns none of them (a stale Depends);
  users    demo.sh installs test packages, test.sh skips a group, the
           Dockerfile apt-installs a package by name rather than from
           install-deps.sh, or the package's Depends (CPackConfig.cmake) is not
           the runtime group.
Usage: deps_drift.py BUILD_DIR SOURCE_DIR [CMAKE]. Exit 0 clean, 1 drift (each
problem on its own line), 2 bad use or a tool missing.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# find_package in module mode leaves no NAME_DIR: the cache entries that
# name the files it found. Threads is the C library's; CUDAToolkit and every
# find under trainer/cuda/ are NVIDIA's (not Debian's: install-deps.sh's cuda
# group says so) and are not checked.
MODULE_EVIDENCE = {
    "SQLite3": ["SQLite3_LIBRARY"],
    "ZLIB": ["ZLIB_LIBRARY_RELEASE", "ZLIB_LIBRARY"],
    "OpenSSL": ["OPENSSL_SSL_LIBRARY", "OPENSSL_CRYPTO_LIBRARY", "OPENSSL_INCLUDE_DIR:openssl/ssl.h"],
    "PkgConfig": ["PKG_CONFIG_EXECUTABLE"],
}
NOT_CHECKED = {"Threads": "the C library's (libc6-dev, from build-essential)",
               "CUDAToolkit": "NVIDIA's CUDA toolkit, not a Debian package"}
NVIDIA_DIRS = ("trainer/cuda/",)
FIND_RE = re.compile(r"^\s*(find_package|pkg_check_modules|find_path|find_library|find_file|find_program)\s*\(([^)]*)\)",
                     re.M)

problems = []


def problem(text):
    problems.append(text)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def group(source, name):
    r = run(["bash", os.path.join(source, "scripts/install-deps.sh"), "--list", name])
    if r.returncode != 0:
        sys.exit(f"deps_drift: install-deps.sh --list {name} failed: {r.stderr.strip()}")
    return r.stdout.split()


def installed_depends():
    """{package: set of packages it depends on}, and {virtual: providers}, of installed packages."""
    r = run(["dpkg-query", "-W", "-f=${Package}\t${Status}\t${Pre-Depends}, ${Depends}\t${Provides}\n"])
    deps, provides = {}, {}
    for line in r.stdout.splitlines():
        pkg, status, dep, prov = (line.split("\t") + ["", "", ""])[:4]
        if "installed" not in status.split():
            continue
        names = set()
        for clause in dep.split(","):
            for alt in clause.split("|"):
                n = alt.strip().split(" ")[0].split(":")[0]
                if n:
                    names.add(n)
        deps[pkg] = names
        for p in prov.split(","):
            n = p.strip().split(" ")[0]
            if n:
                provides.setdefault(n, set()).add(pkg)
    return deps, provides


def closure(packages, deps, provides):
    """The packages and everything installed that they depend on, virtual names resolved."""
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        for q in {p} | provides.get(p, set()):
            if q not in seen:
                seen.add(q)
                todo.extend(deps.get(q, ()))
    return seen


def owner(path):
    """The Debian package owning PATH (as given, resolved, or across the /usr merge); None if none."""
    real = os.path.realpath(path)
    tries = [path, real]
    for p in (path, real):
        for a, b in (("/usr/lib/", "/lib/"), ("/lib/", "/usr/lib/"), ("/usr/bin/", "/bin/"), ("/bin/", "/usr/bin/")):
            if p.startswith(a):
                tries.append(b + p[len(a):])
    for t in tries:
        r = run(["dpkg-query", "-S", t])
        for line in r.stdout.splitlines():
            pkgs, _, p = line.rpartition(": ")
            if p == t and not line.startswith("diversion"):
                return pkgs.split(",")[0].strip().split(":")[0]
    return None


def read_cache(build):
    cache = {}
    path = os.path.join(build, "CMakeCache.txt")
    if not os.path.exists(path):
        sys.exit(f"deps_drift: {path} is missing: configure the build first")
    for line in open(path):
        m = re.match(r"^([^#/][^:=]*):(\w+)=(.*)$", line.rstrip("\n"))
        if m:
            cache[m.group(1)] = m.group(3)
    return cache


def find_calls(source):
    """(file, kind, args) of every find call in the project's CMake files."""
    calls = []
    files = glob.glob(os.path.join(source, "**/CMakeLists.txt"), recursive=True) + \
        glob.glob(os.path.join(source, "**/*.cmake"), recursive=True)
    for f in sorted(files):
        rel = os.path.relpath(f, source)
        if rel.startswith("build") or "/_deps/" in rel or rel.startswith("node_modules"):
            continue
        text = re.sub(r"#[^\n]*", "", open(f).read())
        for m in FIND_RE.finditer(text):
            calls.append((rel, m.group(1), m.group(2).split()))
    return calls


def evidence(kind, args, cache, full):
    """The files a find call found in this configuration: [] when it found
    nothing or did not run here, None when the check cannot tell. full: the
    configuration ran every find (tests on)."""
    if kind == "find_package":
        name = args[0]
        d = cache.get(f"{name}_DIR", "")
        if d and not d.endswith("NOTFOUND"):
            return [f for f in glob.glob(os.path.join(d, "*")) if re.search(r"[cC]onfig\.cmake$", f)]
        if name in MODULE_EVIDENCE:
            files = []
            for e in MODULE_EVIDENCE[name]:
                var, _, suffix = e.partition(":")
                v = cache.get(var, "")
                if v and not v.endswith("NOTFOUND"):
                    files.append(os.path.join(v, suffix) if suffix else v)
            return files
        # No NAME_DIR: module mode, or a call this configuration skipped. Only
        # the full configuration (tests on) runs every call, so only it can tell.
        return None if full else []
    if kind == "pkg_check_modules":
        prefix = args[0]
        modules = [a for a in args[1:] if a not in ("REQUIRED", "QUIET", "IMPORTED_TARGET", "GLOBAL", "NO_CMAKE_PATH",
                                                     "NO_CMAKE_ENVIRONMENT_PATH")]
        if f"{prefix}_FOUND" not in cache and not any(k.startswith(f"pkgcfg_lib_{prefix}_") for k in cache):
            return []
        files = []
        for mod in modules:
            r = run(["pkg-config", "--path", re.split(r"[<>=]", mod)[0]])
            if r.returncode == 0:
                files.append(r.stdout.strip())
        return files
    var = args[0]
    value = cache.get(var, "")
    if not value or value.endswith("NOTFOUND"):
        return []
    if kind == "find_path":
        names = [a for a in args[1:] if a != "NAMES"]
        return [os.path.join(value, names[0])]
    return [value]


def check_finds(label, source, cache, allowed, closure_set, full):
    checked = 0
    for rel, kind, args in find_calls(source):
        what = f"{rel}: {kind}({' '.join(args[:3])})"
        if rel.startswith(NVIDIA_DIRS) or (kind == "find_package" and args[0] in NOT_CHECKED):
            continue
        if kind == "find_program" and args[0] == "SWEPT_CCACHE_PROGRAM":
            continue  # optional: a faster rebuild, never needed
        files = evidence(kind, args, cache, full)
        if files is None:
            problem(f"{label}: {what}: cannot tell which file it found: add it to MODULE_EVIDENCE in "
                    "scripts/deps_drift.py")
            continue
        for f in files:
            pkg = owner(f)
            checked += 1
            if pkg is None:
                problem(f"{label}: {what} found {f}, which no Debian package owns: install it from a package "
                        "and add that package to scripts/install-deps.sh")
            elif pkg not in closure_set:
                problem(f"{label}: {what} found {f} from package {pkg}, which `install-deps.sh {allowed}` "
                        f"does not install: add {pkg} (or the -dev package that brings it) to the group")
    return checked


def configure_tests_off(cmake, source, scratch):
    r = run([cmake, "-S", source, "-B", scratch, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DSWEPT_TESTS=OFF",
             "-DSWEPT_CUDA=OFF", "-DSWEPT_CCACHE=OFF"])
    if r.returncode != 0:
        problem(f"build: configuring with tests off failed (is a find outside the build group?):\n{r.stderr}")
        return None
    return read_cache(scratch)


def check_runtime(build, runtime):
    needed_owners = set()
    for b in ("swept", "swept-train"):
        binary = os.path.join(build, "bin", b)
        if not os.path.exists(binary):
            problem(f"runtime: {binary} is not built: build the swept and swept-train targets first")
            continue
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]).stdout)
        where = {}
        for line in run(["ldd", binary]).stdout.splitlines():
            m = re.match(r"\s*(\S+) => (/\S+)", line)  # libfoo.so.1 => /lib/.../libfoo.so.1 (0x...)
            if m:
                where[m.group(1)] = m.group(2)
            elif m := re.match(r"\s*(/\S+) \(", line):  # the loader: /lib64/ld-linux-x86-64.so.2 (0x...)
                where[os.path.basename(m.group(1))] = m.group(1)
        for soname in needed:
            path = where.get(soname)
            if not path:
                problem(f"runtime: {b} needs {soname}, which ldd cannot find")
                continue
            pkg = owner(path)
            needed_owners.add(pkg)
            if pkg not in runtime:
                problem(f"runtime: {b} links {soname} ({path}) from package {pkg}: add {pkg} to the runtime group "
                        "of scripts/install-deps.sh (it is the .deb's Depends)")
    for pkg in runtime:
        if pkg not in needed_owners:
            problem(f"runtime: {pkg} is in the runtime group but neither swept nor swept-train links a library of it: "
                    "remove it (the runtime group is exactly the .deb's Depends)")
    return len(needed_owners)


def check_users(source, build, groups, runtime):
    # The files without their comment lines (which name groups in prose).
    text = lambda rel: re.sub(r"(?m)^\s*#.*\n", "", open(os.path.join(source, rel)).read())
    calls = lambda rel: [m.split() for m in re.findall(r"install-deps\.sh((?:[ \t]+[a-z]+)*)", text(rel))]
    for rel, must, must_not in (("scripts/demo.sh", {"build", "runtime", "data"}, {"test", "bench"}),
                                ("scripts/test.sh", {"build", "runtime", "test"}, set())):
        used = set()
        for c in calls(rel):
            used |= set(c) or {"build", "runtime", "data", "test"}
        if not used:
            problem(f"users: {rel} does not run scripts/install-deps.sh")
        for g in used - set(groups):
            problem(f"users: {rel} names install-deps.sh group '{g}', which does not exist")
        for g in must - used:
            problem(f"users: {rel} must install the '{g}' group")
        for g in must_not & used:
            problem(f"users: {rel} must not install the '{g}' group")
    docker = text("deploy/Dockerfile")
    joined = re.sub(r"\\\n", " ", docker)
    for m in re.finditer(r"apt-get install ([^&;\n]*)", joined):
        for word in m.group(1).split():
            if not (word.startswith("-") or word.startswith("$") or word.endswith(".deb") or word.endswith(")")):
                problem(f"users: deploy/Dockerfile apt-installs '{word}' by name: take it from "
                        "`scripts/install-deps.sh --list GROUP` instead")
    docker_groups = set()
    for g in re.findall(r"install-deps\.sh(?: --list)?((?: [a-z]+)+)", joined):
        docker_groups |= set(g.split())
    for name in docker_groups - set(groups):
        problem(f"users: deploy/Dockerfile names install-deps.sh group '{name}', which does not exist")
    if "build" not in docker_groups or not re.search(r"apt-get install [^\n]*\.deb", joined):
        problem("users: deploy/Dockerfile must build with install-deps.sh's build group and apt-get install the .deb")
    cpack = os.path.join(build, "CPackConfig.cmake")
    m = re.search(r'set\(CPACK_DEBIAN_PACKAGE_DEPENDS "([^"]*)"\)', open(cpack).read()) if os.path.exists(cpack) else None
    if not m:
        problem(f"users: {cpack} sets no CPACK_DEBIAN_PACKAGE_DEPENDS")
    elif [d.strip() for d in m.group(1).split(",")] != runtime:
        problem(f"users: the package's Depends ({m.group(1)}) is not the runtime group: reconfigure the build")


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    cmake = sys.argv[3] if len(sys.argv) > 3 else "cmake"
    groups = ["build", "runtime", "data", "test", "cuda", "bench"]
    lists = {g: group(source, g) for g in groups}
    deps, provides = installed_depends()
    build_closure = closure(lists["build"], deps, provides)
    test_closure = closure(lists["build"] + lists["test"] + lists["cuda"], deps, provides)

    with tempfile.TemporaryDirectory() as scratch:
        off = configure_tests_off(cmake, source, scratch)
        n_build = check_finds("build", source, off, "build", build_closure, False) if off else 0
    n_test = check_finds("test", source, read_cache(build), "build test cuda", test_closure, True)
    n_runtime = check_runtime(build, lists["runtime"])
    check_users(source, build, groups, lists["runtime"])
    if n_build == 0 or n_runtime == 0:
        problem(f"the check found nothing to check ({n_build} build files, {n_runtime} runtime packages): it is broken")
    for p in problems:
        print(f"deps_drift: {p}")
    if problems:
        return 1
    print(f"deps_drift: ok: {n_build} files CMake finds with tests off, {n_test} with tests on, "
          f"{n_runtime} runtime packages, demo.sh, test.sh, deploy/Dockerfile and the package's Depends")
    return 0


if __name__ == "__main__":
    sys.exit(main())
