#!/usr/bin/env node
// Prints the code block that follows `<!-- NAME -->` in README.md, so that CI
// runs exactly what a reader copies.
import { readFileSync } from 'node:fs';

const [name, file = new URL('../README.md', import.meta.url)] = process.argv.slice(2);
if (!name) {
  console.error('usage: readme-block.mjs NAME [FILE]');
  process.exit(2);
}
const text = readFileSync(file, 'utf8');
const marker = `<!-- ${name} -->`;
const start = text.indexOf(marker);
// The block must follow the marker directly, with nothing but blank lines between.
const block = start < 0 ? null : /^\s*```[a-z]*\n([\s\S]*?)^```$/m.exec(text.slice(start + marker.length));
if (block && block.index !== 0) block.splice(0);
if (!block?.length) {
  console.error(`README.md has no code block after ${marker}`);
  process.exit(1);
}
process.stdout.write(block[1]);
