#!/usr/bin/env node
// Checks the Markdown without the network: README.md stays short enough to read,
// and every relative link and #anchor in README.md, the repository's other
// top-level Markdown files and docs/*.md points at a file and a heading that exist.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const README_LIMIT = 15_000;

const files = [
  ...readdirSync(root).filter((name) => name.endsWith('.md')),
  ...readdirSync(path.join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const problems = [];

const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
if (readme.length > README_LIMIT)
  problems.push(`README.md: ${readme.length} characters, more than ${README_LIMIT}; move reference text to docs/`);

/** Markdown without fenced code blocks and inline code, where links are not links. */
function prose(text) {
  return text.replace(/^(```|~~~)[\s\S]*?^\1/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
const anchorCache = new Map();
function anchorsOf(file) {
  if (anchorCache.has(file)) return anchorCache.get(file);
  const anchors = new Set();
  const seen = new Map();
  const text = readFileSync(file, 'utf8').replace(/^(```|~~~)[\s\S]*?^\1/gm, '');
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count ? `${base}-${count}` : base);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(id);
  anchorCache.set(file, anchors);
  return anchors;
}

for (const file of files) {
  const absolute = path.join(root, file);
  const text = prose(readFileSync(absolute, 'utf8'));
  const targets = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]);
  for (const [, definition] of text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)) targets.push(definition);
  for (const target of targets) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto: are not checked offline
    const [pathPart, anchor] = target.split('#', 2);
    const resolved = pathPart ? path.resolve(path.dirname(absolute), decodeURIComponent(pathPart)) : absolute;
    if (!resolved.startsWith(root + path.sep) && resolved !== root) {
      problems.push(`${file}: ${target} leaves the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      problems.push(`${file}: ${target} does not exist`);
      continue;
    }
    if (anchor === undefined) continue;
    if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
      problems.push(`${file}: ${target} has an anchor but is no Markdown file`);
    } else if (!anchorsOf(resolved).has(anchor)) {
      problems.push(`${file}: ${target}: no heading has the anchor #${anchor}`);
    }
  }
}

if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  `documentation: ${files.length} Markdown files, links and anchors resolve; README.md ${readme.length} characters`,
);
