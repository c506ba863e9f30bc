#!/usr/bin/env node
// The package as someone who installed it reads it: run from their project's
// root (where node_modules is) with the package's name. Every relative link
// in the package's Markdown must reach a file of the package, and every
// documentation path a string of dist/ names (the errors' "see ..." hints)
// must be written from the project's root and reach a file of the package.
// A file the tarball leaves out, or a path only the repository has, fails.
// Anchors are not checked here: scripts/check-docs.mjs checks them in the repository.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const name = process.argv[2];
if (!name) {
  console.error('usage: node check-package-links.mjs <package name>  (from the project that installed it)');
  process.exit(2);
}
const projectRoot = process.cwd();
const packageRoot = path.join(projectRoot, 'node_modules', name);
const problems = [];

/** The package's own files: what it depends on may be installed inside it, and is not its text. */
function filesOf(folder, extension) {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith(extension) && !file.split(path.sep).includes('node_modules'))
    .sort();
}

function insidePackage(resolved) {
  return resolved.startsWith(packageRoot + path.sep) && existsSync(resolved);
}

/** Markdown without fenced code blocks and inline code, where links are not links (as scripts/check-docs.mjs reads it). */
function prose(text) {
  return text.replace(/^(```|~~~)[\s\S]*?^\1/gm, '').replace(/`[^`\n]*`/g, '');
}

function linkTargets(markdown) {
  const text = prose(markdown);
  const targets = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => match[1]);
  for (const [, definition] of text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)) targets.push(definition);
  for (const [, attribute] of text.matchAll(/<(?:a|img)\b[^>]*?\s(?:href|src)="([^"]+)"/g)) targets.push(attribute);
  return targets;
}

const markdownFiles = filesOf(packageRoot, '.md');
let links = 0;
for (const file of markdownFiles) {
  const absolute = path.join(packageRoot, file);
  for (const target of linkTargets(readFileSync(absolute, 'utf8'))) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: are not checked offline
    const [pathPart] = target.split('#', 1);
    if (!pathPart) continue; // an anchor in the same file
    links++;
    if (!insidePackage(path.resolve(path.dirname(absolute), decodeURIComponent(pathPart)))) {
      problems.push(`${file}: the link ${target} does not resolve inside the installed package`);
    }
  }
}

/** Every string literal of a JavaScript file, template literals' parts included; comments are not read. */
function stringsOf(file, source) {
  const strings = [];
  const visit = (node) => {
    if (ts.isStringLiteral(node) || ts.isTemplateLiteralToken(node)) strings.push(node.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(file, source, ts.ScriptTarget.Latest, false, ts.ScriptKind.JS));
  return strings;
}

/** Paths to documentation in a string: a Markdown file, or anything in a docs/ folder; URLs are not paths. */
function documentationPaths(text) {
  const withoutUrls = text.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S*/gi, '');
  const paths = [
    ...withoutUrls.matchAll(/(?<![\w@./-])(?:[\w@.-]+\/)*[\w.-]+\.md\b/g),
    ...withoutUrls.matchAll(/(?<![\w@./-])(?:[\w@.-]+\/)*docs\/[\w./-]*\w/g),
  ];
  return new Set(paths.map((match) => match[0]));
}

const distRoot = path.join(packageRoot, 'dist');
const scripts = filesOf(distRoot, '.js');
const prefix = `node_modules/${name}/`;
const named = new Set();
for (const file of scripts) {
  const absolute = path.join(distRoot, file);
  for (const text of stringsOf(absolute, readFileSync(absolute, 'utf8'))) {
    for (const documentation of documentationPaths(text)) {
      named.add(documentation);
      if (!documentation.startsWith(prefix)) {
        problems.push(
          `dist/${file}: "${documentation}" is not a path from the project's root; write it as ${prefix}...`,
        );
      } else if (!insidePackage(path.resolve(projectRoot, documentation))) {
        problems.push(`dist/${file}: "${documentation}" is not in the installed package`);
      }
    }
  }
}

if (!markdownFiles.length || !scripts.length) {
  problems.push(`${packageRoot}: no Markdown (${markdownFiles.length}) or no dist/**/*.js (${scripts.length}) found`);
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(
  `${markdownFiles.length} Markdown files, their ${links} relative links resolve inside the package; ` +
    `the ${named.size} documentation path(s) dist/ names resolve from the project's root (${[...named].join(', ')})`,
);
