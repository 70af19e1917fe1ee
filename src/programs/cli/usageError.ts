/** The error of a command line the user can correct. */
import { Schema } from "effect"

/** A failure the user caused and can fix; printed as it is, exit code 1. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}
