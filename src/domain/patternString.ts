/** What the string schemas of sizes and durations share: a documented pattern, and a readable decoding failure. */
import { Effect, Schema, SchemaIssue, type SchemaAST } from "effect"

/**
 * A string schema whose JSON Schema shows `pattern`, the shape of what decodes. It documents the
 * shape only: every string passes here, so the decoding after it reports its own, precise message.
 */
export const patternString = (pattern: string) =>
  Schema.String.check(Schema.makeFilter(() => true, { toJsonSchema: () => ({ pattern }) }))

/** A decoding of `text` that fails with `message`, for people. */
export const invalidText = (message: string, text: string, options: SchemaAST.ParseOptions) =>
  Effect.fail(new SchemaIssue.InvalidValue({ message }, text, options))
