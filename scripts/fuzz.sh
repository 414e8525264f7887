#!/bin/sh
# Runs every fuzz target of the module for FUZZTIME each (make fuzz).
# Targets are found, not listed, so a new `func FuzzX` is fuzzed without
# touching this file. Seed corpora live in each package's testdata/fuzz/
# and run as plain tests in `make test`; new crashers land there too.
set -eu
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
targets=$(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
		echo "$(dirname "$f"):$name"
	done
done)
n=$(echo "$targets" | wc -l)
echo "fuzzing $n targets for $FUZZTIME each"
for t in $targets; do
	dir=${t%%:*}
	name=${t##*:}
	echo "== $dir $name"
	$GO test "$dir" -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME"
done
