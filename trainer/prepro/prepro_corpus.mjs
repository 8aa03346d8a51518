// SPDX-License-Identifier: MIT
// Copyright (c) the ibcoll authors
//
// prepro_corpus.mjs - tokenize the offline demo corpus for trainer/ibc_gpt2.
//
// Reads Debian's `fortunes` (every text file under /usr/share/games/fortunes,
// entries separated by lines holding a single '%') and `jargon-text`
// (/usr/share/doc/jargon-text/jargon.txt.gz, one document per ":term:" entry),
// shuffles the documents with a seeded PRNG, encodes each as
// [<|endoftext|>, GPT-2 BPE tokens...] with js-tiktoken, holds out a fraction
// of the documents for validation, and writes, in llm.c's formats:
//
//   OUT/corpus_val_000000.bin          validation tokens
//   OUT/corpus_train_%06d.bin          training tokens, shards of --shard-tokens
//   OUT/gpt2_tokenizer.bin             token id -> bytes table (decoding)
//   OUT/manifest.json                  what was written, counts, versions
//
// Data shard: 256 x int32 header {20240520, 1, ntokens, 0...}, then ntokens x
// uint16 (little-endian). Tokenizer: 256 x uint32 header {20240328, 2,
// vocab_size, eot_token, 0...}, then per token id: uint8 length + bytes.
// All files are written to *.tmp and renamed, manifest.json last, so a
// present manifest means a complete output.
//
// usage: node prepro_corpus.mjs [--out DIR] [--fortunes DIR] [--jargon FILE]
//                               [--val-frac F] [--shard-tokens N] [--seed N]

import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { Tiktoken } from 'js-tiktoken/lite';
import gpt2 from 'js-tiktoken/ranks/gpt2';

const DATA_MAGIC = 20240520;
const DATA_VERSION = 1;
const TOK_MAGIC = 20240328;
const TOK_VERSION = 2;
const HEADER_INTS = 256;

function die(msg) {
	process.stderr.write(`prepro_corpus: error: ${msg}\n`);
	process.exit(1);
}

function parseArgs(argv) {
	const opt = {
		out: 'data/corpus',
		fortunes: '/usr/share/games/fortunes',
		jargon: '/usr/share/doc/jargon-text/jargon.txt.gz',
		valFrac: 0.05,
		shardTokens: 1 << 19,
		seed: 1337,
	};
	for (let i = 2; i < argv.length; i++) {
		const a = argv[i];
		const v = argv[i + 1];
		const need = () => {
			if (v === undefined)
				die(`${a} needs a value`);
			i++;
			return v;
		};
		if (a === '--out') opt.out = need();
		else if (a === '--fortunes') opt.fortunes = need();
		else if (a === '--jargon') opt.jargon = need();
		else if (a === '--val-frac') opt.valFrac = Number(need());
		else if (a === '--shard-tokens') opt.shardTokens = Number.parseInt(need(), 10);
		else if (a === '--seed') opt.seed = Number.parseInt(need(), 10);
		else if (a === '-h' || a === '--help') {
			process.stdout.write(fs.readFileSync(new URL(import.meta.url)).toString()
				.split('\n').filter((l) => l.startsWith('//')).slice(2).join('\n') + '\n');
			process.exit(0);
		} else die(`unknown argument ${a} (try --help)`);
	}
	if (!(opt.valFrac > 0 && opt.valFrac < 1))
		die('--val-frac must be in (0, 1)');
	if (!(opt.shardTokens >= 1024))
		die('--shard-tokens must be >= 1024');
	if (!Number.isInteger(opt.seed))
		die('--seed must be an integer');
	return opt;
}

// Fortune files: plain text, entries separated by a line that is just "%".
// Skip the strfile indexes (*.dat), the *.u8 symlinks and subdirectories.
function readFortunes(dir) {
	const docs = [];
	const files = fs.readdirSync(dir).sort();
	let nfiles = 0;
	for (const name of files) {
		if (name.endsWith('.dat') || name.endsWith('.u8'))
			continue;
		const p = path.join(dir, name);
		const st = fs.lstatSync(p);
		if (!st.isFile())
			continue;
		nfiles++;
		const text = fs.readFileSync(p, 'utf8').replace(/\r\n/g, '\n');
		for (const entry of text.split(/^%$/m)) {
			const t = entry.replace(/^\n+|\s+$/g, '');
			if (t.length > 0)
				docs.push(t + '\n');
		}
	}
	if (nfiles === 0)
		die(`no fortune files in ${dir} (apt-get install fortunes)`);
	return docs;
}

// The Jargon File (html2text rendering, 3-space indent): one document per
// entry, an entry starting at a line ":term: ..."; the front matter before
// the first entry is one more document.
function readJargon(file) {
	const text = zlib.gunzipSync(fs.readFileSync(file)).toString('utf8');
	const lines = text.replace(/\r\n/g, '\n').split('\n').map((l) => l.replace(/^ {3}/, ''));
	const docs = [];
	let cur = [];
	const flush = () => {
		const t = cur.join('\n').replace(/^\n+|\s+$/g, '');
		if (t.length > 0)
			docs.push(t + '\n');
		cur = [];
	};
	for (const l of lines) {
		if (/^:[^:\s][^:]*:/.test(l))
			flush();
		cur.push(l.trimEnd());
	}
	flush();
	if (docs.length < 100)
		die(`${file}: found only ${docs.length} entries; not the Jargon File?`);
	return docs;
}

// splitmix32-style PRNG: small, seeded, the same on every Node version.
function makeRng(seed) {
	let s = seed >>> 0;
	return () => {
		s = (s + 0x9e3779b9) >>> 0;
		let z = s;
		z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
		z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
		return ((z ^ (z >>> 16)) >>> 0) / 4294967296;
	};
}

function shuffle(arr, rng) {
	for (let i = arr.length - 1; i > 0; i--) {
		const j = Math.floor(rng() * (i + 1));
		[arr[i], arr[j]] = [arr[j], arr[i]];
	}
}

// Token id -> bytes, from the rank table that ships with js-tiktoken
// (lines "<name> <first rank> <base64 token> <base64 token> ..."), plus
// the special tokens as their text.
function tokenBytesTable(ranks) {
	const nvocab = ranks.explicit_n_vocab;
	const table = new Array(nvocab);
	for (const line of ranks.bpe_ranks.split('\n')) {
		if (line.length === 0)
			continue;
		const [, first, ...toks] = line.split(' ');
		const base = Number.parseInt(first, 10);
		toks.forEach((b64, i) => { table[base + i] = Buffer.from(b64, 'base64'); });
	}
	for (const [text, id] of Object.entries(ranks.special_tokens))
		table[id] = Buffer.from(text, 'utf8');
	for (let i = 0; i < nvocab; i++) {
		if (!table[i])
			die(`token ${i} missing from the js-tiktoken gpt2 ranks`);
		if (table[i].length > 255)
			die(`token ${i} is ${table[i].length} bytes; the tokenizer format allows 255`);
	}
	return table;
}

function writeAtomic(file, bufs) {
	const tmp = file + '.tmp';
	const fd = fs.openSync(tmp, 'w');
	for (const b of bufs)
		fs.writeSync(fd, b);
	fs.fsyncSync(fd);
	fs.closeSync(fd);
	fs.renameSync(tmp, file);
}

function writeShard(file, tokens) {
	const header = Buffer.alloc(HEADER_INTS * 4);
	header.writeInt32LE(DATA_MAGIC, 0);
	header.writeInt32LE(DATA_VERSION, 4);
	header.writeInt32LE(tokens.length, 8);
	const body = Buffer.alloc(tokens.length * 2);
	for (let i = 0; i < tokens.length; i++)
		body.writeUInt16LE(tokens[i], 2 * i);
	writeAtomic(file, [header, body]);
}

function writeTokenizer(file, table, eot) {
	const header = Buffer.alloc(HEADER_INTS * 4);
	header.writeUInt32LE(TOK_MAGIC, 0);
	header.writeUInt32LE(TOK_VERSION, 4);
	header.writeUInt32LE(table.length, 8);
	header.writeUInt32LE(eot, 12);
	const parts = [header];
	for (const b of table)
		parts.push(Buffer.from([b.length]), b);
	writeAtomic(file, parts);
}

function main() {
	const opt = parseArgs(process.argv);
	const t0 = Date.now();
	const enc = new Tiktoken(gpt2);
	const eot = gpt2.special_tokens['<|endoftext|>'];
	const table = tokenBytesTable(gpt2);
	if (eot !== 50256 || table.length !== 50257)
		die(`unexpected gpt2 vocabulary (eot ${eot}, ${table.length} tokens)`);

	const fortunes = readFortunes(opt.fortunes);
	const jargon = readJargon(opt.jargon);
	const docs = fortunes.concat(jargon);
	shuffle(docs, makeRng(opt.seed));
	const nval = Math.max(1, Math.round(docs.length * opt.valFrac));

	// Encode; check every document decodes back to its exact UTF-8 bytes
	// through the table the C side will use.
	const val = [];
	const train = [];
	let nbytes = 0;
	docs.forEach((doc, i) => {
		const ids = enc.encode(doc);
		const utf8 = Buffer.from(doc, 'utf8');
		const back = Buffer.concat(ids.map((id) => table[id]));
		if (!back.equals(utf8))
			die(`document ${i}: token bytes do not reproduce the text`);
		nbytes += utf8.length;
		const dst = i < nval ? val : train;
		dst.push(eot);
		for (const id of ids)
			dst.push(id);
	});

	fs.mkdirSync(opt.out, { recursive: true });
	fs.rmSync(path.join(opt.out, 'manifest.json'), { force: true });
	const files = [];
	const valName = 'corpus_val_000000.bin';
	writeShard(path.join(opt.out, valName), val);
	files.push({ file: valName, split: 'val', tokens: val.length });
	for (let s = 0, k = 1; s < train.length; s += opt.shardTokens, k++) {
		const name = `corpus_train_${String(k).padStart(6, '0')}.bin`;
		const part = train.slice(s, s + opt.shardTokens);
		writeShard(path.join(opt.out, name), part);
		files.push({ file: name, split: 'train', tokens: part.length });
	}
	writeTokenizer(path.join(opt.out, 'gpt2_tokenizer.bin'), table, eot);

	const manifest = {
		corpus: 'Debian fortunes + jargon-text',
		sources: { fortunes: opt.fortunes, jargon: opt.jargon },
		tokenizer: `js-tiktoken ${JSON.parse(fs.readFileSync(new URL('./node_modules/js-tiktoken/package.json', import.meta.url))).version} gpt2`,
		seed: opt.seed,
		documents: { fortunes: fortunes.length, jargon: jargon.length, val: nval, train: docs.length - nval },
		utf8_bytes: nbytes,
		tokens: { val: val.length, train: train.length },
		files,
	};
	writeAtomic(path.join(opt.out, 'manifest.json'),
		    [Buffer.from(JSON.stringify(manifest, null, 2) + '\n')]);
	const s = ((Date.now() - t0) / 1000).toFixed(1);
	process.stdout.write(`prepro_corpus: ${docs.length} documents (${fortunes.length} fortunes, ` +
		`${jargon.length} jargon entries), ${nbytes} bytes -> ${train.length} train + ` +
		`${val.length} val tokens in ${files.length} shards under ${opt.out} (${s} s)\n`);
}

main();
