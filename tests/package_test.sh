#!/usr/bin/env bash
# CTest package.deb (issue 27): the Debian package itself, built from this
# build's binaries with cpack (a few seconds: the install rules, strip, gzip),
# unpacked with dpkg -x into a scratch root, and used only from there:
#   - its name is swept_VERSION_ARCH.deb and its Depends is install-deps.sh's runtime group;
#   - swept --version, swept-train --version, swept validate on an installed example;
#   - a 2-trial `swept run` whose trials are the package's swept-train (the
#     launcher runs the swept-train beside swept), on a generated MNIST-shaped
#     data set found through SWEPT_DATA_DIR, with a clean environment;
#   - swept-train without data exits 2, naming the per-user folder and swept-fetch-mnist;
#   - the man pages list every command, and the bash completions complete from --help.
# Usage: tests/package_test.sh BUILD_DIR SOURCE_DIR   (BUILD_DIR has bin/swept and bin/swept-train built)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$tmp"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

# ---- build and inspect the package ---------------------------------------------
cpack --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
deb="$tmp/out/swept_${version}_$(dpkg --print-architecture).deb"
[[ -f $deb ]] || fail "expected $deb; cpack made: $(ls "$tmp/out")"
want=$(bash "$src/scripts/install-deps.sh" --list runtime | paste -sd, | sed 's/,/, /g')
got=$(dpkg-deb -f "$deb" Depends)
[[ $got == "$want" ]] || fail "Depends is '$got', install-deps.sh's runtime group is '$want'"
dpkg-deb -x "$deb" "$tmp/root"
bin="$tmp/root/usr/bin"
doc="$tmp/root/usr/share/doc/swept"
for f in "$bin/swept" "$bin/swept-train" "$bin/swept-fetch-mnist" "$doc/README.md" "$doc/docs/sweep-format.md" \
  "$tmp/root/usr/share/man/man1/swept.1" "$tmp/root/usr/share/man/man1/swept-train.1" \
  "$tmp/root/usr/share/bash-completion/completions/swept" "$tmp/root/usr/share/bash-completion/completions/swept-train"; do
  [[ -s $f ]] || fail "the package lacks ${f#"$tmp/root"}"
done

# From here on, only the unpacked root: a clean environment, no build tree on PATH.
run() { env -i PATH="$bin:/usr/bin:/bin" HOME="$tmp/home" "$@"; }
mkdir -p "$tmp/home"

# ---- the programs start, and read an example -----------------------------------
[[ $(run swept --version) == "swept $version" ]] || fail "swept --version: $(run swept --version 2>&1)"
run swept-train --version | grep -q "^swept-train $version" || fail "swept-train --version: $(run swept-train --version 2>&1)"
run swept validate "$doc/examples/grid-basic.json" >"$tmp/validate.out" 2>&1 ||
  { cat "$tmp/validate.out" >&2; fail "swept validate on the installed grid-basic.json"; }

# ---- no data: exit 2 and how to fetch it ---------------------------------------
rc=0
run swept-train --max_steps=1 >/dev/null 2>"$tmp/nodata.err" || rc=$?
[[ $rc -eq 2 ]] || fail "swept-train without MNIST exited $rc, not 2: $(cat "$tmp/nodata.err")"
grep -q "$tmp/home/.local/share/swept/mnist/" "$tmp/nodata.err" || fail "no per-user folder in: $(cat "$tmp/nodata.err")"
grep -q "swept-fetch-mnist DIR" "$tmp/nodata.err" || fail "no swept-fetch-mnist in: $(cat "$tmp/nodata.err")"

# ---- a 2-trial sweep with the package's swept-train ----------------------------
# A small data set in MNIST's IDX format (the real one is 50 MB and a download).
python3 - "$tmp/mnist" <<'EOF'
import os, random, struct, sys
d = sys.argv[1]; os.makedirs(d)
rng = random.Random(7)
def write(prefix, n):
    labels = [rng.randrange(10) for _ in range(n)]
    with open(f"{d}/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28))
        # Each digit lights its own rows, so the classes can be learnt.
        for y in labels:
            f.write(bytes(255 if r // 3 == y else rng.randrange(40) for r in range(28) for _ in range(28)))
    with open(f"{d}/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
write("train", 240); write("t10k", 40)
EOF
cat >"$tmp/two.json" <<'EOF'
{"name": "package-test", "method": "grid", "metric": {"name": "val_accuracy", "goal": "maximize"},
 "parameters": {"model": {"value": "mlp"}, "hidden": {"value": 16}, "lr": {"values": [0.1, 0.5]},
                "epochs": {"value": 1}, "max_steps": {"value": 4}, "threads": {"value": 1}},
 "resources": {"cpus": 1}}
EOF
(cd "$tmp" && run SWEPT_DATA_DIR="$tmp/mnist" swept run two.json --db "$tmp/swept.db" --dashboard off \
  --progress lines --workdir "$tmp/work") >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; fail "swept run exited non-zero"; }
run swept trials 1 --db "$tmp/swept.db" --json >"$tmp/trials.json" || fail "swept trials"
python3 - "$tmp/trials.json" <<'EOF' || fail "the sweep's trials: $(cat "$tmp/trials.json")"
import json, sys
text = open(sys.argv[1]).read().strip()
rows = json.loads(text) if text.startswith("[") else [json.loads(l) for l in text.splitlines()]
assert len(rows) == 2, f"{len(rows)} trials"
for r in rows:
    assert r["state"] == "completed", r
    assert "val_accuracy" in json.dumps(r), r
EOF
# Each trial was a swept-train that trained on the generated set. It was the
# package's: the launcher runs the swept-train beside the swept it runs in
# (agent/launcher.cpp), and PATH holds no other.
for t in 1 2; do
  grep -q "data from $tmp/mnist" "$tmp/work/sweep-1/trial-$t/stderr.log" || fail "trial $t: no swept-train training log"
done

# ---- man pages and completions -------------------------------------------------
man1="$tmp/root/usr/share/man/man1"
for c in $(run swept --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
  grep -q "^\.SS \"swept $c\"" "$man1/swept.1" || fail "swept.1 has no section for swept $c"
done
grep -q -- '--max_steps' "$man1/swept-train.1" || fail "swept-train.1 lacks --max_steps"
complete_words() {  # complete_words COMPLETION-FILE FUNCTION WORD...: what Tab offers after WORD...
  local file=$1 fn=$2; shift 2
  PATH="$bin:$PATH" bash -c 'source "$1"; fn=$2; shift 2; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$fn"; echo "${COMPREPLY[*]}"' \
    _ "$file" "$fn" "$@"
}
comp="$tmp/root/usr/share/bash-completion/completions"
[[ $(complete_words "$comp/swept" _swept swept ru) == "run" ]] || fail "swept ru<Tab>: $(complete_words "$comp/swept" _swept swept ru)"
[[ " $(complete_words "$comp/swept" _swept swept run --d) " == *" --db "* ]] || fail "swept run --d<Tab> lacks --db"
[[ " $(complete_words "$comp/swept-train" _swept_train swept-train --max) " == *" --max_steps "* ]] ||
  fail "swept-train --max<Tab> lacks --max_steps"
echo "package_test: $(basename "$deb") ok: Depends from the runtime group, 2 trials completed from the unpacked root"
