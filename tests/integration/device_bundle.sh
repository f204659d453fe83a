#!/bin/bash
# Packs what tests/integration/test_py_device.py needs to run on a machine that has
# a GPU and PyTorch but not this project's Debian packages (a lent GPU host):
#   DIR/build/server/warmlaked   a wrapper that runs the real binary with DIR/lib
#   DIR/build/client/libwarmlake.so
#   DIR/lib/                     every shared library of both that is not glibc's own
#   DIR/build/bench/wlbench/wl-bench   the same for the benchmark client
#   DIR/run.sh                   runs the device tests there (bench/reader_device.py with
#                                --bench after them)
# Usage: tests/integration/device_bundle.sh [BUILD] [DIR]   (defaults: build, .gpu)
# On the GPU host, from a copy of the repository with DIR beside it: bash DIR/run.sh
set -euo pipefail
BUILD=${1:-build}
DIR=${2:-.gpu}
rm -rf "$DIR"
mkdir -p "$DIR/build/server" "$DIR/build/client" "$DIR/build/bench/wlbench" "$DIR/lib"
cp "$BUILD/server/warmlaked" "$DIR/build/server/warmlaked.bin"
cp "$BUILD/client/libwarmlake.so" "$DIR/build/client/"
cp "$BUILD/bench/wlbench/wl-bench" "$DIR/build/bench/wlbench/wl-bench.bin"
# glibc and the C++ runtime stay the host's: a newer one runs these, and an older
# one on the library path would break the host's own programs.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.'
for f in "$BUILD/server/warmlaked" "$BUILD/client/libwarmlake.so" "$BUILD/bench/wlbench/wl-bench"; do
    ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
        [[ $name =~ $skip ]] || cp -L "$path" "$DIR/lib/$name"
    done
done
cat > "$DIR/build/server/warmlaked" <<'W'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/warmlaked.bin" "$@"
W
chmod +x "$DIR/build/server/warmlaked"
sed 's/warmlaked.bin/wl-bench.bin/; s#/../../lib#/../../../lib#' "$DIR/build/server/warmlaked" \
    >"$DIR/build/bench/wlbench/wl-bench"
chmod +x "$DIR/build/bench/wlbench/wl-bench"
cat > "$DIR/run.sh" <<'R'
#!/bin/bash
# The device tests against the bundled build. Python keeps the host's libraries
# except those libwarmlake.so finds nowhere else (linked one by one into pylib).
set -uo pipefail
B=$(readlink -f "$(dirname "$0")")
mkdir -p "$B/pylib"
for n in $(ldd "$B/build/client/libwarmlake.so" | awk '/not found/ {print $1}'); do
    ln -sf "$B/lib/$n" "$B/pylib/$n"
done
export LD_LIBRARY_PATH="$B/pylib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || true
"${PYTHON:-python3}" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
"$B/build/server/warmlaked" --help >/dev/null 2>&1 || { echo "bundled warmlaked does not run:"; ldd "$B/build/server/warmlaked.bin" | grep "not found"; }
if [ "${1:-}" = --bench ]; then
    BUILD="$B/build" PYTHONUNBUFFERED=1 "${PYTHON:-python3}" bench/reader_device.py
    exit
fi
PYTHONUNBUFFERED=1 WL_BUILD="$B/build" "${PYTHON:-python3}" -m pytest -v -p no:cacheprovider \
    -W ignore::DeprecationWarning tests/integration/test_py_device.py "$@"
R
chmod +x "$DIR/run.sh"
du -sh "$DIR"
