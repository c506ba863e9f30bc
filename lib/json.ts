/** JSON as the plugin carries it (a subject token's `context`, an event's): types only, imported by options and events alike. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonObject | JsonValue[];
export interface JsonObject {
  [key: string]: JsonValue;
}
