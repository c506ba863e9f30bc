#!/usr/bin/env node
// After tsc: the files package.json names in "bin" get their run bit (tsc writes
// them 0644), so that a checkout's dist/cli/main.js runs as a command, as an
// installed package's does.
import { chmodSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
for (const file of Object.values(pkg.bin ?? {})) {
  const target = path.join(root, file);
  chmodSync(target, statSync(target).mode | 0o111);
}
