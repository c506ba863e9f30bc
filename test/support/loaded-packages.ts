import { readFileSync } from 'node:fs';

const lib = new URL('../../../lib/', import.meta.url);

/** What a module imports at run time (`import type` and `export type` are erased). */
const RUNTIME_IMPORT = /^(?:import|export)\s+(type\s+)?(?:[^;'"]*?\s+from\s+)?'([^']+)';/gms;
/** What it imports on demand, `await import('...')`. */
const DYNAMIC_IMPORT = /\bimport\(\s*'([^']+)'\s*\)/g;

/**
 * Every module specifier outside lib/ (a package, a package's file, a `node:`
 * built-in) that a module of lib/ loads, itself or through the modules of lib/
 * it imports, on demand too. `entry` is relative to lib/, as `resource-server/index.ts`.
 */
export function packagesLoadedBy(entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const pending = [new URL(entry, lib)];
  for (let file = pending.pop(); file; file = pending.pop()) {
    if (seen.has(file.href)) continue;
    seen.add(file.href);
    const source = readFileSync(file, 'utf8');
    const specifiers = [
      ...[...source.matchAll(RUNTIME_IMPORT)].filter(([, typeOnly]) => !typeOnly).map(([, , specifier]) => specifier!),
      ...[...source.matchAll(DYNAMIC_IMPORT)].map(([, specifier]) => specifier!),
    ];
    for (const specifier of specifiers) {
      if (specifier.startsWith('.')) pending.push(new URL(specifier.replace(/\.js$/, '.ts'), file));
      else packages.add(specifier);
    }
  }
  return packages;
}

/** The package a specifier names: `oidc-provider/lib/x.js` → `oidc-provider`, `@koa/router` as it is. */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}
