#!/usr/bin/env python3
"""Checks deploy/ (issue 14): the Kubernetes manifests parse, name only the
image deploy/Dockerfile builds, and pass `swept` only subcommands and flags
that `swept SUBCOMMAND --help` lists; the Slurm recipe's `swept agent` line
likewise; the scheduler's key Secret lays out --authorized with agents/ and
clients/. usage: deploy_manifests_test.py SWEPT_BINARY SOURCE_DIR"""
import pathlib
import re
import subprocess
import sys

import yaml

swept, src = sys.argv[1], pathlib.Path(sys.argv[2])
version = re.search(r"project\(swept VERSION ([0-9.]+)", (src / "CMakeLists.txt").read_text()).group(1)
image = f"swept:{version}"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


help_cache = {}


def flags_of(sub):
    if sub not in help_cache:
        out = subprocess.run([swept, sub, "--help"], capture_output=True, text=True)
        check(out.returncode == 0, f"swept {sub} --help failed: is '{sub}' a subcommand?")
        help_cache[sub] = set(re.findall(r"--([a-z][a-z0-9-]*)", out.stdout + out.stderr))
    return help_cache[sub]


def check_argv(argv, where):
    sub = argv[0]
    known = flags_of(sub)
    for arg in argv[1:]:
        m = re.match(r"--([a-z][a-z0-9-]*)", arg)
        if m:
            check(m.group(1) in known, f"{where}: swept {sub} has no flag --{m.group(1)}")


check(f"-t {image}" in (src / "deploy/Dockerfile").read_text(), f"deploy/Dockerfile does not build {image}")
kinds = []
for path in sorted((src / "deploy/kubernetes").glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc is None:
            continue
        check("apiVersion" in doc and "kind" in doc, f"{path.name}: a document without apiVersion/kind")
        kinds.append(doc["kind"])
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("containers", []):
            check(c.get("image") == image, f"{path.name}: image {c.get('image')} is not {image}")
            check_argv(c["args"], f"{path.name}:{c['name']}")
        if doc["kind"] == "Deployment":
            items = [i["path"] for v in spec["volumes"] if "secret" in v for i in v["secret"].get("items", [])]
            check(any(p.startswith("authorized/agents/") for p in items), "no authorized/agents/ key in the Secret")
            check(any(p.startswith("authorized/clients/") for p in items), "no authorized/clients/ key in the Secret")
for kind in ["Deployment", "Service", "PersistentVolumeClaim", "DaemonSet", "Secret"]:
    check(kind in kinds, f"deploy/kubernetes has no {kind}")

sbatch = (src / "deploy/slurm/swept-agent.sbatch").read_text().replace("\\\n", " ")
line = next((l for l in sbatch.splitlines() if "swept agent" in l and l.lstrip().startswith(("srun", "exec"))), None)
check(line is not None, "deploy/slurm/swept-agent.sbatch runs no `exec swept agent` (or `srun ... swept agent`)")
if line:
    check_argv(["agent"] + line.split("swept agent", 1)[1].split(), "swept-agent.sbatch")

for f in failures:
    print("FAIL:", f)
print(f"{'FAILED' if failures else 'PASS'}: {len(kinds)} Kubernetes documents and the sbatch recipe checked")
sys.exit(1 if failures else 0)
