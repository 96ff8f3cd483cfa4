# Sourced by the benchmark scripts (bench.sh, bench-txn.sh): builds kbroker
# (unless KBROKER names a binary) and kbench into a temporary directory
# removed on exit, and defines say, which prints to stderr under JSON=1 so
# stdout stays machine-readable. Sets bin, kbroker.
bin=$(mktemp -d "${TMPDIR:-/tmp}/kbench-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT

say() {
	if [[ "${JSON:-0}" == 1 ]]; then echo "$@" >&2; else echo "$@"; fi
}

echo "building kbroker and kbench into $bin" >&2
kbroker=${KBROKER:-$bin/kbroker}
if [[ -z "${KBROKER:-}" ]]; then
	go build -o "$kbroker" ./cmd/kbroker
fi
go build -o "$bin/kbench" ./cmd/kbench
