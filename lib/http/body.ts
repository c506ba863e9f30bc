import type Koa from 'koa';
import { badRequest, ManagementError, managementMisconfigured, requestTooLarge } from '../errors.js';
import { boundedText, parseJson, type JsonObject } from '../json.js';
import { isStorableJson, isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';

/** Reads a JSON object body of at most `limit` bytes, or the body a parser ahead of the API took, under the same checks. */
export async function readJsonObject(ctx: Koa.Context, limit: number): Promise<JsonObject> {
  if (!ctx.is('application/json')) throw badRequest('Content-Type must be application/json');
  const declared = Number(ctx.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);

  const text = ctx.req.readableEnded ? parsedBodyText(ctx, limit) : await readBodyText(ctx, limit);
  const parsed = parseJson(text, () => badRequest('body is not valid JSON'));
  if (!isJsonObject(parsed)) throw badRequest('body must be a JSON object');
  assertStorable(parsed, 'a field name');
  return parsed;
}

/** The JSON object body of a request that may send none: `{}` without one. */
export async function readOptionalJsonObject(ctx: Koa.Context, limit: number): Promise<JsonObject> {
  return ctx.request.length || ctx.get('transfer-encoding') ? readJsonObject(ctx, limit) : {};
}

/** Refuses the query parameters or body fields not in `allowed`, naming them. */
export function refuseUnknown(what: 'query parameter' | 'field', given: object, allowed: readonly string[] = []): void {
  const unknown = Object.keys(given).filter((name) => !allowed.includes(name));
  if (unknown.length) throw badRequest(`unknown ${what}: ${unknown.join(', ')}`);
}

async function readBodyText(ctx: Koa.Context, limit: number): Promise<string> {
  return boundedText(ctx.req, limit, () => tooLarge(limit)).catch((error: unknown) => {
    // The client went away mid-body: its request, not the service, failed.
    throw error instanceof ManagementError ? error : badRequest('the request body could not be read', error);
  });
}

/** The body a parser ahead of the API read (Koa's `ctx.request.body`, else Node's `req.body`), as JSON text. */
function parsedBodyText(ctx: Koa.Context, limit: number): string {
  const parsed = (ctx.request as { body?: unknown }).body ?? (ctx.req as { body?: unknown }).body;
  if (parsed === undefined) throw managementMisconfigured(BODY_CONSUMED);
  let text: string | undefined;
  if (typeof parsed === 'string') text = parsed;
  else if (Buffer.isBuffer(parsed)) text = parsed.toString('utf8');
  else {
    try {
      text = JSON.stringify(parsed);
    } catch {
      // A cycle or a BigInt: no JSON parser made it.
    }
  }
  if (text === undefined) throw badRequest('body is not valid JSON');
  if (Buffer.byteLength(text) > limit) throw tooLarge(limit);
  return text;
}

const BODY_CONSUMED =
  'the request body was read before the Management API, by something mounted ahead of it that left ' +
  'no parsed body in req.body or ctx.request.body: mount the Management API (or the provider) before ' +
  'it, or parse JSON with express.json() or @koa/bodyparser, whose parsed body the API takes';

/** Refuses members holding a string no store can hold (Invariant 49), naming the member, never echoing it. */
export function assertStorable(members: Readonly<Record<string, unknown>>, memberName: string): void {
  for (const [name, value] of Object.entries(members)) {
    if (!isStorableText(name)) throw badRequest(`${memberName} holds ${UNSTORABLE_TEXT}`);
    if (!isStorableJson(value)) throw badRequest(`${name} holds ${UNSTORABLE_TEXT}`);
  }
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tooLarge(limit: number): ManagementError {
  return requestTooLarge(`body exceeds ${limit} bytes`);
}
