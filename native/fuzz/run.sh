#!/bin/sh
# Coverage-guided fuzzing of the native decoders on the stable toolchain: libFuzzer (libfuzzer-sys)
# with LLVM's sanitizer-coverage instrumentation, as cargo-fuzz sets it up (cargo-fuzz itself needs
# nightly for AddressSanitizer; bounds are checked by Rust here).  Usage:
#   native/fuzz/run.sh TARGET [SECONDS]      fuzz one target, growing corpus/TARGET
#   native/fuzz/run.sh all [SECONDS]         every target in turn
set -eu
cd "$(dirname "$0")"
target=${1:?usage: run.sh TARGET|all [SECONDS]}
seconds=${2:-60}
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
triple=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --target "$triple" --bins
targets=$target
[ "$target" = all ] && targets="wire_batch segment_scan dispatch_walk index_put frames grpc_frames pull_body json_header columns_walk send_properties"
for t in $targets; do
    mkdir -p "corpus/$t"
    "target/$triple/release/$t" "corpus/$t" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1
done
