#!/bin/sh
# SPDX-License-Identifier: MIT
# test_info_tuning.sh - `ibc_info --tuning`: the built-in model per transport
# and rank count, narrowed by IBC_TRANSPORT/IBC_NRANKS, and a tuning file's
# rows shown as fitted and changing the choice.
info="$top_builddir/tools/ibc_info"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..9"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

"$info" --tuning > "$tmp/all" 2>&1
ok $? "ibc_info --tuning runs"
c=$(grep -c '^# tuning model: .* ranks over shm' "$tmp/all")
[ "$c" = 4 ]; ok $? "shm model for 2, 4, 8 and 16 ranks (got $c)"
grep -q '^# tuning model: 8 ranks over tcp .*no LL path' "$tmp/all"; ok $? "tcp model says it has no LL path"
grep -q '^# tuning model: 8 ranks over ib ' "$tmp/all" && ! grep -q '^# tuning model: .* over ib .*no LL path' "$tmp/all"
ok $? "ib model has the LL path (IBC_TCAP_LL)"

IBC_TRANSPORT=shm IBC_NRANKS=8 "$info" --tuning > "$tmp/one" 2>&1
c=$(grep -c '^# tuning model:' "$tmp/one")
[ "$c" = 1 ] && grep -q '^# allreduce, 8 ranks over shm: chosen algorithm per size' "$tmp/one"
ok $? "IBC_TRANSPORT and IBC_NRANKS narrow it to one model"
IBC_TRANSPORT=foo IBC_NRANKS=8 "$info" --tuning > "$tmp/bad" 2>&1
c=$(grep -c '^# tuning model:' "$tmp/bad")
[ "$c" -ge 2 ] && grep -q 'IBC_TRANSPORT=foo is not auto, shm, tcp or ib' "$tmp/bad"
ok $? "an unknown IBC_TRANSPORT says so and shows every transport, as the library uses auto ($c models)"
# the first all-reduce range starts at 1 B and the last ends at 1 GiB
sed -n '/^# allreduce/,/^# broadcast/p' "$tmp/one" | grep -q '^ *1 B \.\. ' &&
	sed -n '/^# allreduce/,/^# broadcast/p' "$tmp/one" | grep -q '\.\. 1 GiB'
ok $? "all-reduce ranges cover 1 B .. 1 GiB"

# a file that makes the ring very cheap for shm at 8 ranks: the ring wins everywhere
cat > "$tmp/tune" <<'EOT'
# test file
base - simple shm 8 5.0 0.5 0.2
allreduce ring simple shm 8 0.001 0.001 0.001
allreduce ring ll shm 8 0.001 0.001 0.001
bogus line here
EOT
IBC_TUNING_FILE="$tmp/tune" IBC_TRANSPORT=shm IBC_NRANKS=8 "$info" --tuning > "$tmp/file" 2>&1
grep -q 'coefficients from: file' "$tmp/file" && grep -q 'allreduce .*ring .*simple .*(fitted)' "$tmp/file"
ok $? "file rows are shown as fitted"
ranges=$(sed -n '/^# allreduce/,/^# broadcast/p' "$tmp/file" | grep -c ' \.\. ')
r=$(sed -n '/^# allreduce/,/^# broadcast/p' "$tmp/file" | grep -c ' \.\. .* ring ')
[ "$ranges" -ge 1 ] && [ "$r" = "$ranges" ]
ok $? "and decide: ring for every all-reduce size ($r of $ranges ranges)"
