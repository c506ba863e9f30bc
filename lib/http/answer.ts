import type Koa from 'koa';
import { reportError } from '../report-error.js';
import { DomainError, httpAnswerTo, ManagementError, managementServerError } from '../errors.js';

/** Every answer of the plugin's HTTP APIs: a success or `{ error, error_description }`, never cached; a 500's cause goes to `error`. */
export async function renderErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    const error = answerTo(caught);
    // A 503 without a cause is one its answer describes whole (a decision point that did not answer).
    if (error.status === 500 || (error.status > 500 && error.cause !== undefined))
      reportError(ctx.app, error.cause ?? error, ctx);
    ctx.status = error.status;
    ctx.body = error.toJSON();
  }
  ctx.set('Cache-Control', 'no-store');
}

/** What the caller is answered for `caught`. */
export function answerTo(caught: unknown): ManagementError {
  if (caught instanceof ManagementError) return caught;
  if (caught instanceof DomainError) return httpAnswerTo(caught);
  return managementServerError(caught);
}
