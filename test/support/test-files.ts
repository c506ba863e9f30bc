/**
 * scripts/test-files.mjs, which picks the spec files of each run from what
 * they load (the store runs, the oidc-provider range), as the tests see it:
 * loaded from the tree's root, since build/ holds no copy of scripts/.
 */

export interface ModuleGraph {
  readonly build: string;
  loads(file: string): string[];
  usesSuiteAdapter(file: string): boolean;
  touchesProvider(file: string): boolean;
}

export interface TestFiles {
  ModuleGraph: new (build?: string) => ModuleGraph;
  runtimeSpecifiers(javascript: string, file: string): string[];
  select(selection: string, graph?: ModuleGraph): string[];
}

export function loadTestFiles(): Promise<TestFiles> {
  return import(new URL('../../../scripts/test-files.mjs', import.meta.url).href) as Promise<TestFiles>;
}
