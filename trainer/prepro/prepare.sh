#!/bin/sh
# SPDX-License-Identifier: MIT
# prepare.sh - tokenize the demo corpus (Debian fortunes + jargon-text) into
# llm.c shards, unless they are already there.
#
# usage: trainer/prepro/prepare.sh [OUT_DIR] [--force]    (default OUT_DIR: data/corpus)
#
# Installs js-tiktoken from the committed package-lock.json (npm ci, once;
# needs the npm registry the first time), then runs prepro_corpus.mjs.
# OUT_DIR/manifest.json is written last: its presence means the shards are
# complete, and then this script does nothing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=data/corpus
force=0
for a in "$@"; do
	case "$a" in
	--force) force=1 ;;
	-h|--help) sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) out=$a ;;
	esac
done

if [ "$force" = 0 ] && [ -f "$out/manifest.json" ]; then
	echo "prepare: $out is ready ($(sed -n 's/.*"train": \([0-9]*\).*/\1/p' "$out/manifest.json" | tail -1) train tokens)"
	exit 0
fi
command -v node >/dev/null 2>&1 || { echo "prepare: node is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
[ -d /usr/share/games/fortunes ] || { echo "prepare: /usr/share/games/fortunes missing (apt-get install fortunes)" >&2; exit 1; }
[ -f /usr/share/doc/jargon-text/jargon.txt.gz ] || { echo "prepare: jargon.txt.gz missing (apt-get install jargon-text)" >&2; exit 1; }
if [ ! -f "$here/node_modules/js-tiktoken/package.json" ] ||
   [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
	echo "prepare: npm ci (js-tiktoken, pinned by trainer/prepro/package-lock.json)"
	(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
node "$here/prepro_corpus.mjs" --out "$out"
