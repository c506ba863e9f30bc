#!/usr/bin/env node
// Writes every JavaScript and TypeScript block of docs/*.md to OUT/<page>/<line>.ts,
// one module each, so that CI compiles what a reader copies. Each file starts
// with blank lines up to the block's first line, so that the compiler's line
// numbers are the page's. A block that is deliberately no program (a lone
// signature) says so just before it, with nothing but blank lines between:
// `<!-- not compiled: why -->`.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const LANGUAGES = new Set(['js', 'javascript', 'mjs', 'ts', 'typescript', 'mts']);
const SKIP = /<!--\s*not compiled:\s*(.*?)\s*-->\s*$/;

const [out, docs = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs')] = process.argv.slice(2);
if (!out) {
  console.error('usage: docs-snippets.mjs OUT [DOCS]');
  process.exit(2);
}

let written = 0;
const skipped = [];
const problems = [];
for (const page of readdirSync(docs)
  .filter((name) => name.endsWith('.md'))
  .sort()) {
  const lines = readFileSync(path.join(docs, page), 'utf8').split('\n');
  for (let index = 0; index < lines.length; index += 1) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[index]);
    if (!open) continue;
    const [, indent, fence, language] = open;
    const first = index + 1;
    const closes = (line) => line.trim().length >= fence.length && line.trim() === fence[0].repeat(line.trim().length);
    let end = first;
    while (end < lines.length && !closes(lines[end])) end += 1;
    index = end;
    if (!LANGUAGES.has(language)) continue;
    const where = `docs/${page}:${first + 1}`;
    let before = first - 2;
    while (before >= 0 && !lines[before].trim()) before -= 1;
    const marker = before >= 0 ? SKIP.exec(lines[before]) : null;
    if (marker) {
      if (marker[1]) skipped.push(`${where} (${marker[1]})`);
      else problems.push(`${where}: "not compiled" needs a reason`);
      continue;
    }
    const code = lines.slice(first, end).map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line));
    const file = path.join(out, page.replace(/\.md$/, ''), `${first + 1}.ts`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, '\n'.repeat(first) + code.join('\n') + '\n');
    written += 1;
  }
}
for (const problem of problems) console.error(problem);
if (problems.length) process.exit(1);
console.log(
  `${written} blocks of docs/ to compile${skipped.length ? `; not compiled, as marked: ${skipped.join(', ')}` : ''}`,
);
