interface StatementBatchOptions {
  /** Most items one statement carries (default 256); a full batch goes out at once. */
  max?: number;
  /** Group commit: one statement in flight; what arrives meanwhile goes in the next, in order. Without it, one per turn. */
  oneInFlight?: boolean;
}

type Waiting<Item, Result> = { item: Item; resolve(result: Result): void; reject(error: unknown): void };

type Send<Item, Result> = (items: Item[]) => Promise<Result[]>;

/** Items asked for together, sent as one statement: one parse, plan, commit and round trip for all (Invariant 10). */
export class StatementBatch<Item, Result> {
  readonly #send: Send<Item, Result>;
  readonly #max: number;
  readonly #oneInFlight: boolean;
  #pending: Array<Waiting<Item, Result>> = [];
  #scheduled = false;
  #inFlight = false;

  constructor(send: Send<Item, Result>, { max = 256, oneInFlight = false }: StatementBatchOptions = {}) {
    this.#send = send;
    this.#max = max;
    this.#oneInFlight = oneInFlight;
  }

  add(item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (this.#oneInFlight) this.#sendNextInTurn();
      else if (this.#pending.length >= this.#max) this.#sendAll();
      else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#sendAll();
        });
      }
    });
  }

  #sendAll(): void {
    while (this.#pending.length) void this.#sendFirst();
  }

  #sendNextInTurn(): void {
    if (this.#inFlight || !this.#pending.length) return;
    this.#inFlight = true;
    void this.#sendFirst().finally(() => {
      this.#inFlight = false;
      this.#sendNextInTurn();
    });
  }

  /** Every caller is settled by sendIsolatingDataErrors, which itself never rejects. */
  #sendFirst(): Promise<unknown> {
    const batch = this.#pending.splice(0, this.#max);
    return sendIsolatingDataErrors(batch, async (waiting) => this.#send(waiting.map(({ item }) => item)));
  }
}

/** The items with one key kept once (the last wins), ordered by key (Invariant 3). */
export function lastByKey<Item>(items: Item[], keyOf: (item: Item) => string): Item[] {
  const last = new Map<string, Item>();
  for (const item of items) last.set(keyOf(item), item);
  return [...last.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map((key) => last.get(key)!);
}

/** A data exception (SQLSTATE class 22): PostgreSQL refused a value; nothing was done and the server is fine. */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code);
}

/** Sends one statement for `callers`, each settled with its own result (Invariant 10); never rejects. Resolves with the failure that is not a data error, when one stopped the callers. */
async function sendIsolatingDataErrors<Caller extends Omit<Waiting<unknown, Result>, 'item'>, Result>(
  callers: Caller[],
  send: (callers: Caller[]) => Promise<Result[]>,
): Promise<{ failure: unknown } | undefined> {
  let results: Result[];
  try {
    results = await send(callers);
  } catch (error) {
    if (!isDataError(error)) {
      for (const caller of callers) caller.reject(error);
      return { failure: error };
    }
    if (callers.length === 1) {
      callers[0]!.reject(error);
      return undefined;
    }
    const middle = Math.ceil(callers.length / 2);
    const stopped = await sendIsolatingDataErrors(callers.slice(0, middle), send);
    if (!stopped) return sendIsolatingDataErrors(callers.slice(middle), send);
    for (const caller of callers.slice(middle)) caller.reject(stopped.failure);
    return stopped;
  }
  for (const [at, caller] of callers.entries()) caller.resolve(results[at]!);
  return undefined;
}
