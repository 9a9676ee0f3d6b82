/**
 * A value that carries the JSON text it is written as: `jsonText` (time.ts) writes that text
 * as it is instead of walking the value, and `toJSON` gives the same JSON to a plain
 * `JSON.stringify`. For what the store already keeps as JSON text (a transcript's turns):
 * parsing it only to write it again was most of a transcript read's own cost
 * (docs/decisions/0007-transcript-turns-json.md).
 */
export abstract class PreEncodedJson {
  /** Valid JSON text of `toJSON()`'s value; it may differ in whitespace and in how numbers are spelled. */
  abstract readonly jsonText: string
  abstract toJSON(): unknown
}
