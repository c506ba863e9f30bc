import type Koa from 'koa';
import { badRequest, ManagementError, requestTooLarge } from '../errors.js';
import type { JsonObject } from '../options.js';
import { isStorableJson, isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';

/**
 * Reads a JSON object body of at most `limit` bytes. Koa leaves body parsing
 * to the application, and a dependency for one bounded read is not worth it.
 */
export async function readJsonObject(ctx: Koa.Context, limit: number): Promise<JsonObject> {
  if (!ctx.is('application/json')) {
    throw badRequest('Content-Type must be application/json');
  }
  const declared = Number(ctx.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);

  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw tooLarge(limit);
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ManagementError) throw error;
    // The client went away mid-body: its request, not the service, failed.
    throw badRequest('the request body could not be read', error);
  }

  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw badRequest('body is not valid JSON');
  }
  if (!isJsonObject(parsed)) {
    throw badRequest('body must be a JSON object');
  }
  assertStorableFields(parsed);
  return parsed;
}

/**
 * Refuses a body with a string no store can hold, at any depth, before any of
 * it is used: otherwise it would fail (or, batched, fail others' writes) only
 * at the store. The field is named; its value is never echoed.
 */
function assertStorableFields(body: JsonObject): void {
  for (const [field, value] of Object.entries(body)) {
    if (!isStorableText(field)) throw badRequest(`a field name holds ${UNSTORABLE_TEXT}`);
    if (!isStorableJson(value)) throw badRequest(`${field} holds ${UNSTORABLE_TEXT}`);
  }
}

/** The same rule for the query string of every Management API request: the parameter is named, its value never echoed. */
export function assertStorableQuery(query: Readonly<Record<string, string | string[] | undefined>>): void {
  for (const [name, value] of Object.entries(query)) {
    if (!isStorableText(name)) {
      throw badRequest(`a query parameter name holds ${UNSTORABLE_TEXT}`);
    }
    if (!isStorableJson(value ?? null)) {
      throw badRequest(`${name} holds ${UNSTORABLE_TEXT}`);
    }
  }
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tooLarge(limit: number): ManagementError {
  return requestTooLarge(`body exceeds ${limit} bytes`);
}
