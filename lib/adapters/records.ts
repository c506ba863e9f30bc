import type { AdapterPayload } from 'oidc-provider';

/** A plugin record as an adapter entry: `kind` tells it from oidc-provider's entries and from the other kinds. */
export function recordPayload(kind: string, record: object): AdapterPayload {
  return { ...record, kind } as unknown as AdapterPayload;
}

/** The record of `kind` an entry holds, without `kind`, when its `id` is a string and `fields` are of the types named. */
export function recordOf<T>(
  kind: string,
  payload: unknown,
  fields: Readonly<Record<string, 'string' | 'number'>> = {},
) {
  const entry = payload as Record<string, unknown> | undefined;
  if (entry?.['kind'] !== kind || typeof entry['id'] !== 'string') return undefined;
  for (const name in fields) if (typeof entry[name] !== fields[name]) return undefined;
  const { kind: _kind, ...record } = entry;
  return record as T & { consumed?: unknown };
}
