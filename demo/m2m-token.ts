/** The M2M token, reused until shortly before it expires; concurrent callers share one request. */
export class M2mTokenCache {
  #value: string | undefined;
  #refreshAt = 0;
  #pending: Promise<string> | undefined;
  fetched = 0;

  constructor(private readonly fetchToken: () => Promise<{ value: string; expiresIn: number }>) {}

  get(): Promise<string> {
    if (this.#value && Date.now() < this.#refreshAt) return Promise.resolve(this.#value);
    this.#pending ??= this.fetchToken()
      .then(({ value, expiresIn }) => {
        this.fetched += 1;
        this.#value = value;
        // Renew 30 seconds early (or halfway, for short-lived tokens).
        this.#refreshAt = Date.now() + (expiresIn - Math.min(30, expiresIn / 2)) * 1000;
        return value;
      })
      .finally(() => {
        this.#pending = undefined;
      });
    return this.#pending;
  }

  invalidate(): void {
    this.#value = undefined;
    this.#refreshAt = 0;
  }
}
