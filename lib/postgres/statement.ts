/** A statement prepared once per connection under `name`, a name per table and part (a generic plan after its first calls). */
export type Statement = { name: string; text: string };
